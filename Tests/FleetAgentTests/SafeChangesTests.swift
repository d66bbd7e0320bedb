import Curl
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetSettings
import FleetTestSupport
import Foundation
import Testing

/// One of several devices of a test's fleet: its own folders, configuration and `fleetsetd`.
struct FleetDevice {
    let name: String
    let directory: String
    let agent: RunningProcess

    var layout: DeviceLayout { DeviceLayout(stateDirectory: directory + "/state", inboxDirectory: directory + "/inbox") }
    var configurationFile: String { directory + "/fleetsetd.json" }

    /// Enrolls a new device into `groups` (for app `kiosk`) with the app entry `app`, and starts its agent.
    static func start(_ fleet: Fleet, name: String, groups: [String], app: JSONObject = ["id": "kiosk"]) async throws -> FleetDevice {
        let directory = fleet.directory + "/" + name
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let token = try await fleet.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], groups: groups))
        try FileSystemWrite.text(token.enrollmentToken + "\n", to: directory + "/enrollment-token", mode: 0o600)
        let configuration: JSONValue = [
            "server": .string(fleet.server.url), "allowInsecureHTTP": true, "enrollmentTokenFile": .string(directory + "/enrollment-token"),
            "stateDirectory": .string(directory + "/state"), "inboxDirectory": .string(directory + "/inbox"), "jitter": 0,
            "apps": [.object(app)],
        ]
        try FileSystemWrite.text(configuration.serialized(.pretty), to: directory + "/fleetsetd.json", mode: 0o644)
        let agent = try RunningProcess(CLIRunner.product("fleetsetd"), ["--config", directory + "/fleetsetd.json"])
        return FleetDevice(name: name, directory: directory, agent: agent)
    }

    func settings() -> DeviceSettings? {
        SettingsOnDisk.load(layout.settingsFile("kiosk"), app: "kiosk").settings
    }

    func status() -> AppStatus? { AppStatus.load(layout.statusFile("kiosk")) }

    /// Waits until `settings.json` satisfies `condition`.
    @discardableResult
    func waitForSettings(_ condition: (DeviceSettings) -> Bool) async throws -> DeviceSettings {
        var found: DeviceSettings?
        try await Waiting.until(
            "\(name): settings never matched (\(found.map { JSONValue.object($0.values).serialized() } ?? "none")); agent log:\n\(agent.log)"
        ) {
            found = settings()
            return found.map(condition) ?? false
        }
        return found!
    }

    /// Waits until `status.json` satisfies `condition`.
    @discardableResult
    func waitForStatus(_ condition: (AppStatus) -> Bool) async throws -> AppStatus {
        var found: AppStatus?
        try await Waiting.until("\(name): status never matched (\(found?.json.serialized() ?? "none")); agent log:\n\(agent.log)") {
            found = status()
            return found.map(condition) ?? false
        }
        return found!
    }

    var greeting: String? { settings()?.values["greeting"]?.stringValue }
}

/// Staged rollouts, rollback, apply windows and the update lock with real agents and a real
/// server on loopback.
@Suite("Safe changes with real agents")
struct SafeChangesTests {
    static let fastRollouts = ["--rollout-check-interval", "0.2"]

    /// A fleet with kiosk metadata and three devices in groups w1, w2, w3, each holding its first settings.
    static func threeDevices(_ fleet: Fleet, second: JSONObject = ["id": "kiosk"], first: JSONObject = ["id": "kiosk"]) async throws
        -> [FleetDevice]
    {
        try await fleet.putMetadata(app: "kiosk")
        var devices: [FleetDevice] = []
        for (index, app) in [first, second, ["id": "kiosk"]].enumerated() {
            let device = try await FleetDevice.start(fleet, name: "device-\(index + 1)", groups: ["w\(index + 1)"], app: app)
            try await device.waitForStatus { $0.state == .applied }
            devices.append(device)
        }
        return devices
    }

    /// `fleetset admin …` against the fleet's server.
    static func admin(_ fleet: Fleet, _ arguments: [String]) async throws -> CLIRunner.Output {
        try await CLIRunner.run(["admin"] + arguments + ["--server", fleet.server.url, "--token-file", fleet.directory + "/admin.token"])
    }

    static func rollout(_ fleet: Fleet) async throws -> RolloutView { try await fleet.admin.rollout(app: "kiosk") }

