import Curl
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What the simulator can do to a connected fleet.
public enum Scenario: String, Sendable, CaseIterable {
    /// Everyone waits in a long-poll for a while: the server's memory while it holds the fleet.
    case steady
    /// One app-wide write reaches every device.
    case appChange = "app-change"
    /// One write for a group reaches the group's devices (a tenth of the fleet), and only them.
    case groupChange = "group-change"
    /// Devices drop their connections and come back for a while; then an app-wide write must
    /// still reach every one.
    case churn
    /// The server is killed and started again while the fleet waits; a write made as soon as
    /// it listens again must reach every device.
    case restart
    /// Several instances behind a balancer: one (``FleetSimulation/Options/victim``) is killed
    /// while the fleet waits; its devices reconnect through the balancer to the others, and a
    /// write made at once (through the balancer) must reach every device.
    case failover
    /// A change staged in waves of 1%, 10%, 50% and 100%, pausing when more than 2% of the
    /// admitted devices report errors: each wave must reach exactly its devices, and the
    /// rollout must pause at the third, where the devices of
    /// ``SimulatedFleet/failsOnStaged(_:)`` report `error`; the fourth must get nothing. The
    /// rollout is aborted at the end.
    case rollout
    /// The devices reach the server through a proxy that misbehaves (``ProxyFaults``: it drops
    /// `If-None-Match` from some settings requests, so the server answers `200` with the
    /// revision the device holds, and answers others `403` with a page of its own). The agent's
    /// rules hold: a revision decided on already waits the poll timer, the `403` backs off, no
    /// device spins. Phases: `faults` (the fleet held for ``FleetSimulation/Options/hold``: its
    /// requests per device) and an app-wide change that must reach every device all the same.
    case faults
}

/// A simulated fleet against one server: enrollment (or a saved fleet), the app's metadata,
/// and the scenarios, each measured in phases (see ``FleetReport``).
public final class FleetSimulation: Sendable {
    /// The simulator's app: `message` (the marker each change writes) and `volume` (writable,
    /// what devices write back).
    public static let app = "fleetsim"
    public static let metadata = """
        {"app": "fleetsim", "version": 1, "schema": {"type": "object", "additionalProperties": false, "properties": {
          "message": {"type": "string", "default": "hello"},
          "volume": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5, "x-writable": true}}}}
        """
    /// Devices are spread over this many groups, `group-0` … (a group change reaches one).
    public static let groupCount = 10

    /// How a run goes.
    public struct Options: Sendable {
        public var behavior: SimulatedFleet.Behavior
        /// How long one phase may take before its missing devices are reported.
        public var phaseTimeout: Duration
        /// How long `steady` holds the fleet.
        public var hold: Duration
        /// How long `app-change` holds the fleet after it settled (a `held` phase: the server's
        /// memory with every device waiting again, once the change's burst is over); zero: no such phase.
        public var holdAfterChange: Duration = .zero
        /// How long `churn` goes on, and the share of the fleet that drops each second.
        public var churnDuration: Duration
        public var churnShare: Double
        /// How the server is ended in `restart`.
        public var restartSignal: Int32
        /// The instance `failover` kills.
        public var victim: LaunchedServer?

        public init(
            behavior: SimulatedFleet.Behavior = .init(), phaseTimeout: Duration = .seconds(120), hold: Duration = .seconds(10),
            churnDuration: Duration = .seconds(20), churnShare: Double = 0.02, restartSignal: Int32 = SIGKILL
        ) {
            self.behavior = behavior
            self.phaseTimeout = phaseTimeout
            self.hold = hold
            self.churnDuration = churnDuration
            self.churnShare = churnShare
            self.restartSignal = restartSignal
            self.victim = nil
        }
    }

    public let fleet: SimulatedFleet
    private let admin: FleetClient
    private let server: LaunchedServer?
    private let options: Options
    private let progress: (@Sendable (String) -> Void)?

