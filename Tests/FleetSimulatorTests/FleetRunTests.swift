import Curl
import FleetAgentCore
import FleetClient
import FleetSimulator
import FleetTestSupport
import Foundation
import Testing

/// The scaled-down simulator run: 300 devices against the real server on 127.0.0.1, started and
/// killed by the simulator. It checks what a fleet needs (every device gets each change, none
/// sees an error, all come back after a crash), never how fast.
@Suite("A fleet of 300 simulated devices against the real server", .serialized)
struct FleetRunTests {
    static let devices = 300

    func withFleet(
        devices: Int = Self.devices, restartSignal: Int32 = SIGKILL, serverArguments: [String] = [], faults: ProxyFaults? = nil,
        hold: Duration = .seconds(1), _ body: (FleetSimulation, SimulatedFleet) async throws -> Void
    ) async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let server = LaunchedServer(
            executable: CLIRunner.product("fleetset-server"), directory: directory,
            extraArguments: ["--log-level", "notice"] + serverArguments)
        try await server.start()
        defer { server.terminateNow() }
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        let admin = FleetClient(http: http, baseURL: server.url, token: try server.adminToken())
        try await FleetSimulation.prepareApp(admin: admin)
        let members = try await FleetSimulation.enroll(count: devices, admin: admin, http: http, baseURL: server.url)
        #expect(members.count == devices && Set(members.map(\.id)).count == devices)
        // A saved fleet reads back as it was, from a file only its owner may read.
        try FleetSimulation.save(members, to: directory + "/fleet.json")
        #expect(try FleetSimulation.load(from: directory + "/fleet.json") == members)
        let mode = try FileManager.default.attributesOfItem(atPath: directory + "/fleet.json")[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let behavior = SimulatedFleet.Behavior(
            longPollWait: 60, writeBackShare: 0.05, backoff: .init(base: .milliseconds(500), cap: .seconds(4)), pollInterval: .seconds(2),
            jitter: .seconds(1))
        // The devices reach the server directly, or through a misbehaving proxy.
        var proxy: Balancer?
        if let faults {
            let balancer = Balancer(directory: directory, backends: [server.address], faults: faults)
            try await balancer.start(connections: devices + 100)
            proxy = balancer
        }
        defer { proxy?.stop() }
        let fleet = SimulatedFleet(
            app: FleetSimulation.app, baseURL: proxy?.url ?? server.url, members: members, clients: [http], behavior: behavior)
        let simulation = FleetSimulation(
            fleet: fleet, admin: admin, server: server,
            options: .init(
                behavior: behavior, phaseTimeout: .seconds(60), hold: hold, churnDuration: .seconds(3), churnShare: 0.05,
                restartSignal: restartSignal))
        do {
            try await body(simulation, fleet)
        } catch {
            await fleet.disconnectAll()
            await http.shutdown()
            throw error
        }
        await fleet.disconnectAll()
        await http.shutdown()
    }

    func phase(_ report: FleetReport, _ name: String) throws -> FleetReport.Phase {
        try #require(report.phases.first { $0.name == name }, "no phase \(name) in \(report.text)")
    }

    @Test(
        "a staged rollout over 1,000 devices reaches one wave at a time, exactly its devices, and pauses at the wave whose devices report errors"
    )
    func stagedRollout() async throws {
        try await withFleet(devices: 1_000, serverArguments: ["--rollout-check-interval", "0.2"]) { simulation, fleet in
            let report = try await simulation.run(.rollout)
            let waves = report.phases.filter { $0.name.hasPrefix("rollout wave") }
            #expect(waves.map(\.name) == ["rollout wave 1 (1%)", "rollout wave 2 (10%)", "rollout wave 3 (50%)"], "\(report.text)")
            for wave in waves {
                #expect(wave.expected > 0 && wave.missing == 0 && wave.errors.isEmpty, "\(report.text)")
                // Only the wave's long-polls were answered (others stay quiet).
                #expect((wave.requests["settings 200"] ?? 0) <= wave.expected + 60, "\(report.text)")
            }
            let failing = fleet.members.filter { SimulatedFleet.failsOnStaged($0.id) }.count
            #expect(failing > 10, "\(report.text)")
            #expect(report.notes.contains { $0.hasPrefix("rollout paused at wave 3 of 4 (50%)") }, "\(report.text)")
            #expect(report.notes.contains { $0.contains("reported error or unsupported, more than the 2% allowed") }, "\(report.text)")
            #expect(report.notes.contains("settings answers to the last wave while paused: 0"), "\(report.text)")
            print(report.text)
        }
    }

