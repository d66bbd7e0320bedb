import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol
import FleetSettings
import FleetTestSupport
import Foundation
import Testing

/// Local changes, the inbox's checks and app acknowledgements, end to end: `fleetset` and the
/// FleetSettings library on the device side, `fleetsetd`, and `fleetset-server` on 127.0.0.1.
@Suite("Write-back, the inbox and acknowledgements")
struct WriteBackTests {
    /// The journal the agent keeps for `app`.
    static func journal(_ fleet: Fleet, _ app: String) throws -> ChangeJournal {
        try ChangeJournal.load(fleet.layout.changesFile(app))
    }

    /// Waits until `changes.json` satisfies `condition`.
    @discardableResult
    static func waitForJournal(_ fleet: Fleet, _ app: String, agent: RunningProcess, _ condition: (ChangeJournal) -> Bool) async throws
        -> ChangeJournal
    {
        var found = ChangeJournal()
        try await Waiting.until("changes.json never matched: \(found.json.serialized()); agent log:\n\(agent.log)") {
            found = (try? journal(fleet, app)) ?? ChangeJournal()
            return condition(found)
        }
        return found
    }

    @Test("set --wait: the value is confirmed by the server, downloaded again and in settings.json; status and explain show it")
    func setAndWait() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }

        let set = try await fleet.cli(["set", "greeting=Welcome, 7", "--wait", "--timeout", "20"])
        #expect(set.status == 0, "\(set)\n\(agent.log)")
        let settings = try #require(fleet.settings("kiosk"))
        #expect(settings.values["greeting"] == "Welcome, 7" && settings.revision > first.revision)
        #expect(set.standardOutput == "applied in revision \(settings.revision): greeting\n")
        #expect(fleet.server.log.contains("event=device-write app=kiosk"))
        try await agent.waitForLog("event=change-applied")
        let journal = try Self.journal(fleet, "kiosk")
        #expect(journal.queued.isEmpty && journal.ended.map(\.state) == [.applied])

        // Setting the value it has already: nothing is sent, the change is applied at once.
        let same = try await fleet.cli(["set", "greeting=Welcome, 7", "--wait"])
        #expect(same.status == 0 && same.standardOutput == "applied in revision \(settings.revision): greeting\n", "\(same)")

        let status = try await fleet.cli(["status"])
        #expect(status.standardOutput.contains("local changes") && status.standardOutput.contains("applied"), "\(status)")
        let explain = try await fleet.cli(["explain"])
        let row = explain.lines.first { $0.hasPrefix("greeting") } ?? ""
        #expect(explain.status == 0 && row.contains("\"Welcome, 7\"") && row.contains("device"), "\(explain)")
        #expect(explain.standardOutput.contains("pin") && explain.standardOutput.contains("********"))

        // A secret from standard input: never on the command line, never in any output or log.
        let secret = try await fleet.cli(["set", "--stdin", "pin", "--wait"], input: "4711\n")
        #expect(secret.status == 0 && secret.standardOutput.hasSuffix(": pin\n"), "\(secret)")
        #expect(fleet.settings("kiosk")?.values["pin"] == "4711")
        for text in [secret.standardOutput, secret.standardError, agent.log, fleet.server.log] { #expect(!mentions(text, secret: "4711")) }

        // --reset removes the device's own value: the fleet's applies again.
        let reset = try await fleet.cli(["set", "--reset", "greeting", "--wait"])
        #expect(reset.status == 0, "\(reset)")
        #expect(fleet.settings("kiosk")?.values["greeting"] == "hello")
    }

    @Test(
        "refused locally with a clear message: a key that is not x-writable, a value of the wrong type; a request that bypasses the CLI is refused by the agent and recorded"
    )
    func refusedLocally() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }

        let notWritable = try await fleet.cli(["set", "volume=3"])
        #expect(notWritable.status == 1)
        #expect(
            notWritable.standardError
                == "fleetset set: kiosk: the change cannot be made: /volume: is not x-writable: only the fleet's administrators may change it\n"
        )
        let unknown = try await fleet.cli(["set", "colour=red"])
        #expect(unknown.status == 1 && unknown.standardError.contains("/colour: is not a setting of kiosk"), "\(unknown)")
        let usage = try await fleet.cli(["set", "greeting"])
        #expect(usage.status == 2 && usage.standardError.contains("\"greeting\" is not KEY=VALUE"))

        // Straight into the inbox: the agent checks as the CLI does.
        let id = try InboxRequest.set(["volume": 3, "greeting": "x"]).submit(to: fleet.layout.inboxDirectory("kiosk"))
        let journal = try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.lookup(id) != .unknown }
        guard case .ended(let outcome) = journal.lookup(id) else {
            Issue.record("not ended: \(journal.lookup(id))")
            return
        }
        #expect(outcome.state == .refused && outcome.message.contains("/volume: is not x-writable"))
        #expect(!fleet.server.log.contains("event=device-write"))
        #expect(
            FleetApp("kiosk", stateDirectory: fleet.layout.stateDirectory, inboxDirectory: fleet.layout.inboxDirectory).outcome(
                ofRequest: id)
                == .refused(outcome.message))
        try await Waiting.until("the request file stays") {
            !FileManager.default.fileExists(atPath: fleet.layout.inboxDirectory("kiosk") + "/\(id).json")
        }
    }

    @Test(
        "set while the server is down: queued, pending at the timeout, kept across an agent restart, applied exactly once when the server is back"
    )
    func offlineSetAcrossRestart() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        var agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let port = fleet.server.port
        fleet.server.signal(SIGTERM)
        await #expect(fleet.server.waitForExit() == 0)

        let pending = try await fleet.cli(["set", "greeting=offline", "--wait", "--timeout", "1"])
        #expect(pending.status == 3 && pending.standardError.contains("still pending"), "\(pending)")
        let queued = try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.queued.count == 1 }
        #expect(queued.queued[0].values == ["greeting": "offline"])
        try await fleet.waitForStatus("kiosk", agent: agent) { $0.pendingChanges == 1 }
        // Two later changes of the same key coalesce: only the newest value is sent.
        #expect(try await fleet.cli(["set", "greeting=offline again"]).status == 0)
        try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.queued.count == 1 && $0.ended.map(\.state) == [.superseded] }

        agent.signal(SIGKILL)
        _ = await agent.waitForExit()
        agent = try fleet.startAgent()
        try await agent.waitForLog("event=sync-failed")
        let revived = try await ServerProcess.start(in: fleet.directory, port: port)
        defer { revived.kill() }
        let applied = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "offline again" }
        #expect(applied.revision > first.revision)
        try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.queued.isEmpty && $0.ended.last?.state == .applied }
        #expect(revived.log.components(separatedBy: "event=device-write").count - 1 == 1, "\(revived.log)")
        try await fleet.waitForStatus("kiosk", agent: agent) { $0.pendingChanges == 0 }
    }

    @Test("kill -9 while the server holds the write: the change is sent again after the restart and applied once")
    func killedMidPush() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        var agent = try await fleet.launchAgent([["id": "kiosk"]], server: proxy.url)
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        proxy.inject(.holdPatch)
        #expect(try await fleet.cli(["set", "greeting=held"]).status == 0)
        try await Waiting.until("the write never reached the proxy:\n\(agent.log)") { proxy.faultsServed("holdPatch") == 1 }
        agent.signal(SIGKILL)
        _ = await agent.waitForExit()
        #expect(try Self.journal(fleet, "kiosk").queued.map(\.values) == [["greeting": "held"]])
        proxy.inject(.none)
        agent = try fleet.startAgent()
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "held" }
        try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.queued.isEmpty && $0.ended.map(\.state) == [.applied] }
    }

    @Test("a write that races an admin change gets 409, is checked against the new revision and sent again")
    func conflict() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let first = try await fleet.syncOnceAndStop([["id": "kiosk"]])
        // The admin changes a setting while the device holds revision `first`, and the device
        // changes another, based on `first`.
        try await fleet.set("kiosk", ["volume": 9])
        #expect(try await fleet.cli(["set", "greeting=raced"]).status == 0)
        let agent = try fleet.startAgent()
        defer { agent.kill() }
        let merged = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "raced" }
        #expect(merged.values["volume"] == 9 && merged.revision > first.revision + 1)
        try await agent.waitForLog("event=change-conflict")
        try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.ended.map(\.state) == [.applied] }
    }

    @Test(
        "the inbox refuses malformed, oversized, symlinked and hard-linked files and writers not allowed; each moved aside with its reason; the agent stays alive"
    )
    func inboxRefusals() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let inbox = fleet.layout.inboxDirectory("kiosk")
        let outside = fleet.directory + "/outside.json"
        try FileSystemWrite.text("{\"request\": \"sync\"}", to: outside, mode: 0o644)

        try FileSystemWrite.text("{\"request\": \"set\", \"values\": ", to: inbox + "/.malformed.tmp", mode: 0o644)
        #expect(rename(inbox + "/.malformed.tmp", inbox + "/malformed.json") == 0)
        try FileSystemWrite.text(
            "{\"request\": \"sync\", \"pad\": \"" + String(repeating: "x", count: 70_000) + "\"}", to: inbox + "/.big", mode: 0o644)
        #expect(rename(inbox + "/.big", inbox + "/oversized.json") == 0)
        #expect(symlink(outside, inbox + "/symlinked.json") == 0)
        #expect(link(outside, inbox + "/hardlinked.json") == 0)
        try FileSystemWrite.text("{\"request\": \"launch\"}", to: inbox + "/.unknown", mode: 0o644)
        #expect(rename(inbox + "/.unknown", inbox + "/unknown.json") == 0)
        var expected: [String: String] = [
            "malformed.json": "not a request", "oversized.json": "more than the 65536 a request may have",
            "symlinked.json": "not a regular file", "hardlinked.json": "has 2 hard links", "unknown.json": "must be one of",
        ]
        if geteuid() == 0 {
            // A file owned by a user who is not among the app's writers.
            try FileSystemWrite.text(
                "{\"request\": \"set\", \"values\": {\"greeting\": \"intruder\"}}", to: inbox + "/.foreign", mode: 0o644)
            #expect(chown(inbox + "/.foreign", 65534, 65534) == 0)
            #expect(rename(inbox + "/.foreign", inbox + "/foreign.json") == 0)
            expected["foreign.json"] = "written by uid 65534 (gid 65534), who may not change this app's settings"
        } else {
            print(
                "inboxRefusals: not root, so a file of another owner cannot be made; the writers check is covered by RequestFileCheck's tests"
            )
        }
        let refused = inbox + "/refused"
        for (name, reason) in expected {
            try await Waiting.until("\(name) was not moved aside:\n\(agent.log)") {
                FileManager.default.fileExists(atPath: refused + "/" + name + ".reason")
            }
            let recorded = try String(contentsOfFile: refused + "/" + name + ".reason", encoding: .utf8)
            #expect(recorded.contains(reason), "\(name): \(recorded)")
            #expect(!FileManager.default.fileExists(atPath: inbox + "/" + name))
        }
        // Refusals of files from allowed writers (here root's) are recorded for set --wait and the
        // library; a stranger's are not, so nobody can push real outcomes out of changes.json.
        let journal = try await Self.waitForJournal(fleet, "kiosk", agent: agent) { $0.lookup("malformed") != .unknown }
        guard case .ended(let outcome) = journal.lookup("malformed") else { return }
        #expect(outcome.state == .refused && outcome.message.hasPrefix("refused by the inbox: not a request"))
        if geteuid() == 0 {
            #expect(journal.lookup("foreign") == .unknown)
            #expect(fleet.settings("kiosk")?.values["greeting"] == "hello")
        }
        #expect(agent.count("event=inbox-refused") >= expected.count)
        // Alive and syncing.
        try await fleet.set("kiosk", ["volume": 2])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > first.revision && $0.values["volume"] == 2 }
        #expect(agent.isRunning)
    }

    @Test(
        "a local user flooding an inbox costs a line and a rename for the first 20 files only; the rest are removed and counted",
        .enabled(if: geteuid() == 0, "files of another owner can be made as root only; RefusalThrottleTests cover the rule"))
    func inboxFlood() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let inbox = fleet.layout.inboxDirectory("kiosk")
        // 200 requests from uid 65534, who is not among the app's writers.
        for index in 0..<200 {
            let staging = inbox + "/.flood-\(index)"
            try FileSystemWrite.text("{\"request\": \"sync\"}", to: staging, mode: 0o644)
            #expect(chown(staging, 65534, 65534) == 0)
            #expect(rename(staging, inbox + "/flood-\(index).json") == 0)
        }
        try await Waiting.until("the flood was not taken:\n\(agent.log)") {
            ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).allSatisfy { !$0.hasPrefix("flood-") }
        }
        let handled = agent.count("event=inbox-refused ")
        #expect((20...25).contains(handled), "\(handled) refusals logged one by one")
        #expect(agent.count("event=inbox-refused-quietly") == 1)
        let aside = try FileManager.default.contentsOfDirectory(atPath: inbox + "/refused").filter { $0.hasSuffix(".reason") }
        #expect(aside.count == handled)
        // Alive and syncing.
        try await fleet.set("kiosk", ["volume": 3])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > first.revision && $0.values["volume"] == 3 }
        #expect(agent.isRunning)
    }

    @Test("an app's acknowledgement is relayed with source app: in the server's log and its device list")
    func appAcknowledgement() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let settings = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        try await fleet.waitForStatusLine("kiosk", containing: ["revision=\(settings.revision)", "source=agent"], agent: agent)

        let ack = try await fleet.cli(["ack", "--revision", "\(settings.revision)", "--state", "error", "--message", "printer offline"])
        #expect(ack.status == 0, "\(ack)")
        let line = try await fleet.waitForStatusLine("kiosk", containing: ["source=app", "state=error"], agent: agent)
        #expect(line.contains("revision=\(settings.revision)") && line.contains("printer offline"))
        let devices = try await fleet.admin.devices(app: "kiosk")
        let status = try #require(devices.devices.first?.status)
        #expect(status.report.source == .app && status.report.state == .error && status.report.message == "printer offline")
        try await agent.waitForLog("event=app-ack")

        let future = try await fleet.cli(["ack", "--revision", "\(settings.revision + 50)", "--state", "applied"])
        #expect(future.status == 0)
        try await agent.waitForLog("but the newest revision in settings.json is")
        let bad = try await fleet.cli(["ack", "--revision", "1", "--state", "done"])
        #expect(bad.status == 2)
    }

    @Test("expectAck: an app silent past ackTimeout is reported unsupported")
    func acknowledgementTimeout() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk", "expectAck": true, "ackTimeout": 2]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let line = try await fleet.waitForStatusLine(
            "kiosk", containing: ["revision=\(first.revision)", "state=unsupported"], agent: agent)
        #expect(line.contains("no acknowledgement from the app") && line.contains("source=agent"))
        try await fleet.waitForStatus("kiosk", agent: agent) { $0.awaitingAck == nil && $0.state == .unsupported }
    }

    @Test("expectAck: an app that acknowledges in time is not reported unsupported, and nothing is awaited any more")
    func acknowledgedInTime() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        // Ten minutes: the test acknowledges long before, however loaded the machine.
        let agent = try await fleet.launchAgent([["id": "kiosk", "expectAck": true, "ackTimeout": 600]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let app = FleetApp("kiosk", stateDirectory: fleet.layout.stateDirectory, inboxDirectory: fleet.layout.inboxDirectory)
        try app.acknowledge(revision: first.revision, state: .applied, message: "started")

        // The next revision is acknowledged by the app through the library: no timeout report.
        try await fleet.set("kiosk", ["volume": 1])
        let second = try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > first.revision }
        try await fleet.waitForStatus("kiosk", agent: agent) { $0.awaitingAck == second.revision }
        try app.acknowledge(revision: second.revision, state: .applied, message: "reloaded")
        try await fleet.waitForStatusLine(
            "kiosk", containing: ["revision=\(second.revision)", "source=app", "state=applied"], agent: agent)
        let settled = try await fleet.waitForStatus("kiosk", agent: agent) { $0.awaitingAck == nil }
        #expect(settled.ackDeadline == nil && settled.state == .applied)
        #expect(!fleet.statusLines("kiosk").contains { $0.contains("state=unsupported") })
    }

    @Test("the library's change stream and fleetset watch see every revision in order, secrets masked in watch")
    func changeStream() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let app = FleetApp("kiosk", stateDirectory: fleet.layout.stateDirectory, inboxDirectory: fleet.layout.inboxDirectory)
        let watch = try RunningProcess(CLIRunner.binary, ["watch", "--config", fleet.configurationFile], standardOutputToLog: true)
        defer { watch.kill() }
        let collected = Task {
            var seen: [(Int64, [String])] = []
            for await change in app.changes(after: first.revision) {
                seen.append((change.settings.revision, change.changedKeys))
                if seen.count == 4 { break }
            }
            return seen
        }
        try await Task.sleep(for: .milliseconds(300))
        // `watch` reads the revision it starts after, then watches the file (inotify): writing
        // before it got that far would make the first write its starting point, not a change.
        let fds = "/proc/\(watch.pid)/fd"
        for _ in 0..<200 {
            let watching = ((try? FileManager.default.contentsOfDirectory(atPath: fds)) ?? []).contains {
                (try? FileManager.default.destinationOfSymbolicLink(atPath: fds + "/" + $0)) == "anon_inode:inotify"
            }
            if watching { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        var written: [Int64] = []
        for value in Int64(1)...4 {
            try await fleet.set("kiosk", value == 4 ? ["pin": "9999"] : ["volume": .number(.integer(value))])
            let settings = try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > (written.last ?? first.revision) }
            written.append(settings.revision)
        }
        let seen = await collected.value
        #expect(seen.map(\.0) == written)
        #expect(seen.map(\.1) == [["volume"], ["volume"], ["volume"], ["pin"]])
        let lastLine = try await watch.waitForLog("\"revision\":\(written[3])")
        let parsed = try JSONParser.parse(Array(lastLine.utf8))
        #expect(
            parsed["values"] == ["pin": "********"] && parsed["changed"] == ["pin"]
                && parsed["previousRevision"] == .number(.integer(written[2])))
        #expect(!mentions(watch.log, secret: "9999"))
        for revision in written { #expect(watch.count("\"revision\":\(revision),") == 1, "\(watch.log)") }
    }
}

