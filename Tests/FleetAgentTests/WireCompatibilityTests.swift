import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Fleets upgrade servers first and agents over months: this server must serve the last
/// release's agent and CLI, and this agent must work with the last release's server.
///
/// The last release (`compat/previous-release`) is built once by `scripts/build-previous-release`
/// (scripts/test runs it before the tests) and cached. Without it these tests fail and say how to
/// build it (`FLEETSET_SKIP_PREVIOUS_RELEASE=1` leaves them out, for a quick local run).
@Suite(
    "Wire compatibility with the last release", .serialized,
    .enabled(if: ProcessInfo.processInfo.environment["FLEETSET_SKIP_PREVIOUS_RELEASE"] == nil))
struct WireCompatibilityTests {
    /// The last release's `name` (fleetsetd, fleetset or fleetset-server): in
    /// `FLEETSET_PREVIOUS_RELEASE_BIN` when set, else where scripts/build-previous-release caches it.
    static func previous(_ name: String) throws -> String {
        let environment = ProcessInfo.processInfo.environment
        var directory = environment["FLEETSET_PREVIOUS_RELEASE_BIN"] ?? ""
        if directory.isEmpty {
            // compat/previous-release: "TAG COMMIT"; the cache folder is TAG-<first 12 of COMMIT>.
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            let line = try String(contentsOf: root.appendingPathComponent("compat/previous-release"), encoding: .utf8)
            let parts = line.split(whereSeparator: \.isWhitespace).map(String.init)
            guard parts.count == 2 else { throw ProcessFailed(log: "compat/previous-release is not \"TAG COMMIT\": \(line)") }
            // As the script picks it: machine-wide for root, else the user's own cache.
            let ownCache = (environment["XDG_CACHE_HOME"] ?? (environment["HOME"] ?? "") + "/.cache") + "/fleetset-releases"
            let cache = environment["FLEETSET_RELEASE_CACHE"] ?? (getuid() == 0 ? "/var/cache/fleetset-releases" : ownCache)
            directory = "\(cache)/\(parts[0])-\(parts[1].prefix(12))/bin"
        }
        let path = directory + "/" + name
        guard FileManager.default.isExecutableFile(atPath: path) else {
            throw ProcessFailed(
                log: "\(path) is missing: run scripts/build-previous-release once (scripts/test does), "
                    + "or set FLEETSET_SKIP_PREVIOUS_RELEASE=1 to leave these tests out")
        }
        return path
    }

    /// Enrolls, holds a long-poll, applies the app's change, writes a setting back through the
    /// CLI and reports: the same steps whichever side is the last release's.
    static func exercise(_ fleet: Fleet, cli: String, afterwards: (RunningProcess) async throws -> Void = { _ in }) async throws {
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 5 }
        // Enrolled, served, and waiting in a long-poll.
        let deadline = ContinuousClock.now + .seconds(30)
        while try await fleet.heldLongPolls() < 1 {
            guard ContinuousClock.now < deadline else { throw ProcessFailed(log: "no long-poll held; agent log:\n\(agent.log)") }
            try await Task.sleep(for: .milliseconds(20))
        }

        try await fleet.set("kiosk", ["volume": 7])
        let applied = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 7 }
        #expect(applied.revision > first.revision)
        _ = try await fleet.waitForStatusLine("kiosk", containing: ["revision=\(applied.revision)", "state=applied"], agent: agent)

        // A device's write-back: queued by the CLI, sent by the agent, confirmed, downloaded.
        let set = try await CLIRunner.run(["set", "greeting=hi", "--wait", "--config", fleet.configurationFile], executable: cli)
        #expect(set.status == 0, "\(set)\nagent log:\n\(agent.log)")
        #expect(fleet.settings("kiosk")?.values["greeting"] == "hi")
        let own = try await fleet.admin.values(app: "kiosk", scope: "device:\(try fleet.identity().deviceId)")
        #expect(own.values == ["greeting": "hi"])
        let devices = try await fleet.admin.devices(app: "kiosk")
        #expect(devices.devices.first?.status?.report.state == .applied, "\(devices)")
        try await afterwards(agent)
    }

    @Test(
        "the last release's agent and CLI with this server: enroll, long-poll, apply, write back, report; its admin CLI reads this server's answers"
    )
    func previousAgentNewServer() async throws {
        let fleet = try await Fleet.start(agentExecutable: try Self.previous("fleetsetd"))
        defer { Task { await fleet.stop() } }
        let cli = try Self.previous("fleetset")
        try await Self.exercise(fleet, cli: cli)

        // The last release's admin CLI refuses answer members it does not know: none may be new.
        let id = try fleet.identity().deviceId
        let common = ["--server", fleet.server.url, "--token-file", fleet.directory + "/admin.token"]
        for command in [
            ["admin", "devices", "--app", "kiosk"], ["admin", "devices", "show", id], ["admin", "explain", "--app", "kiosk", id],
            ["admin", "history", "--app", "kiosk"], ["admin", "values", "--app", "kiosk", "--scope", "device:\(id)"],
            ["admin", "policy", "show", id],
        ] {
            let run = try await CLIRunner.run(command + common, executable: cli)
            #expect(run.status == 0, "the 0.7.0 CLI's \(command.joined(separator: " ")): \(run)")
        }
    }

    @Test(
        "this agent and CLI with the last release's server: enroll, long-poll, apply, write back, report; a hand edit is undone and reported without the detail that server refuses"
    )
    func newAgentPreviousServer() async throws {
        let fleet = try await Fleet.start(serverExecutable: try Self.previous("fleetset-server"))
        defer { Task { await fleet.stop() } }
        try await Self.exercise(fleet, cli: CLIRunner.binary) { agent in
            // A hand edit is undone all the same; the last release's server refuses the report's
            // detail, and takes the report sent again without it.
            let path = fleet.layout.settingsFile("kiosk").path
            let served = try #require(FileManager.default.contents(atPath: path))
            let revision = try #require(fleet.settings("kiosk")).revision
            let edited = String(decoding: served, as: UTF8.self).replacingOccurrences(of: "\"volume\": 7", with: "\"volume\": 2")
            #expect(edited != String(decoding: served, as: UTF8.self))
            try Data(edited.utf8).write(to: URL(fileURLWithPath: path))
            try await Waiting.until(timeout: .seconds(30), "settings.json was not put back; agent log:\n\(agent.log)") {
                FileManager.default.contents(atPath: path) == served
            }
            try await agent.waitForLog("event=report-refused")
            try await fleet.waitForStatusLine(
                "kiosk", containing: ["revision=\(revision)", "state=applied", "settings.json was changed on the device"], agent: agent)
        }
    }
}