    /// - Parameters:
    ///   - server: the server when the simulator started it (for `restart` and `/proc`).
    ///   - progress: called about once a second with a one-line summary while a phase runs.
    public init(
        fleet: SimulatedFleet, admin: FleetClient, server: LaunchedServer?, options: Options, progress: (@Sendable (String) -> Void)? = nil
    ) {
        self.fleet = fleet
        self.admin = admin
        self.server = server
        self.options = options
        self.progress = progress
    }

    // MARK: - Setting up

    /// Stores the simulator's metadata unless the server has it.
    public static func prepareApp(admin: FleetClient) async throws {
        do {
            _ = try await admin.putMetadata(app: app, document: Array(metadata.utf8))
        } catch let error as FleetClientError where error.code == .versionNotIncreased {
            // Stored by an earlier run.
        }
    }

    /// Enrolls `count` devices spread over ``groupCount`` groups, `concurrency` at a time.
    public static func enroll(count: Int, admin: FleetClient, http: HTTPClient, baseURL: String, concurrency: Int = 32) async throws
        -> [FleetMember]
    {
        var tokens: [String] = []
        for group in 0..<groupCount {
            let uses = (count + groupCount - 1 - group) / groupCount
            guard uses > 0 else { continue }
            let token = try await admin.makeEnrollmentToken(
                EnrollmentTokenRequest(apps: [app], groups: ["group-\(group)"], expiresInSeconds: 3600, uses: Int64(uses)))
            tokens.append(token.enrollmentToken)
        }
        let anonymous = FleetClient(http: http, baseURL: baseURL, token: nil)
        let groupTokens = tokens
        return try await withThrowingTaskGroup(of: (Int, FleetMember).self) { group in
            var members = [FleetMember?](repeating: nil, count: count)
            var next = 0
            func add() {
                let index = next
                next += 1
                group.addTask {
                    let identity = try await anonymous.enroll(
                        enrollmentToken: groupTokens[index % groupTokens.count],
                        requestId: "sim-\(index)-\(UInt64.random(in: 0...UInt64.max))")
                    return (index, FleetMember(id: identity.deviceId, token: identity.deviceToken, group: identity.groups.first ?? ""))
                }
            }
            while next < min(concurrency, count) { add() }
            while let (index, member) = try await group.next() {
                members[index] = member
                if next < count { add() }
            }
            return members.compactMap { $0 }
        }
    }

    /// Writes the fleet to `path` (mode 0600: it holds the devices' tokens).
    public static func save(_ members: [FleetMember], to path: String) throws {
        let list = members.map { member -> JSONValue in
            ["id": .string(member.id), "token": .string(member.token), "group": .string(member.group)]
        }
        try FileSystem.writeAtomically(Array(JSONValue.object(["devices": .array(list)]).serialized().utf8), to: path, mode: 0o600)
    }

    /// The fleet saved at `path`, or `nil` when there is none.
    public static func load(from path: String) throws -> [FleetMember]? {
        guard let bytes = try FileSystem.readFileIfPresent(path, maximumSize: 1 << 28) else { return nil }
        guard case .object(let root) = try JSONParser.parse(bytes), case .array(let devices)? = root["devices"] else {
            throw FleetSimulationError("\(path) is not a saved fleet")
        }
        return try devices.map { entry in
            guard case .object(let device) = entry, case .string(let id)? = device["id"], case .string(let token)? = device["token"],
                case .string(let group)? = device["group"]
            else { throw FleetSimulationError("\(path) holds a device without id, token and group") }
            return FleetMember(id: id, token: token, group: group)
        }
    }

    // MARK: - Running