/// The paths where a local change cannot go on as asked.
@Suite("Write-back when things go wrong")
struct WriteBackFailureTests {
    @Test("new metadata makes a queued change inapplicable: 409, the new revision applied, the change refused saying why")
    func changeNoLongerApplies() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.syncOnceAndStop([["id": "kiosk"]])
        // Checked against version 1 on the device, queued; meanwhile version 2 makes greeting admin-only.
        #expect(try await fleet.cli(["set", "greeting=mine"]).status == 0)
        guard case .object(var document) = Fleet.metadata(app: "kiosk", version: 2), case .object(var schema)? = document["schema"],
            case .object(var properties)? = schema["properties"], case .object(var greeting)? = properties["greeting"]
        else { throw ProcessFailed(log: "metadata shape") }
        greeting["x-writable"] = nil
        properties["greeting"] = .object(greeting)
        schema["properties"] = .object(properties)
        document["schema"] = .object(schema)
        _ = try await fleet.admin.putMetadata(app: "kiosk", document: Array(JSONValue.object(document).serialized().utf8))

        let agent = try fleet.startAgent()
        defer { agent.kill() }
        let journal = try await WriteBackTests.waitForJournal(fleet, "kiosk", agent: agent) { !$0.ended.isEmpty }
        #expect(journal.queued.isEmpty)
        let outcome = try #require(journal.ended.first)
        #expect(outcome.state == .refused && outcome.message.contains("no longer applies to revision"), "\(outcome.message)")
        #expect(outcome.message.contains("/greeting: is not x-writable"))
        #expect(fleet.settings("kiosk")?.schemaVersion == 2 && fleet.settings("kiosk")?.values["greeting"] == "hello")
        try await agent.waitForLog("event=change-conflict")
        #expect(!fleet.server.log.contains("event=device-write"))
    }

    @Test("the server's refusals: 503 keeps the change queued and it goes later; 422 and 403 end it with the server's reason and details")
    func serverRefusals() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        let agent = try await fleet.launchAgent([["id": "kiosk"]], server: proxy.url)
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }

        proxy.inject(.refusePatch(status: 503, code: "unavailable"))
        #expect(try await fleet.cli(["set", "greeting=later"]).status == 0)
        try await Waiting.until("the write never reached the proxy:\n\(agent.log)") { proxy.faultsServed("refusePatch") >= 1 }
        try await agent.waitForLog("event=sync-failed")
        #expect(try WriteBackTests.journal(fleet, "kiosk").queued.map(\.values) == [["greeting": "later"]])
        proxy.inject(.none)
        #expect(try await fleet.cli(["sync"]).status == 0)
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "later" }

        for (status, code) in [(422, "invalid-values"), (403, "not-writable")] {
            proxy.inject(.refusePatch(status: status, code: code))
            let refused = try await fleet.cli(["set", "greeting=\(code)", "--wait", "--timeout", "20"])
            #expect(refused.status == 1, "\(refused)")
            #expect(
                refused.standardError.contains(
                    "refused: the server refused: \(status) \(code): refused by the test's proxy; /greeting: is not what the proxy wants"))
        }
        proxy.inject(.none)
        #expect(fleet.settings("kiosk")?.values["greeting"] == "later" && (fleet.settings("kiosk")?.revision ?? 0) > first.revision)
        let journal = try WriteBackTests.journal(fleet, "kiosk")
        #expect(journal.queued.isEmpty && journal.ended.map(\.state) == [.applied, .refused, .refused])
        #expect(agent.isRunning)
    }

    @Test(
        "a proxy's 403, 404 or 413 page (no fleetset error body) never ends a queued change or drops a report: both go once the proxy lets them"
    )
    func proxyPagesAreTransient() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let proxy = try await FaultProxy.start(upstream: fleet.server.url, http: fleet.http)
        let agent = try await fleet.launchAgent([["id": "kiosk"]], server: proxy.url)
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }

        for (index, status) in [403, 404, 413].enumerated() {
            // A report: an admin change comes through (GETs pass), its report is refused.
            proxy.inject(.proxyPage(status: status))
            let reports = proxy.faultsServed("proxyPage POST")
            try await fleet.set("kiosk", ["volume": .number(.integer(Int64(index + 1)))])
            let admin = try await fleet.waitForSettings("kiosk", agent: agent) {
                $0.values["volume"] == .number(.integer(Int64(index + 1)))
            }
            try await Waiting.until("the proxy never refused a report:\n\(agent.log)") { proxy.faultsServed("proxyPage POST") > reports }
            try await fleet.waitForStatus("kiosk", agent: agent) { $0.pendingReports >= 1 }

            // A change: its PATCH is refused.
            let patches = proxy.faultsServed("proxyPage PATCH")
            #expect(try await fleet.cli(["set", "greeting=through-\(status)"]).status == 0)
            try await Waiting.until("the proxy never refused a write:\n\(agent.log)") { proxy.faultsServed("proxyPage PATCH") > patches }
            try await agent.waitForLog("the server answered \(status) without fleetset's error description")
            let journal = try WriteBackTests.journal(fleet, "kiosk")
            #expect(
                journal.queued.map(\.values) == [["greeting": .string("through-\(status)")]], "status \(status): the change stays queued")
            #expect(journal.ended.allSatisfy { $0.state == .applied }, "status \(status): nothing refused")
            #expect(!agent.log.contains("event=report-refused"), "status \(status): no report dropped")

            // The proxy lets them through: the report arrives, the change is applied.
            proxy.inject(.none)
            #expect(try await fleet.cli(["sync"]).status == 0)
            try await fleet.waitForStatusLine("kiosk", containing: ["revision=\(admin.revision)", "state=applied"], agent: agent)
            let applied = try await fleet.waitForSettings("kiosk", timeout: .seconds(60), agent: agent) {
                $0.values["greeting"] == .string("through-\(status)")
            }
            try await fleet.waitForStatusLine("kiosk", containing: ["revision=\(applied.revision)", "state=applied"], agent: agent)
        }
    }

    @Test(
        "set --wait on a change a later one of the same setting superseded says so: by which change, what became of it, what the file holds; exit 4"
    )
    func supersededChange() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.syncOnceAndStop([["id": "kiosk"]])
        let inbox = fleet.layout.inboxDirectory("kiosk")
        func requests() -> Int {
            ((try? FileManager.default.contentsOfDirectory(atPath: inbox)) ?? []).filter { $0.hasSuffix(".json") }.count
        }

        // The agent is down: the first request waits in the inbox for its outcome, then a second
        // of the same setting follows it. The agent takes both at once: the second supersedes the first.
        let first = try RunningProcess(
            CLIRunner.binary, ["set", "greeting=first", "--wait", "--timeout", "60", "--config", fleet.configurationFile],
            standardOutputToLog: true)
        defer { first.kill() }
        try await Waiting.until("the first request never reached the inbox") { requests() == 1 }
        #expect(try await fleet.cli(["set", "greeting=second"]).status == 0)
        #expect(requests() == 2)
        let agent = try fleet.startAgent()
        defer { agent.kill() }

        #expect(await first.waitForExit(timeout: .seconds(60)) == 4, "\(first.log)")
        let applied = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "second" }
        #expect(first.log.contains("fleetset set: superseded by "), "\(first.log)")
        #expect(first.log.contains("a later change of greeting, which was applied in revision \(applied.revision)"), "\(first.log)")
        #expect(first.log.contains("settings.json holds greeting=\"second\" (revision \(applied.revision))"), "\(first.log)")
        #expect(!first.log.contains("applied in revision \(applied.revision): greeting"), "never said to be applied itself")
        let journal = try WriteBackTests.journal(fleet, "kiosk")
        #expect(journal.ended.map(\.state) == [.superseded, .applied])
    }

    @Test("an unreadable changes.json is never overwritten: changes wait in the inbox until it is repaired, then go")
    func unreadableJournal() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.syncOnceAndStop([["id": "kiosk"]])
        let journalPath = fleet.layout.changesFile("kiosk")
        try FileSystemWrite.text("{\"queued\": [", to: journalPath, mode: 0o640)

        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await agent.waitForLog("changes.json unreadable")
        let id = try InboxRequest.set(["greeting": "patient"]).submit(to: fleet.layout.inboxDirectory("kiosk"))
        try await fleet.set("kiosk", ["volume": 4])  // the loop goes round; the request must stay
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 4 }
        #expect(FileManager.default.fileExists(atPath: fleet.layout.inboxDirectory("kiosk") + "/\(id).json"))
        #expect(try String(contentsOfFile: journalPath, encoding: .utf8) == "{\"queued\": [")

        // Repaired (here: removed by the operator), and the agent told to re-read its files.
        try FileManager.default.removeItem(atPath: journalPath)
        agent.signal(SIGHUP)
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "patient" }
        let journal = try await WriteBackTests.waitForJournal(fleet, "kiosk", agent: agent) {
            $0.lookup(id) != .unknown && $0.queued.isEmpty
        }
        #expect(journal.ended.map(\.id) == [id] && journal.ended[0].state == .applied)
    }
}

