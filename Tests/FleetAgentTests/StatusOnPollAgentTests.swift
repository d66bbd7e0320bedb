import FleetClient
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `fleetsetd` reports each revision on its next long-poll (`Fleetset-Status`) to a server that
/// takes it: a woken device costs the server two requests per change, not three.
@Suite("fleetsetd sends its report on the next long-poll")
struct StatusOnPollAgentTests {
    /// The server's answers to the device's settings and status requests so far, by `METHOD
    /// route status` (its `fleetset_http_requests_total`; a held long-poll counts once answered).
    static func answered(_ fleet: Fleet) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for line in try await fleet.metricsText().split(separator: "\n") where line.hasPrefix("fleetset_http_requests_total{") {
            guard let open = line.firstIndex(of: "{"), let close = line.lastIndex(of: "}"),
                let value = Double(line[line.index(after: close)...].trimmingCharacters(in: .whitespaces))
            else { continue }
            var labels: [String: String] = [:]
            for pair in line[line.index(after: open)..<close].split(separator: ",") {
                let parts = pair.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: CharacterSet(charactersIn: "\"")) }
                if parts.count == 2 { labels[parts[0]] = parts[1] }
            }
            guard let route = labels["route"], ["/v1/apps/{app}/settings", "/v1/apps/{app}/status"].contains(route) else { continue }
            counts["\(labels["method"] ?? "?") \(route) \(labels["status"] ?? "?")", default: 0] += Int(value)
        }
        return counts
    }

    /// Waits until the server logged the report of `revision` and holds the device's next long-poll.
    static func settled(_ fleet: Fleet, app: String, revision: Int64, agent: RunningProcess) async throws {
        try await fleet.waitForStatusLine(app, containing: ["revision=\(revision)", "state=applied"], agent: agent)
        let deadline = ContinuousClock.now + .seconds(60)
        while try await fleet.heldLongPolls() != 1 {
            guard ContinuousClock.now < deadline else { throw ProcessFailed(log: "no long-poll held; agent log:\n\(agent.log)") }
            try await Task.sleep(for: .milliseconds(10))
        }
    }

    @Test(
        "a woken device makes two requests per change: the long-poll answered 200, then the next long-poll carrying the report (logged event=status); no POST"
    )
    func twoRequestsPerChange() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "lobby"]])
        defer { agent.kill() }
        var revision = try await fleet.waitForSettings("lobby", agent: agent) { _ in true }.revision
        try await Self.settled(fleet, app: "lobby", revision: revision, agent: agent)
        var before = try await Self.answered(fleet)
        // The first answer said Fleetset-Accepts: the first report rode on the first long-poll already.
        #expect(before.keys.filter { $0.hasPrefix("POST") }.isEmpty, "\(before)")

        for volume in [6, 7, 8] {
            try await fleet.set("lobby", ["volume": .number(.integer(Int64(volume)))])
            revision = try await fleet.waitForSettings("lobby", agent: agent) { $0.revision > revision }.revision
            try await Self.settled(fleet, app: "lobby", revision: revision, agent: agent)
            let after = try await Self.answered(fleet)
            var change: [String: Int] = [:]
            for (key, count) in after where count != before[key] { change[key] = count - (before[key] ?? 0) }
            // Request 1 was answered with the change; request 2 is the long-poll the server holds
            // now, which brought the report (its event=status line is in the server's log).
            #expect(change == ["GET /v1/apps/{app}/settings 200": 1], "revision \(revision): \(change)")
            #expect(try await fleet.heldLongPolls() == 1)
            before = after
        }
        let lines = fleet.statusLines("lobby")
        #expect(lines.count == 4, "one event=status line per revision:\n\(lines.joined(separator: "\n"))")
        #expect(try await fleet.admin.devices(app: "lobby").devices.first?.status?.report.revision == revision)
    }

    @Test("an older agent's separate POST …/status still works against this server: 202 and its event=status line")
    func separatePost() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "lobby"]])
        defer { agent.kill() }
        let settings = try await fleet.waitForSettings("lobby", agent: agent) { _ in true }
        try await Self.settled(fleet, app: "lobby", revision: settings.revision, agent: agent)
        let report = StatusReport(
            revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: "posted the old way", source: .app)
        try await fleet.deviceClient().reportStatus(app: "lobby", report)
        try await fleet.waitForStatusLine("lobby", containing: ["revision=\(settings.revision)", "state=error", "posted the old way"])
        #expect(try await Self.answered(fleet)["POST /v1/apps/{app}/status 202"] == 1)
        #expect(try await fleet.admin.devices(app: "lobby").devices.first?.status?.report == report)
    }
}