    /// Connects the fleet (every device gets its settings and waits), runs `scenario`, and
    /// returns what each phase measured. The devices stay connected.
    public func run(_ scenario: Scenario) async throws -> FleetReport {
        let all = Set(fleet.members.indices)
        var phases: [FleetReport.Phase] = []
        let start = try await change(scope: "app", note: "connect")
        phases.append(await measure("connect", marker: start, expected: all) { self.fleet.connectAll() })
        if scenario == .faults {
            // Behind the faulty proxy some devices always wait on the poll timer or a backoff:
            // the fleet never waits whole in long-polls.
            let faults = await measure("faults", marker: nil, expected: []) { try? await Task.sleep(for: self.options.hold) }
            phases.append(faults)
            phases.append(try await changePhase("app-change behind the faults", scope: "app", expected: all))
            // Every request sent: the answered ones and the failed (the proxy's 403s among them).
            let sent = faults.answered + faults.errors.values.reduce(0, +)
            let perDevice = Double(sent) / Double(max(1, fleet.members.count))
            let seconds = Double(faults.duration.components.seconds) + Double(faults.duration.components.attoseconds) / 1e18
            func hundredths(_ value: Double) -> Double { (value * 100).rounded() / 100 }
            let note =
                "behind the faults: \(hundredths(perDevice)) requests per device in \(Int(seconds.rounded())) s "
                + "(\(hundredths(seconds > 0 ? perDevice * 60 / seconds : 0)) a minute); "
                + "\(faults.requests["event repeated"] ?? 0) revisions repeated, \(faults.errors["403"] ?? 0) requests refused by the proxy"
            return FleetReport(
                scenario: scenario.rawValue, devices: fleet.members.count, waiting: fleet.counters.snapshot.waiting, phases: phases,
                notes: [note])
        }
        phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
        switch scenario {
        case .steady:
            phases.append(await measure("hold", marker: nil, expected: []) { try? await Task.sleep(for: self.options.hold) })
        case .appChange:
            phases.append(try await changePhase("app-change", scope: "app", expected: all))
            phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
            if options.holdAfterChange > .zero {
                phases.append(await measure("held", marker: nil, expected: []) { try? await Task.sleep(for: self.options.holdAfterChange) })
            }
        case .groupChange:
            let group = Set(fleet.members.indices.filter { fleet.members[$0].group == "group-0" })
            phases.append(try await changePhase("group-change", scope: "group:group-0", expected: group))
            phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
        case .churn:
            phases.append(await measure("churn", marker: nil, expected: []) { await self.churn() })
            phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
            phases.append(try await changePhase("app-change after churn", scope: "app", expected: all))
            phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
        case .restart:
            guard let server else { throw FleetSimulationError("the restart scenario needs a server the simulator starts (--server)") }
            let marker = Self.newMarker("restart")
            phases.append(
                await measure("restart", marker: marker, expected: all) {
                    if await !server.stop(signal: self.options.restartSignal) { self.fleet.counters.failed(Self.serverHung) }
                    do {
                        try await server.start()
                        _ = try await self.admin.patchValues(app: Self.app, scope: "app", patch: [FleetCounters.markerKey: .string(marker)])
                    } catch {
                        self.progress?("the server did not come back: \(error)")
                    }
                })
            phases.append(await measure("settle", marker: nil, expected: []) { await self.waitUntilAllWait() })
        case .failover:
            guard let victim = options.victim else { throw FleetSimulationError("the failover scenario needs the instance to kill") }
            let marker = Self.newMarker("failover")
            phases.append(
                await measure("failover", marker: marker, expected: all) {
                    await victim.stop(signal: SIGKILL)
                    do {
                        _ = try await self.admin.patchValues(app: Self.app, scope: "app", patch: [FleetCounters.markerKey: .string(marker)])
                    } catch {
                        self.progress?("the write after the kill was refused: \(error)")
                    }
                })
            // How long until every device waits in a long-poll again.
            phases.append(await measure("back in long-poll", marker: nil, expected: []) { await self.waitUntilAllWait() })
        case .faults:
            break  // above
        case .rollout:
            let outcome = try await rollout()
            phases += outcome.phases
            return FleetReport(
                scenario: scenario.rawValue, devices: fleet.members.count, waiting: fleet.counters.snapshot.waiting, phases: phases,
                notes: outcome.notes)
        }
        return FleetReport(
            scenario: scenario.rawValue, devices: fleet.members.count, waiting: fleet.counters.snapshot.waiting, phases: phases)
    }