@Suite("The inbox at start")
struct InboxStartTests {
    @Test(
        "requests left while the agent was down are taken at start, in order; a temporary file whose time is two days old (a wall clock set forward) is kept"
    )
    func leftWhileDown() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.syncOnceAndStop([["id": "kiosk"]])
        let inbox = fleet.layout.inboxDirectory("kiosk")
        let first = try InboxRequest.set(["greeting": "first"]).submit(to: inbox)
        let second = try InboxRequest.set(["greeting": "second"]).submit(to: inbox)
        // Abandoned or still being written? Only monotonic time tells (AbandonedFilesTests): a
        // file's modification time says nothing once the wall clock has jumped.
        try FileSystemWrite.text("{\"request\": \"sy", to: inbox + "/.old-looking", mode: 0o644)
        try FileSystemWrite.text("{\"request\": \"sy", to: inbox + "/.in-progress", mode: 0o644)
        var twoDaysAgo = [timeval(tv_sec: time(nil) - 172_800, tv_usec: 0), timeval(tv_sec: time(nil) - 172_800, tv_usec: 0)]
        #expect(utimes(inbox + "/.old-looking", &twoDaysAgo) == 0)

        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "second" }
        let journal = try await WriteBackTests.waitForJournal(fleet, "kiosk", agent: agent) { $0.queued.isEmpty && $0.ended.count == 2 }
        #expect(journal.ended.map(\.id) == [first, second])
        #expect(journal.ended.map(\.state) == [.superseded, .applied])
        #expect(!agent.log.contains("event=inbox-cleanup"))
        #expect(FileManager.default.fileExists(atPath: inbox + "/.old-looking"))
        #expect(FileManager.default.fileExists(atPath: inbox + "/.in-progress"))
    }
}

