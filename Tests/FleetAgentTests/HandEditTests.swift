import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `settings.json` edited by hand on a device, with the real `fleetsetd` and `fleetset-server`:
/// put back, the hook run again, and the server told.
@Suite("fleetsetd puts back a settings.json edited by hand")
struct HandEditTests {
    static let detail = "detail=restored-after-local-edit"

    /// The lines the hook wrote: one revision per run.
    static func hookRuns(_ path: String) -> [String] {
        (try? String(contentsOfFile: path, encoding: .utf8))?.split(separator: "\n").map(String.init) ?? []
    }

    static func bytes(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    @Test(
        "a hand edit is undone at once: the served bytes back, the hook run again, applied reported with the detail, logged and counted; a restart takes its own file as its own, an edit while stopped is undone at start"
    )
    func handEditRestored() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "lobby")
        try await fleet.set("lobby", ["volume": 7, "pin": "4711"])
        let hookLog = fleet.directory + "/hook-runs"
        let app: JSONValue = [
            "id": "lobby", "onChange": ["/bin/sh", "-c", .string("echo \"$FLEETSET_REVISION\" >> '\(hookLog)'")],
        ]
        let agent = try await fleet.launchAgent([app], storeMetadata: false)
        defer { agent.kill() }
        let served = try await fleet.waitForSettings("lobby", agent: agent) { $0.values["volume"] == 7 }
        try await fleet.waitForStatus("lobby", agent: agent) { $0.state == .applied && $0.revision == served.revision }
        let identity = try fleet.identity()
        try await fleet.server.running.waitForLog("event=long-poll app=lobby device=\(identity.deviceId) revision=\(served.revision)")
        let path = fleet.layout.settingsFile("lobby").path
        let servedBytes = try #require(Self.bytes(path))
        #expect(Self.hookRuns(hookLog) == ["\(served.revision)"])

        // An editor's save: the file truncated and written in place, in two steps.
        let edited = String(decoding: servedBytes, as: UTF8.self).replacingOccurrences(of: "\"volume\": 7", with: "\"volume\": 9")
        #expect(edited != String(decoding: servedBytes, as: UTF8.self))
        let handle = try #require(FileHandle(forWritingAtPath: path))
        try handle.truncate(atOffset: 0)
        try handle.write(contentsOf: Data(edited.utf8.prefix(20)))
        try handle.write(contentsOf: Data(edited.utf8.dropFirst(20)))
        try handle.close()

        // Put back within the settle time (1 s), not a poll interval.
        try await Waiting.until(timeout: .seconds(30), "settings.json was not put back; agent log:\n\(agent.log)") {
            Self.bytes(path) == servedBytes
        }
        try await Waiting.until(timeout: .seconds(30), "the hook did not run again: \(Self.hookRuns(hookLog))\n\(agent.log)") {
            Self.hookRuns(hookLog).count == 2
        }
        #expect(Self.hookRuns(hookLog) == ["\(served.revision)", "\(served.revision)"])
        let line = try await fleet.waitForStatusLine(
            "lobby", containing: ["revision=\(served.revision)", "state=applied", Self.detail], agent: agent)
        #expect(line.contains("settings.json was changed on the device"), "\(line)")
        try await agent.waitForLog("event=local-edit")
        try await agent.waitForLog("event=restored-after-local-edit")
        #expect(try await fleet.metricsText().contains(#"fleetset_device_restores_total{app="lobby"} 1"#))
        // The previous generation is still the agent's own.
        #expect(Self.bytes(fleet.layout.settingsFile("lobby").previousPath).map { !$0.contains(Data("\"volume\": 9".utf8)) } ?? true)

        // No loop: the restore's own write is no edit. A newer revision goes through as always,
        // and by then nothing else was restored.
        try await fleet.set("lobby", ["volume": 4])
        let newer = try await fleet.waitForSettings("lobby", agent: agent) { $0.values["volume"] == 4 }
        try await fleet.waitForStatusLine("lobby", containing: ["revision=\(newer.revision)", "state=applied"], agent: agent)
        #expect(fleet.statusLines("lobby").filter { $0.contains(Self.detail) }.count == 1, "\(fleet.statusLines("lobby"))")
        #expect(Self.hookRuns(hookLog).count == 3)

        // A restart takes its own file as its own.
        let longPoll = "event=long-poll app=lobby device=\(identity.deviceId) revision=\(newer.revision)"
        try await fleet.server.running.waitForLog(longPoll)
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        let longPolls = fleet.server.running.count(longPoll)
        let again = try fleet.startAgent()
        defer { again.kill() }
        try await fleet.server.running.waitForLog(longPoll, count: longPolls + 1)
        #expect(!again.log.contains("event=local-edit"), "\(again.log)")

        // An edit while the agent is stopped is found at start and undone from the server's answer.
        again.signal(SIGTERM)
        #expect(await again.waitForExit(timeout: .seconds(60)) == 0)
        let newerBytes = try #require(Self.bytes(path))
        try Data(String(decoding: newerBytes, as: UTF8.self).replacingOccurrences(of: "\"volume\": 4", with: "\"volume\": 1").utf8)
            .write(to: URL(fileURLWithPath: path))
        let third = try fleet.startAgent()
        defer { third.kill() }
        try await Waiting.until(timeout: .seconds(30), "the edit made while stopped stayed; agent log:\n\(third.log)") {
            Self.bytes(path).flatMap { try? DeviceSettings(json: JSONParser.parse(Array($0))) }?.values["volume"] == 4
        }
        try await fleet.waitForStatusLine("lobby", containing: ["revision=\(newer.revision)", "state=applied", Self.detail], agent: third)

        // A settings.json removed by hand is back within the watch's settle time, not a long-poll later.
        let restoredLines = fleet.statusLines("lobby").filter { $0.contains(Self.detail) }.count
        #expect(unlink(path) == 0)
        try await Waiting.until(timeout: .seconds(30), "the removed settings.json did not come back; agent log:\n\(third.log)") {
            Self.bytes(path) == newerBytes
        }
        try await Waiting.until(timeout: .seconds(30), "the restore was not reported") {
            fleet.statusLines("lobby").filter { $0.contains(Self.detail) }.count == restoredLines + 1
        }
        for secret in [identity.deviceToken, "4711"] {
            #expect(
                !mentions(third.log, secret: secret) && !mentions(agent.log, secret: secret) && !mentions(fleet.server.log, secret: secret))
        }
    }
}