    /// The waves of the rollout scenario, and its threshold.
    public static let rolloutWaves: [RolloutWave] = [
        .share(basisPoints: 100), .share(basisPoints: 1_000), .share(basisPoints: 5_000), .everyone,
    ]
    public static let rolloutThreshold = 200

    /// Stages a change; measures each wave reaching its devices; waits for the pause; checks the
    /// last wave got nothing; aborts.
    private func rollout() async throws -> (phases: [FleetReport.Phase], notes: [String]) {
        let waves = Self.rolloutWaves
        let marker = Self.newMarker(SimulatedFleet.stagedMarkerPrefix + "rollout")
        let waveOf = fleet.members.map { RolloutWave.index(in: waves, deviceID: $0.id, groups: [$0.group]) }
        func members(of wave: Int) -> Set<Int> { Set(fleet.members.indices.filter { waveOf[$0] == wave }) }
        var phases: [FleetReport.Phase] = []
        var notes: [String] = []
        let failing = fleet.members.indices.filter { SimulatedFleet.failsOnStaged(fleet.members[$0].id) }
        notes.append(
            "waves \(waves.map(\.description).joined(separator: ", ")): \((0..<waves.count).map { "\(members(of: $0).count)" }.joined(separator: ", ")) devices; \(failing.count) report errors (all in wave 3)"
        )
        phases.append(
            await measure("rollout wave 1 (\(waves[0]))", marker: marker, expected: members(of: 0)) {
                do {
                    _ = try await self.admin.startRollout(
                        app: Self.app,
                        RolloutRequest(
                            scope: "app", patch: [FleetCounters.markerKey: .string(marker)], waves: waves,
                            pauseOnErrorsBasisPoints: Self.rolloutThreshold, waveWaitSeconds: 120, message: "simulated rollout"))
                } catch {
                    self.progress?("the rollout was refused: \(error)")
                }
            })
        // Each later wave is admitted by the server once the one before reported.
        for wave in 1..<(waves.count - 1) {
            phases.append(await measure("rollout wave \(wave + 1) (\(waves[wave]))", marker: marker, expected: members(of: wave)) {})
        }
        var status: RolloutView?
        let deadline = ContinuousClock.now + options.phaseTimeout
        while ContinuousClock.now < deadline {
            status = try? await admin.rollout(app: Self.app)
            if status?.phase != .running { break }
            try? await Task.sleep(for: .milliseconds(100))
        }
        if let status {
            notes.append(
                "rollout \(status.phase.rawValue) at wave \(status.currentWave + 1) of \(waves.count) (\(waves[status.currentWave])): \(status.reason.prefix(160))"
            )
        } else {
            notes.append("rollout status unknown")
        }
        // The last wave must get nothing while it is paused.
        phases.append(
            await measure("last wave untouched", marker: marker, expected: []) { try? await Task.sleep(for: .seconds(2)) })
        let reachedLast = phases.last?.requests["settings 200"] ?? 0
        notes.append("settings answers to the last wave while paused: \(reachedLast)")
        _ = try? await admin.abortRollout(app: Self.app)
        return (phases, notes)
    }

    /// An admin write of a new marker at `scope`, measured until `expected` devices hold it.
    private func changePhase(_ name: String, scope: String, expected: Set<Int>) async throws -> FleetReport.Phase {
        let marker = Self.newMarker(name)
        return await measure(name, marker: marker, expected: expected) {
            do {
                _ = try await self.admin.patchValues(app: Self.app, scope: scope, patch: [FleetCounters.markerKey: .string(marker)])
            } catch {
                self.progress?("the change was refused: \(error)")
            }
        }
    }

    /// Writes a new marker at `scope` before a phase and returns it.
    private func change(scope: String, note: String) async throws -> String {
        let marker = Self.newMarker(note)
        _ = try await admin.patchValues(app: Self.app, scope: scope, patch: [FleetCounters.markerKey: .string(marker)])
        return marker
    }