/// The inbox as apps that are not root use it, and what a local user may not do to it.
@Suite("The inbox and other users")
struct InboxUsersTests {
    /// Runs `fleetset` as user nobody (65534) with `arguments`, from a copy of the binary that
    /// nobody may run (the build folder may sit under a private home) and in a working directory
    /// nobody may enter; `nil` when this machine cannot (not root, no setpriv), printing why.
    static func runAsNobody(_ fleet: Fleet, _ arguments: [String]) async throws -> CLIRunner.Output? {
        guard geteuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            print("InboxUsersTests: needs root and setpriv to act as another user; skipped")
            return nil
        }
        let binary = try CLIRunner.copyForOtherUsers(CLIRunner.binary)
        return try await CLIRunner.run(
            ["--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments + ["--config", fleet.configurationFile],
            executable: "/usr/bin/setpriv", directory: "/")
    }

    @Test("an allowed writer who is not root: set --wait returns the applied revision; the same user unlisted is refused")
    func nonRootWriter() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk", "readers": "nogroup", "writers": ["users": ["nobody"]]]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        guard let set = try await Self.runAsNobody(fleet, ["set", "greeting=from nobody", "--wait", "--timeout", "20"]) else { return }
        #expect(set.status == 0, "\(set)\n\(agent.log)")
        #expect(set.standardOutput.hasPrefix("applied in revision"))
        #expect(fleet.settings("kiosk")?.values["greeting"] == "from nobody")

