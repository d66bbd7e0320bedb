import Curl
import FleetAgentCore
import FleetClient
import FleetSimulator
import FleetTestSupport
import Foundation
import Testing

/// Past one machine: two `fleetset-server` processes on one PostgreSQL database behind a real
/// HAProxy, 300 simulated devices connected through it. It checks what scaling out promises
/// (devices spread over both instances, a write through one reaches the devices the other
/// holds, a killed instance's devices come back through the balancer and miss no write),
/// never how fast; the figures are in `docs/measured.md` and `docs/scaling.md`.
@Suite("Two instances behind HAProxy", .serialized)
struct ScaleOutTests {
    static let devices = 300

    @Test("devices spread over both instances; an admin write through A reaches B's devices; kill A: all come back through the balancer")
    func twoInstancesBehindBalancer() async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await PostgresCluster.shared().makeDatabase()
        let instances = (1...2).map { index in
            LaunchedServer(
                executable: CLIRunner.product("fleetset-server"), directory: directory + "/instance-\(index)", database: database,
                adminTokenFile: directory + "/admin.token", extraArguments: ["--log-level", "notice"])
        }
        for (index, instance) in instances.enumerated() {
            try FileManager.default.createDirectory(atPath: directory + "/instance-\(index + 1)", withIntermediateDirectories: true)
            try await instance.start()  // one after the other: the first makes the admin token
        }
        defer { for instance in instances { instance.terminateNow() } }
        let balancer = Balancer(directory: directory, backends: instances.map(\.address))
        try await balancer.start()
        defer { balancer.stop() }

        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        let token = try instances[0].adminToken()
        let adminOnA = FleetClient(http: http, baseURL: instances[0].url, token: token)
        let adminThroughBalancer = FleetClient(http: http, baseURL: balancer.url, token: token)
        try await FleetSimulation.prepareApp(admin: adminOnA)
        let members = try await FleetSimulation.enroll(count: Self.devices, admin: adminThroughBalancer, http: http, baseURL: balancer.url)
        let behavior = SimulatedFleet.Behavior(
            longPollWait: 60, writeBackShare: 0.05, backoff: .init(base: .milliseconds(200), cap: .seconds(2)))
        let fleet = SimulatedFleet(app: FleetSimulation.app, baseURL: balancer.url, members: members, clients: [http], behavior: behavior)
        let options = FleetSimulation.Options(behavior: behavior, phaseTimeout: .seconds(60))

        // An app-wide write made on instance A directly reaches every device, B's included.
        let onA = FleetSimulation(fleet: fleet, admin: adminOnA, server: instances[0], options: options)
        let change = try await onA.run(.appChange)
        for phase in change.phases { #expect(phase.missing == 0 && phase.errors.isEmpty, "\(change.text)") }
        // Every device is waiting again once it has the change (a device that got it moments ago
        // may be between its answer and its next long-poll: read until all are back, or 30 s).
        let held = try await settledLongPollsHeld(
            http: http, baseURLs: instances.map(\.url), adminToken: token, reaching: Self.devices, timeout: .seconds(30))
        #expect(held.allSatisfy { $0 > Self.devices / 10 }, "long-polls held per instance: \(held)")
        #expect(held.reduce(0, +) == Self.devices, "long-polls held per instance: \(held)")

        // Kill A: its devices reconnect through the balancer to B; a write made at once reaches all.
        var failoverOptions = options
        failoverOptions.victim = instances[0]
        let throughBalancer = FleetSimulation(fleet: fleet, admin: adminThroughBalancer, server: instances[1], options: failoverOptions)
        let failover = try await throughBalancer.run(.failover)
        let killed = try #require(failover.phases.first { $0.name == "failover" })
        #expect(killed.missing == 0 && killed.latency.count == Self.devices, "\(failover.text)")
        let back = try #require(failover.phases.first { $0.name == "back in long-poll" })
        #expect(failover.waiting == Self.devices, "\(failover.text)")
        print("scale-out: failover latency \(killed.latency), all back in long-poll after \(back.duration)")
        // The simulator's "back" is each device's request sent; the survivor's gauge counts it once
        // read and registered, which may come a moment later.
        let survivor = try await settledLongPollsHeld(http: http, baseURLs: [instances[1].url], adminToken: token, reaching: Self.devices)
        #expect(survivor == [Self.devices], "long-polls held by the surviving instance")
        await fleet.disconnectAll()
        await http.shutdown()
    }
}
