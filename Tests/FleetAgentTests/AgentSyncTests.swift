import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `fleetsetd` as a process against `fleetset-server` on 127.0.0.1: first sync, long-poll
/// propagation, refusals, faults, the read-side CLI, SIGTERM.
@Suite("fleetsetd syncs with the real server")
struct AgentSyncTests {
    @Test(
        "first sync enrolls, writes settings, reports applied; a change arrives by long-poll; the CLI reads it; SIGTERM mid long-poll exits 0"
    )
    func firstSyncAndChange() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "lobby")
        try await fleet.set("lobby", ["pin": "4711"])
        let agent = try await fleet.launchAgent([["id": "lobby"]], storeMetadata: false)
        defer { agent.kill() }

        let first = try await fleet.waitForSettings("lobby", agent: agent) { _ in true }
        #expect(first.app == "lobby" && first.schemaVersion == 1)
        #expect(first.values == ["greeting": "hello", "volume": 5, "pin": "4711", "counter": 0])
        let identity = try fleet.identity()
        #expect(identity.deviceId.hasPrefix("d-"))
        #expect(try Self.mode(fleet.layout.identityFile) == 0o600)
        #expect(try Self.mode(fleet.layout.settingsFile("lobby").path) == 0o640)
        try await fleet.waitForStatusLine(
            "lobby", containing: ["revision=\(first.revision)", "state=applied", "source=agent"], agent: agent)
        let applied = try await fleet.waitForStatus("lobby", agent: agent) { $0.state == .applied }
        #expect(applied.revision == first.revision && applied.lastError == nil && applied.lastSync != nil)

        // The agent now waits in a long-poll; an admin change answers it.
        try await fleet.server.running.waitForLog("event=long-poll app=lobby device=\(identity.deviceId) revision=\(first.revision)")
        try await fleet.set("lobby", ["greeting": "hi there", "volume": 7])
        let second = try await fleet.waitForSettings("lobby", agent: agent) { $0.revision > first.revision }
        #expect(second.values["greeting"] == "hi there" && second.values["volume"] == 7)
        let previous = try #require(SettingsOnDisk.load(fleet.layout.settingsFile("lobby"), app: "lobby").settings)
        #expect(previous.revision == second.revision)
        #expect(FileManager.default.fileExists(atPath: fleet.layout.settingsFile("lobby").previousPath))
        try await fleet.waitForStatusLine("lobby", containing: ["revision=\(second.revision)", "state=applied"], agent: agent)
        try await agent.waitForLog("changed=greeting,volume")

        // The read side of the CLI, through the agent's own configuration file.
        let get = try await fleet.cli(["get", "greeting"])
        #expect(get.status == 0 && get.standardOutput == "hi there\n", "\(get)")
        let getJSON = try await fleet.cli(["get", "--json", "greeting"])
        #expect(getJSON.standardOutput == "\"hi there\"\n")
        let secret = try await fleet.cli(["get", "pin"])
        #expect(secret.status == 1 && secret.standardError.contains("pin is a secret") && !secret.standardOutput.contains("4711"))
        let missing = try await fleet.cli(["get", "nope"])
        #expect(missing.status == 1 && missing.standardError.contains("lobby has no setting /nope"))
        let show = try await fleet.cli(["show"])
        #expect(show.status == 0 && show.standardOutput.contains("Greeting [greeting]: \"hi there\""), "\(show)")
        #expect(show.standardOutput.contains("pin: \"********\"") && !show.standardOutput.contains("4711"))
        let status = try await fleet.cli(["status"])
        // The table (its header and one app), then the agent policy, here the configuration's alone.
        let columns = status.lines.dropFirst().first?.split(separator: " ").map(String.init) ?? []
        #expect(
            status.status == 0 && status.lines.first?.hasPrefix("APP") == true
                && Array(columns.prefix(3)) == ["lobby", "\(second.revision)", "applied"], "\(status)")
        // The server has set no policy: each key is the configuration's pin or the default.
        #expect(status.lines.contains { $0.hasPrefix("Agent policy (a key set in ") }, "\(status)")
        #expect(status.lines.contains { $0.hasPrefix("lobby jitter ") && $0.hasSuffix("pinned in the configuration file") }, "\(status)")
        #expect(status.lines.contains { $0.hasPrefix("lobby pollInterval ") && $0.hasSuffix(" default") }, "\(status)")
        #expect(!status.lines.contains { $0.contains("server (") }, "\(status)")

        // SIGTERM while the next long-poll is held by the server.
        try await fleet.server.running.waitForLog("event=long-poll app=lobby device=\(identity.deviceId) revision=\(second.revision)")
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        #expect(agent.log.contains("event=stopped"))
        for secret in [identity.deviceToken, "4711"] {
            #expect(!mentions(agent.log, secret: secret) && !mentions(fleet.server.log, secret: secret))
        }
    }

    @Test("metadata forced over stored values: error reported with pointers, the old file kept, the agent goes on")
    func forcedInvalidMetadata() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "panel")
        try await fleet.set("panel", ["volume": 8])
        let agent = try await fleet.launchAgent([["id": "panel"]], storeMetadata: false)
        defer { agent.kill() }
        let good = try await fleet.waitForSettings("panel", agent: agent) { $0.values["volume"] == 8 }
        let goodBytes = try Data(contentsOf: URL(fileURLWithPath: fleet.layout.settingsFile("panel").path))

        // Version 2 allows volume up to 3; the stored 8 breaks it, so only --force stores it.
        try await fleet.putMetadata(app: "panel", version: 2, volumeMaximum: 3, force: true)
        let line = try await fleet.waitForStatusLine("panel", containing: ["state=error", "schema_version=2"], agent: agent)
        #expect(line.contains("/volume: must be <= 3 (got 8)"), "\(line)")
        let status = try await fleet.waitForStatus("panel", agent: agent) { $0.state == .error }
        #expect(status.revision == good.revision && status.latestRevision ?? 0 > good.revision)
        #expect(status.lastError?.contains("is not valid for metadata version 2: /volume: must be <= 3 (got 8)") == true)
        #expect(try Data(contentsOf: URL(fileURLWithPath: fleet.layout.settingsFile("panel").path)) == goodBytes)
        let cli = try await fleet.cli(["status"])
        #expect(cli.status == 1 && cli.standardOutput.contains("error"))

        // Fixing the value brings the app back to applied with schema version 2.
        try await fleet.set("panel", ["volume": 2])
        let fixed = try await fleet.waitForSettings("panel", agent: agent) { $0.schemaVersion == 2 }
        #expect(fixed.values["volume"] == 2)
        try await fleet.waitForStatus("panel", agent: agent) {
            $0.state == .applied && $0.revision == fixed.revision && $0.lastError == nil
        }
        #expect(agent.isRunning)
    }

    @Test("metadata the validator cannot honour (from a newer server) is reported unsupported; the last good settings stay")
    func unsupportedMetadata() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        let agent = try await fleet.launchAgent([["id": "sign"]], server: proxy.url)
        defer { agent.kill() }
        let good = try await fleet.waitForSettings("sign", agent: agent) { _ in true }

        proxy.inject(.unsupportedMetadata)
        try await fleet.putMetadata(app: "sign", version: 2)
        let line = try await fleet.waitForStatusLine("sign", containing: ["state=unsupported", "schema_version=2"], agent: agent)
        #expect(line.contains("asks for what this agent cannot honour") && line.contains("draft"), "\(line)")
        #expect(fleet.settings("sign") == good)
        try await fleet.waitForStatus("sign", agent: agent) { $0.state == .unsupported && $0.revision == good.revision }
        #expect(agent.isRunning)
    }

    @Test("500 with Retry-After, garbage and an oversized body: the last good file stays, the agent stays up and recovers")
    func serverFaults() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        let agent = try await fleet.launchAgent([["id": "till"]], server: proxy.url)
        defer { agent.kill() }
        let good = try await fleet.waitForSettings("till", agent: agent) { _ in true }
        let goodBytes = try Data(contentsOf: URL(fileURLWithPath: fleet.layout.settingsFile("till").path))

        let faults: [(FaultProxy.Fault, String)] = [
            (.serverError(retryAfter: 1), "500"),
            (.garbage, "not JSON"),
            (.oversized(bytes: 5 << 20), "larger than the limit of 4 MiB"),
        ]
        for (fault, expected) in faults {
            proxy.inject(fault)
            // `fleetset sync` cuts the held long-poll short, so the next request meets the fault.
            #expect(try await fleet.cli(["sync"]).status == 0)
            try await Waiting.until("no fault answered") { proxy.faultsServed("\(fault)") >= 1 }
            try await agent.waitForLog("event=sync-failed", count: faults.firstIndex { $0.0 == fault }! + 1)
            try await fleet.waitForStatus("till", agent: agent) { $0.lastError?.contains(expected) == true }
            #expect(try Data(contentsOf: URL(fileURLWithPath: fleet.layout.settingsFile("till").path)) == goodBytes)
            #expect(agent.isRunning)
        }
        #expect(agent.log.contains("retry_in="))

        proxy.inject(.none)
        try await fleet.set("till", ["counter": 1])
        #expect(try await fleet.cli(["sync"]).status == 0)
        let recovered = try await fleet.waitForSettings("till", agent: agent) { $0.revision > good.revision }
        #expect(recovered.values["counter"] == 1)
        try await fleet.waitForStatus("till", agent: agent) { $0.state == .applied && $0.lastError == nil }
    }

    @Test(
        "polling on the timer: the HTTP client repeats the 304s at the timer's pace, and a change made meanwhile comes with the next poll")
    func timerPollsRepeatedByTheClient() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        try await fleet.putMetadata(app: "panel")
        try await fleet.set("panel", ["volume": 4])
        try await fleet.makeEnrollmentToken()
        try fleet.writeConfiguration(apps: [["id": "panel"]], server: proxy.url, extra: ["longPollWait": 0, "pollInterval": 0.1])
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await fleet.waitForSettings("panel", agent: agent) { $0.values["volume"] == 4 }
        let first = proxy.settingsAnswers(304)
        try await Waiting.until("no 304s; agent log:\n\(agent.log)") { proxy.settingsAnswers(304) >= first + 3 }
        // While the answers are unchanged, only the HTTP client's thread wakes: every other
        // thread of the agent sleeps through 40 polls (counted once the agent's one-time work
        // after start-up is done). The polls come at the fastest pace the configuration allows,
        // 0.1 s: what else wakes a thread (the runtime's own timers) comes at a pace of its own,
        // so the faster the polls, the further a thread that took part stands above that noise.
        try await agent.waitForLog("event=memory")
        let wakesBefore = try Self.contextSwitches(of: agent.pid)
        let polled = proxy.settingsAnswers(304)
        try await Waiting.until("the 304s stopped coming; agent log:\n\(agent.log)") { proxy.settingsAnswers(304) >= polled + 40 }
        let wakesAfter = try Self.contextSwitches(of: agent.pid)
        let httpWakes = wakesAfter.http - wakesBefore.http
        var otherWakes = wakesAfter.others.map { thread, count in count - (wakesBefore.others[thread] ?? 0) }.sorted()
        // ThreadSanitizer's runtime adds a thread of its own that wakes every 100 ms.
        if ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil { otherWakes = otherWakes.dropLast() }
        let polls = proxy.settingsAnswers(304) - polled
        #expect(httpWakes >= polls, "the HTTP thread wakes for every poll")
        // A thread that took part in the polls would wake at least once for each: every other
        // thread woke fewer times than there were polls, so none of them does. (What wakes them
        // is the runtime's own timers, more of them on a machine busy with other tests: one
        // thread woke 21 times in the 4 s of 20 polls at 0.2 s in a loaded run, so 40 polls at
        // 0.1 s in the same time leave it about half.)
        #expect(
            (otherWakes.last ?? 0) < polls,
            "the agent's other threads woke for the 304s: \(otherWakes) for \(polls) polls, its HTTP thread \(httpWakes) times")

        let changesBefore = proxy.settingsAnswers(200)
        try await fleet.set("panel", ["volume": 6])
        let unchangedBefore = proxy.settingsAnswers(304)
        let changed = try await fleet.waitForSettings("panel", agent: agent) { $0.values["volume"] == 6 }
        #expect(proxy.settingsAnswers(200) == changesBefore + 1, "the change was downloaded once")
        #expect(proxy.settingsAnswers(304) <= unchangedBefore + 1, "the first poll after the change brought it")
        try await fleet.waitForStatus("panel", agent: agent) {
            $0.state == .applied && $0.revision == changed.revision && $0.lastError == nil
        }
        // And the repeats go on after it.
        let after = proxy.settingsAnswers(304)
        try await Waiting.until("no 304s after the change; agent log:\n\(agent.log)") { proxy.settingsAnswers(304) >= after + 5 }
        #expect(agent.isRunning)
    }

    /// The context switches of a process's HTTP client thread, and of each of its other threads.
    static func contextSwitches(of pid: Int32) throws -> (http: Int, others: [String: Int]) {
        var http = 0
        var others: [String: Int] = [:]
        for thread in try FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            // A thread may end between the listing and the reading: it is skipped.
            guard let name = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/comm", encoding: .utf8),
                let status = try? String(contentsOfFile: "/proc/\(pid)/task/\(thread)/status", encoding: .utf8)
            else { continue }
            // Voluntary switches only: a thread that blocks and is woken. Involuntary ones are the
            // scheduler taking the core away, which the suite's other tests (a browser among them)
            // cause on a busy machine, and say nothing about what the agent does.
            let switches = status.split(separator: "\n").filter { $0.hasPrefix("voluntary_ctxt_switches:") }
                .compactMap { Int($0.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "") }.reduce(0, +)
            if name.hasPrefix("fleetset-http") { http += switches } else { others[thread] = switches }
        }
        return (http, others)
    }

    @Test("over HTTPS: the server's certificate must chain to caFile; without it the agent refuses and says why, then syncs once trusted")
    func https() async throws {
        let fleet = try await Fleet.start(tls: true)
        defer { Task { await fleet.stop() } }
        #expect(fleet.server.url.hasPrefix("https://127.0.0.1:"))
        // First without caFile: the system's CAs do not trust a self-signed certificate.
        let agent = try await fleet.launchAgent([["id": "secure"]])
        defer { agent.kill() }
        // The first attempt may fail otherwise on a loaded machine (a handshake timing out); the
        // agent retries, and the untrusted certificate is what it must say.
        let refused = try await agent.waitForLog("is not trusted")
        #expect(refused.contains("event=enroll-failed"), "\(refused)")
        #expect(fleet.settings("secure") == nil)
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)

        try fleet.writeConfiguration(apps: [["id": "secure"]], extra: ["caFile": .string(fleet.certificateFile)])
        let trusting = try fleet.startAgent()
        defer { trusting.kill() }
        let settings = try await fleet.waitForSettings("secure", agent: trusting) { _ in true }
        try await fleet.waitForStatusLine("secure", containing: ["revision=\(settings.revision)", "state=applied"], agent: trusting)
        try await fleet.set("secure", ["counter": 9])
        try await fleet.waitForSettings("secure", agent: trusting) { $0.values["counter"] == 9 }
    }

    static func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) ?? -1
    }
}