    @Test("an app-wide change reaches every device and a group change exactly its group, with no error; write-backs go through")
    func changes() async throws {
        try await withFleet { simulation, fleet in
            let app = try await simulation.run(.appChange)
            for phase in app.phases {
                #expect(phase.missing == 0 && phase.errors.isEmpty, "\(app.text)")
            }
            let change = try phase(app, "app-change")
            #expect(change.latency.count == Self.devices)
            // About 5% of the devices write back after the change (its phase ends when all hold it;
            // the write-backs and their reports are done by the end of the next).
            let writeBacks = app.phases.suffix(2).reduce(0) { $0 + ($1.requests["write-back 200"] ?? 0) }
            #expect(writeBacks > 0, "\(app.text)")
            #expect(app.waiting == Self.devices)
            let group = try await simulation.run(.groupChange)
            let groupChange = try phase(group, "group-change")
            let members = fleet.members.filter { $0.group == "group-0" }.count
            #expect(groupChange.expected == members && groupChange.missing == 0 && groupChange.errors.isEmpty, "\(group.text)")
            // Only the group's long-polls were answered with settings (each device's report and
            // write-back aside).
            #expect(groupChange.requests["settings 200"] == members, "\(group.text)")
        }
    }

    @Test("devices coming and going lose nothing: afterwards an app-wide change reaches every one, with no error")
    func churn() async throws {
        try await withFleet { simulation, _ in
            let report = try await simulation.run(.churn)
            for phase in report.phases { #expect(phase.missing == 0 && phase.errors.isEmpty, "\(report.text)") }
            #expect(try phase(report, "app-change after churn").latency.count == Self.devices)
        }
    }

    /// SIGKILL is a crash; SIGTERM a graceful stop, which must end within 30 s with the whole
    /// fleet's long-polls held (the simulator reports one that hangs as an error).
    @Test(
        "after the server is killed (or stopped) and started again, every device reconnects and gets the change made at once",
        arguments: [SIGKILL, SIGTERM])
    func restart(signal: Int32) async throws {
        try await withFleet(restartSignal: signal) { simulation, _ in
            let report = try await simulation.run(.restart)
            let restart = try phase(report, "restart")
            #expect(restart.missing == 0 && restart.latency.count == Self.devices, "\(report.text)")
            // The only failures are the crash's own: connections lost or refused, never a 5xx.
            let kinds = Set(restart.errors.keys)
            #expect(kinds.isSubset(of: ["connectionLost", "couldNotConnect"]), "\(report.text)")
            #expect(report.waiting == Self.devices, "\(report.text)")
        }
    }

    /// The simulator runs the agent's own rules, so a fault the agent handles is handled the same
    /// way: a `200` with the revision the device holds waits the poll timer (2 to 3 s here), and
    /// a proxy's `403` without fleetset's body backs off. Most requests meet a fault (70% lose
    /// `If-None-Match`, 10% are refused): a device that sent again at once would make hundreds
    /// of requests in the 10 s held, not four.
    @Test(
        "behind a proxy that drops If-None-Match (200 with the same revision) and answers 403 without fleetset's body, no device spins and a change still reaches every one"
    )
    func faults() async throws {
        try await withFleet(devices: 100, faults: ProxyFaults(ignoreConditional: 70, refuse: 10), hold: .seconds(10)) { simulation, _ in
            let report = try await simulation.run(.faults)
            let held = try phase(report, "faults")
            #expect((held.requests["event repeated"] ?? 0) > 0, "the agent's rule for a repeated revision ran: \(report.text)")
            #expect((held.errors["403"] ?? 0) > 0, "the proxy refused some requests: \(report.text)")
            #expect(held.errors.keys.allSatisfy { $0 == "403" }, "no other failure: \(report.text)")
            let sent = held.answered + held.errors.values.reduce(0, +)
            // About one request every 2.5 s per device: the poll timer after each repeated
            // revision, a backoff after each 403. Spinning would be thousands.
            #expect(sent < 100 * 10, "\(sent) requests from 100 devices in 10 s: \(report.text)")
            #expect((held.requests["event repeated"] ?? 0) > 100, "most devices met a repeated revision: \(report.text)")
            let change = try phase(report, "app-change behind the faults")
            #expect(change.missing == 0 && change.latency.count == 100, "\(report.text)")
            #expect(report.notes.contains { $0.hasPrefix("behind the faults:") }, "\(report.text)")
            print(report.text)
        }
    }
}