    /// The error kind of a server that did not end within 30 s of its stop signal (and was killed).
    public static let serverHung = "server did not exit within 30 s of its stop signal"

    private static func newMarker(_ note: String) -> String { "\(note)-\(UInt32.random(in: 0...UInt32.max))" }

    /// Runs `action`, then waits until the expected devices hold `marker` (or the phase times
    /// out), reporting progress; returns what the phase measured.
    private func measure(
        _ name: String, marker: String?, expected: Set<Int>, _ action: @escaping @Sendable () async -> Void
    ) async -> FleetReport.Phase {
        let before = server?.pid.flatMap(ProcessUsage.of(pid:))
        let simulatorBefore = ProcessUsage.of(pid: getpid())
        fleet.counters.begin(marker: marker, expected: expected)
        let reporter = progress.map { report in
            Task {
                while !Task.isCancelled {
                    try? await Task.sleep(for: .seconds(1))
                    report(progressLine(name))
                }
            }
        }
        await action()
        let deadline = ContinuousClock.now + options.phaseTimeout
        while !fleet.counters.allReached, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        reporter?.cancel()
        let (latencies, requests, errors, elapsed) = fleet.counters.phase()
        let after = server?.pid.flatMap(ProcessUsage.of(pid:))
        let simulatorAfter = ProcessUsage.of(pid: getpid())
        var usage: ServerUsage?
        if let after {
            // After a restart the process is a new one: its CPU counts from its start.
            let cpuBefore = before.map { $0.cpu <= after.cpu ? $0.cpu : .zero } ?? .zero
            usage = ServerUsage(residentBytes: after.residentBytes, peakResidentBytes: after.peakResidentBytes, cpu: after.cpu - cpuBefore)
        }
        progress?(progressLine(name))
        return FleetReport.Phase(
            name: name, duration: elapsed, expected: expected.count, latency: LatencySummary(latencies), server: usage,
            simulatorCPU: simulatorBefore.flatMap { before in simulatorAfter.map { $0.cpu - before.cpu } }, requests: requests,
            errors: errors)
    }

    /// Waits until every device has a long-poll in flight (or the phase times out).
    private func waitUntilAllWait() async {
        let deadline = ContinuousClock.now + options.phaseTimeout
        while fleet.counters.snapshot.waiting < fleet.members.count, ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(10))
        }
    }

    /// For ``Options/churnDuration``: each second a share of the fleet drops its connection and
    /// comes back within 5 s. At the end every device is connected again.
    private func churn() async {
        let count = fleet.members.count
        let perSecond = max(1, Int(Double(count) * options.churnShare))
        let end = ContinuousClock.now + options.churnDuration
        await withTaskGroup(of: Void.self) { group in
            while ContinuousClock.now < end {
                for _ in 0..<perSecond {
                    let index = Int.random(in: 0..<count)
                    let away = Duration.milliseconds(Int.random(in: 0...5000))
                    group.addTask {
                        await self.fleet.disconnect(index)
                        try? await Task.sleep(for: away)
                        self.fleet.connect(index)
                    }
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
        fleet.connectAll()
    }

    private func progressLine(_ phase: String) -> String {
        let snapshot = fleet.counters.snapshot
        var line = "\(phase): \(snapshot.waiting)/\(fleet.members.count) waiting"
        if snapshot.expected > 0 { line += ", \(snapshot.reached)/\(snapshot.expected) reached" }
        line += ", \(snapshot.requests) requests, \(snapshot.errors) errors"
        if let usage = server?.pid.flatMap(ProcessUsage.of(pid:)) {
            line += ", server RSS \(usage.residentBytes / 1_048_576) MB, CPU \(LatencySummary.text(usage.cpu))"
        }
        return line
    }
}

/// A simulation that cannot go on, and why.
public struct FleetSimulationError: Error, CustomStringConvertible {
    public let description: String

    public init(_ description: String) { self.description = description }
}