    /// Waits until the kiosk's rollout is in `phase` (looking every 100 ms).
    static func waitForRollout(_ fleet: Fleet, _ phase: RolloutPhase) async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        var last: RolloutView?
        while ContinuousClock.now < deadline {
            last = try? await rollout(fleet)
            if last?.phase == phase { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        Issue.record("the rollout never became \(phase): \(last.map { $0.json.serialized() } ?? "none")\nserver log:\n\(fleet.server.log)")
        throw ProcessFailed(log: "rollout not \(phase)")
    }

    @Test(
        "a 3-wave rollout reaches one wave after the other on the agents' reports, survives a server restart, and ends in the stored values"
    )
    func proceeds() async throws {
        let fleet = try await Fleet.start(serverArguments: Self.fastRollouts)
        defer { Task { await fleet.stop() } }
        let devices = try await Self.threeDevices(fleet)
        defer { for device in devices { device.agent.kill() } }
        let lastRevision = try #require(devices[2].settings()).revision

        let started = try await Self.admin(
            fleet,
            [
                "set", "--app", "kiosk", "greeting=staged", "--rollout", "group:w1,group:w2,100%", "--wave-wait", "60s", "--message",
                "new greeting",
            ])
        #expect(started.status == 0, "\(started)")
        #expect(started.standardOutput.contains("running, wave 1 of 3 (group:w1, group:w2, 100%)"), "\(started.standardOutput)")
        // The server goes down and comes back on the same database and port: the rollout goes on.
        fleet.server.signal(SIGTERM)
        #expect(await fleet.server.waitForExit() == 0)
        let restarted = try await ServerProcess.start(in: fleet.directory, port: fleet.server.port, extraArguments: Self.fastRollouts)
        defer { restarted.kill() }

        for device in devices { try await device.waitForSettings { $0.values["greeting"] == "staged" } }
        try await Self.waitForRollout(fleet, .completed)
        let status = try await Self.rollout(fleet)
        #expect(status.message == "new greeting" && status.reason.isEmpty)
        #expect(try await fleet.admin.values(app: "kiosk", scope: "app").values == ["greeting": "staged"])
        // The last wave got it only after the first two reported: its revision moved once, after theirs.
        let last = try #require(devices[2].settings())
        #expect(last.revision == lastRevision + 1)
        // Each step logged once, by whichever instance took it.
        let lines = (fleet.server.log + restarted.log).split(separator: "\n").filter { $0.contains("event=rollout") }
        for step in ["wave=1/3", "wave=2/3", "phase=completed"] {
            #expect(lines.filter { $0.contains(step) }.count == 1, "\(step): \(lines)")
        }
        let history = try await Self.admin(fleet, ["history", "--app", "kiosk"])
        #expect(history.status == 0 && history.standardOutput.contains("rollout") && history.standardOutput.contains("completed"))
    }

    @Test(
        "a failing hook rolls the device back and pauses the rollout at its wave; resume accepts it and goes on; a revert brings the old values back"
    )
    func pauseResumeRevert() async throws {
        let fleet = try await Fleet.start(serverArguments: Self.fastRollouts)
        defer { Task { await fleet.stop() } }
        let failing: JSONObject = [
            "id": "kiosk", "rollbackOnError": true,
            "onChange": ["/bin/sh", "-c", "grep -q staged \"$FLEETSET_SETTINGS_FILE\" && { echo 'cannot show it' >&2; exit 3; }; exit 0"],
        ]
        let devices = try await Self.threeDevices(fleet, second: failing)
        defer { for device in devices { device.agent.kill() } }
        let before = try await fleet.admin.history(app: "kiosk").entries.last?.number ?? 0
        let goodRevision = try #require(devices[1].settings()).revision
        let quietRevision = try #require(devices[2].settings()).revision

        _ = try await fleet.admin.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["greeting": "staged"], waves: [.group("w1"), .group("w2"), .everyone]))
        try await Self.waitForRollout(fleet, .paused)
        // The device rolled back: its settings.json is the old one again, and it said so.
        let rolledBack = try await devices[1].waitForStatus { $0.state == .error && $0.latestRevision == goodRevision + 1 }
        #expect(rolledBack.revision == goodRevision && devices[1].greeting == "hello")
        #expect(rolledBack.lastError?.contains("rolled back to revision \(goodRevision)") == true)
        let paused = try await Self.admin(fleet, ["rollout", "status", "kiosk"])
        #expect(paused.standardOutput.contains("paused, wave 2 of 3"), "\(paused)")
        #expect(paused.standardOutput.contains("wave 2 (group:w2): 1 device(s), 0 applied, 1 failed"))
        #expect(paused.standardOutput.contains("the hook failed:") && paused.standardOutput.contains("cannot show it"), "\(paused)")
        #expect(devices[2].settings()?.revision == quietRevision, "the third wave's device got nothing")

        let resumed = try await Self.admin(fleet, ["rollout", "resume", "kiosk"])
        #expect(resumed.status == 0 && resumed.standardOutput.contains("wave 3 of 3"), "\(resumed)")
        try await devices[2].waitForSettings { $0.values["greeting"] == "staged" }
        try await Self.waitForRollout(fleet, .completed)

