import ArgumentParser
import Curl
import FleetClient
import FleetIO
import FleetJSON
import FleetSimulator
import Foundation

/// `fleetset-sim`: thousands of simulated devices against a fleetset server, measured.
@main
struct FleetsetSim: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetset-sim",
        abstract: "Drive a simulated fleet against a fleetset server and measure it.",
        discussion: """
            Each device behaves as fleetsetd does on the wire (long-polls with If-None-Match, a status \
            report per revision, write-backs when asked, backoff with full jitter) using fleetset's own \
            libcurl client; one process holds a connection per device. By default the simulator starts \
            the fleetset-server next to it on 127.0.0.1 with its database in --data, which also lets it \
            read the server's memory and CPU from /proc and run the restart scenario. A progress line \
            goes to standard error every second; the report goes to standard error as text and, with \
            --json, as JSON.
            """)

    @Option(help: "How many devices.")
    var devices = 1000

    @Option(
        help: """
            What to do: steady, app-change, group-change, churn, restart, failover (with --instances 2 or more) or rollout \
            (a change staged in waves 1%, 10%, 50%, 100% that must pause at the third, where some devices report errors).
            """)
    var scenario = "app-change"

    @Option(help: "The fleetset-server binary to start (default: the one next to fleetset-sim).")
    var server: String?

    @Option(help: "An already running server's URL instead of starting one (no restart scenario, no /proc figures).")
    var url: String?

    @Option(help: "With --url: the admin token file.")
    var adminTokenFile: String?

    @Option(
        help:
            "Where the started server's database, admin token and log, and the enrolled fleet (fleet.json, 0600) go; kept, and reused by the next run. Default: a new temporary folder."
    )
    var data: String?

    @Option(help: "The long-poll's wait in seconds.")
    var longPollWait = 300

    @Option(help: "The share of devices (0 to 1) that write a setting back when a change reaches them.")
    var writeBackShare = 0.01

    @Option(
        help: """
            HTTP clients (each one libcurl multi thread) to spread the devices over; by default one per \
            \(Self.devicesPerClient) devices (libcurl looks through a client's idle connections to the server for each \
            new request, so smaller clients cost less).
            """)
    var clients: Int?

    /// Devices per HTTP client when `--clients` is not given.
    static let devicesPerClient = 1000

    @Option(help: "Seconds a phase may take before its missing devices are reported.")
    var phaseTimeout = 120

    @Option(help: "Seconds the steady scenario holds the fleet.")
    var hold = 10

    @Option(help: "Seconds app-change holds the fleet once it settled again (a held phase: the server's memory with all waiting); 0: none.")
    var holdAfterChange = 0

    @Option(help: "Seconds the churn scenario goes on.")
    var churnSeconds = 20

    @Option(help: "The share of the fleet (0 to 1) that drops its connection each second in churn.")
    var churnShare = 0.02

    @Option(help: "How restart ends the server: kill (SIGKILL, a crash) or term (SIGTERM, a graceful stop).")
    var restartSignal = "kill"

    @Option(help: "More options for the started server, e.g. --server-argument=--max-long-polls=5000 (repeatable).")
    var serverArgument: [String] = []

    @Option(
        help: """
            Start this many server instances on --database (a PostgreSQL URL) behind HAProxy (--balancer); devices \
            connect through the balancer, admin writes go to instance 1 (failover: through the balancer, after \
            instance 1 is killed).
            """)
    var instances = 1

    @Option(
        help: """
            With --instances: the devices connect to this instance (1, 2, …) directly instead of through the \
            balancer, while admin writes go to instance 1: --device-instance 2 measures how fast a write on one \
            instance reaches the devices another holds.
            """)
    var deviceInstance: Int?

    @Option(help: "With --instances: the database the instances share (postgres://…).")
    var database: String?

    @Option(help: "With --instances: the HAProxy binary.")
    var balancer = "/usr/sbin/haproxy"

    @Option(help: "Write the report as JSON to this file ('-': standard output).")
    var json: String?

    func validate() throws {
        guard devices >= 1 else { throw ValidationError("--devices must be 1 or more") }
        guard holdAfterChange >= 0 else { throw ValidationError("--hold-after-change must be 0 or more seconds") }
        guard Scenario(rawValue: scenario) != nil else {
            throw ValidationError("--scenario must be one of \(Scenario.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        guard (0...1).contains(writeBackShare), (0...1).contains(churnShare) else {
            throw ValidationError("--write-back-share and --churn-share are shares from 0 to 1")
        }
        guard (0...300).contains(longPollWait) else { throw ValidationError("--long-poll-wait must be 0 to 300 seconds") }
        guard (clients ?? 1) >= 1 else { throw ValidationError("--clients must be 1 or more") }
        guard ["kill", "term"].contains(restartSignal) else { throw ValidationError("--restart-signal must be kill or term") }
        guard url == nil || adminTokenFile != nil else { throw ValidationError("--url needs --admin-token-file") }
        if url != nil, scenario == Scenario.restart.rawValue { throw ValidationError("restart needs a server the simulator starts") }
        if scenario == Scenario.faults.rawValue, url != nil || instances > 1 {
            throw ValidationError("faults puts a misbehaving proxy (HAProxy, --balancer) in front of the one server the simulator starts")
        }
        guard instances >= 1 else { throw ValidationError("--instances must be 1 or more") }
        if instances > 1 {
            guard let database, database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") else {
                throw ValidationError("--instances 2 or more share one PostgreSQL database: give --database postgres://…")
            }
            guard url == nil, scenario != Scenario.restart.rawValue else {
                throw ValidationError("--instances starts its servers: no --url, no restart")
            }
            if let deviceInstance, !(1...instances).contains(deviceInstance) {
                throw ValidationError("--device-instance must be one of the instances, 1 to \(instances)")
            }
        } else if scenario == Scenario.failover.rawValue {
            throw ValidationError("failover needs --instances 2 or more")
        }
    }

    func run() async throws {
        let files = OpenFileLimit.raiseToHard()
        if let files, Int(files.current) < devices + 100 {
            note("warning: \(devices) devices need as many connections, and this process may open \(files.current) files")
        }
        let directory = try data ?? Self.temporaryDirectory()
        try FileSystem.makeDirectories(directory, mode: 0o700)
        let launched: LaunchedServer?
        let baseURL: String
        let adminToken: String
        var others: [LaunchedServer] = []
        var front: Balancer?
        if let url {
            launched = nil
            baseURL = url
            adminToken = try FileSystem.readToken(adminTokenFile ?? "")
        } else {
            let executable = server ?? Self.sibling("fleetset-server")
            var started: [LaunchedServer] = []
            for index in 1...instances {
                let folder = instances == 1 ? directory : directory + "/instance-\(index)"
                try FileSystem.makeDirectories(folder, mode: 0o700)
                let instance = LaunchedServer(
                    executable: executable, directory: folder, database: instances == 1 ? nil : database,
                    adminTokenFile: directory + "/admin.token", extraArguments: serverArgument)
                try await instance.start()  // one after the other: the first makes the admin token
                note("server: \(executable) at \(instance.url), log \(instance.logPath)")
                started.append(instance)
            }
            launched = started[0]
            others = Array(started.dropFirst())
            adminToken = try started[0].adminToken()
            if instances > 1 {
                let balancing = Balancer(executable: balancer, directory: directory, backends: started.map(\.address))
                try await balancing.start(connections: devices + 500)
                note("balancer: \(balancer) at \(balancing.url), configuration \(balancing.configurationPath)")
                front = balancing
                baseURL = deviceInstance.map { started[$0 - 1].url } ?? balancing.url
            } else if Scenario(rawValue: scenario) == .faults {
                let proxy = Balancer(executable: balancer, directory: directory, backends: [started[0].address], faults: ProxyFaults())
                try await proxy.start(connections: devices + 500)
                note("misbehaving proxy: \(balancer) at \(proxy.url), configuration \(proxy.configurationPath)")
                front = proxy
                baseURL = proxy.url
            } else {
                baseURL = started[0].url
            }
        }
        defer {
            front?.stop()
            for other in others { other.terminateNow() }
        }
        // On an error: stopped as a crash would (what it did is not being measured any more).
        var stopped = false
        defer { if !stopped { launched?.terminateNow() } }
        let clientCount = clients ?? max(1, (devices + Self.devicesPerClient - 1) / Self.devicesPerClient)
        let http = try (0..<clientCount).map { _ in try HTTPClient(configuration: .init(allowInsecureHTTP: true)) }
        // Admin writes go to instance 1 itself: with several, they reach the others' devices through the database.
        let admin = FleetClient(http: http[0], baseURL: launched?.url ?? baseURL, token: adminToken)
        try await FleetSimulation.prepareApp(admin: admin)
        let fleetPath = directory + "/fleet.json"
        var members = try FleetSimulation.load(from: fleetPath) ?? []
        if members.count < devices {
            note("enrolling \(devices - members.count) devices")
            members += try await FleetSimulation.enroll(count: devices - members.count, admin: admin, http: http[0], baseURL: baseURL)
            try FleetSimulation.save(members, to: fleetPath)
        }
        let fleet = SimulatedFleet(
            app: FleetSimulation.app, baseURL: baseURL, members: Array(members.prefix(devices)), clients: http,
            behavior: .init(longPollWait: longPollWait, writeBackShare: writeBackShare))
        let interactive = isatty(2) == 1
        var options = FleetSimulation.Options(
            behavior: .init(longPollWait: longPollWait, writeBackShare: writeBackShare), phaseTimeout: .seconds(phaseTimeout),
            hold: .seconds(hold), churnDuration: .seconds(churnSeconds), churnShare: churnShare,
            restartSignal: restartSignal == "kill" ? SIGKILL : SIGTERM)
        options.holdAfterChange = .seconds(holdAfterChange)
        let failover = Scenario(rawValue: scenario) == .failover
        if failover { options.victim = launched }
        let simulation = FleetSimulation(
            fleet: fleet, admin: failover ? FleetClient(http: http[0], baseURL: baseURL, token: adminToken) : admin,
            server: failover ? others.first : launched, options: options,
            progress: { line in note(interactive ? "\u{1B}[2K\r" + line : line, newline: !interactive) })
        let report = try await simulation.run(Scenario(rawValue: scenario) ?? .appChange)
        if interactive { note("") }
        await fleet.disconnectAll()
        for client in http { await client.shutdown() }
        stopped = true
        var hung = false
        if let launched { hung = await !launched.stop(signal: SIGTERM) }
        note(report.text)
        if let json {
            let text = report.json.serialized(.pretty) + "\n"
            if json == "-" { print(text, terminator: "") } else { try FileSystem.writeAtomically(Array(text.utf8), to: json) }
        }
        if hung, let launched { note("error: the \(FleetSimulation.serverHung); it was killed (its log: \(launched.logPath))") }
        let missing = report.phases.reduce(0) { $0 + $1.missing }
        if missing > 0 || hung { throw ExitCode(1) }
    }

    static func temporaryDirectory() throws -> String {
        var template = Array((NSTemporaryDirectory() + "fleetset-sim-XXXXXX").utf8CString)
        guard let path = mkdtemp(&template) else { throw ValidationError("cannot make a temporary folder") }
        return String(cString: path)
    }

    /// `name` in the folder this executable is in.
    static func sibling(_ name: String) -> String {
        let me = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
        return me.deletingLastPathComponent().appendingPathComponent(name).path
    }
}

/// A line on standard error.
func note(_ text: String, newline: Bool = true) {
    FileHandle.standardError.write(Data((text + (newline ? "\n" : "")).utf8))
}