        // The same user, no longer among the writers: refused, and --wait says so instead of waiting.
        try fleet.writeConfiguration(apps: [["id": "kiosk", "readers": "nogroup"]])
        agent.signal(SIGHUP)
        try await agent.waitForLog("event=reloaded")
        guard let refused = try await Self.runAsNobody(fleet, ["set", "greeting=again", "--wait", "--timeout", "20"]) else { return }
        #expect(refused.status == 1 && refused.standardError.contains("refused by the inbox"), "\(refused)")
        try await agent.waitForLog("written by uid 65534")
    }

    @Test("a refused/ squatted by a link before the agent starts is moved out of the way; refusals go to the agent's own folder")
    func squattedRefusedFolder() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.syncOnceAndStop([["id": "kiosk"]])
        let inbox = fleet.layout.inboxDirectory("kiosk")
        let elsewhere = fleet.directory + "/elsewhere"
        try FileManager.default.createDirectory(atPath: elsewhere, withIntermediateDirectories: true)
        try FileManager.default.removeItem(atPath: inbox + "/refused")
        #expect(symlink(elsewhere, inbox + "/refused") == 0)

        let agent = try fleet.startAgent()
        defer { agent.kill() }
        try await agent.waitForLog("event=loaded")
        try FileSystemWrite.text("not json", to: inbox + "/.bad", mode: 0o644)
        #expect(rename(inbox + "/.bad", inbox + "/bad.json") == 0)
        try await Waiting.until("bad.json was not moved aside:\n\(agent.log)") {
            FileManager.default.fileExists(atPath: inbox + "/refused/bad.json.reason")
        }
        let refused = try #require(try FileSystem.status(of: inbox + "/refused"))
        #expect((refused.st_mode & S_IFMT) == S_IFDIR && refused.st_uid == geteuid())
        #expect(try FileManager.default.contentsOfDirectory(atPath: elsewhere).isEmpty)
    }

    @Test("a request file name used a second time is moved aside with the reason, not silently dropped")
    func reusedName() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let inbox = fleet.layout.inboxDirectory("kiosk")
        for greeting in ["one", "two"] {
            try FileSystemWrite.text(
                "{\"request\": \"set\", \"values\": {\"greeting\": \"\(greeting)\"}}", to: inbox + "/.request", mode: 0o644)
            #expect(rename(inbox + "/.request", inbox + "/request.json") == 0)
            if greeting == "one" {
                try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["greeting"] == "one" }
            }
        }
        try await Waiting.until("request.json was not moved aside:\n\(agent.log)") {
            FileManager.default.fileExists(atPath: inbox + "/refused/request.json.reason")
        }
        let reason = try String(contentsOfFile: inbox + "/refused/request.json.reason", encoding: .utf8)
        #expect(reason.contains("request id request was taken already"))
        #expect(fleet.settings("kiosk")?.values["greeting"] == "one")
    }
}