        let reverted = try await Self.admin(fleet, ["revert", "--app", "kiosk", "--to", "\(before)", "--message", "back to hello"])
        #expect(reverted.status == 0, "\(reverted)")
        for device in devices { try await device.waitForSettings { $0.values["greeting"] == "hello" && $0.revision > quietRevision } }
        // The device that rolled back takes the reverted values too: its hook passes now.
        try await devices[1].waitForStatus { $0.state == .applied }
    }

    @Test("an abort gives every admitted device the previous values in a new revision; the others never see a thing")
    func abort() async throws {
        let fleet = try await Fleet.start(serverArguments: Self.fastRollouts)
        defer { Task { await fleet.stop() } }
        let failing: JSONObject = [
            "id": "kiosk", "onChange": ["/bin/sh", "-c", "grep -q staged \"$FLEETSET_SETTINGS_FILE\" && exit 3; exit 0"],
        ]
        let devices = try await Self.threeDevices(fleet, first: failing)
        defer { for device in devices { device.agent.kill() } }
        let untouched = devices.dropFirst().map { $0.settings()?.revision }
        let firstRevision = try #require(devices[0].settings()).revision
        _ = try await fleet.admin.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["greeting": "staged"], waves: [.group("w1"), .group("w2"), .everyone]))
        try await Self.waitForRollout(fleet, .paused)
        #expect(devices[0].greeting == "staged", "without rollbackOnError the settings stay as written")
        let aborted = try await Self.admin(fleet, ["rollout", "abort", "kiosk"])
        #expect(aborted.status == 0 && aborted.standardOutput.contains("aborted"), "\(aborted)")
        let back = try await devices[0].waitForSettings { $0.values["greeting"] == "hello" }
        #expect(back.revision == firstRevision + 2)
        try await devices[0].waitForStatus { $0.state == .applied && $0.revision == back.revision }
        #expect(devices.dropFirst().map { $0.settings()?.revision } == untouched)
    }

    @Test("outside its apply window a revision waits, reported pending and shown by fleetset status; it is applied when the window opens")
    func window() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "kiosk")
        // A window that opens a few seconds from now, device local time, for a minute.
        let opens = Int64(Date().timeIntervalSince1970) + 6
        let window = "daily \(Self.localTime(opens))-\(Self.localTime(opens + 60))"
        let device = try await FleetDevice.start(
            fleet, name: "device", groups: [], app: ["id": "kiosk", "applyWindows": [.string(window)]])
        defer { device.agent.kill() }
        let waiting = try await device.waitForStatus { $0.waitingRevision != nil }
        #expect(device.settings() == nil)
        #expect(waiting.waitingReason?.contains("outside the apply windows (\(window), device local time)") == true)
        try await fleet.waitForStatusLine("kiosk", containing: ["state=pending", "source=agent"], agent: device.agent)
        let status = try await CLIRunner.run(["status", "--config", device.configurationFile])
        #expect(
            status.standardOutput.contains("kiosk: revision \(waiting.waitingRevision ?? 0) waits: outside the apply windows"), "\(status)")
        let applied = try await device.waitForSettings { _ in true }
        #expect(Int64(Date().timeIntervalSince1970) >= opens - 1)
        #expect(applied.revision == waiting.waitingRevision)
        let done = try await device.waitForStatus { $0.state == .applied }
        #expect(done.waitingRevision == nil && done.waitingReason == nil)
    }

    /// `HH:MM:SS` of `seconds` in the local time zone.
    static func localTime(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        localtime_r(&time, &parts)
        return String(format: "%02d:%02d:%02d", parts.tm_hour, parts.tm_min, parts.tm_sec)
    }

    @Test("while the app holds its update lock (FleetApp.holdUpdates) a revision waits; it is applied when the app lets go")
    func updateLock() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "kiosk")
        let device = try await FleetDevice.start(fleet, name: "device", groups: [])
        defer { device.agent.kill() }
        let first = try await device.waitForSettings { _ in true }
        try await device.waitForStatus { $0.state == .applied }
        let app = FleetApp("kiosk", stateDirectory: device.layout.stateDirectory, inboxDirectory: device.layout.inboxDirectory)
        try await app.holdUpdates {
            try await fleet.set("kiosk", ["greeting": "while busy"])
            let waiting = try await device.waitForStatus { $0.waitingRevision != nil }
            #expect(waiting.waitingReason == "the app holds its update lock (updates.lock); applying when it lets go")
            // The real lock is tried and found held (the status says so); that each retry, every
            // 2 s, finds it held too and leaves the revision waiting is SafeApplyTests.updateLock.
            #expect(device.settings()?.revision == first.revision)
        }
        let applied = try await device.waitForSettings { $0.values["greeting"] == "while busy" }
        #expect(applied.revision > first.revision)
        try await device.waitForStatus { $0.state == .applied && $0.waitingRevision == nil }
        #expect(device.agent.log.contains("event=deferred"))
    }
}
