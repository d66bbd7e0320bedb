import Curl
import FleetAgentCore
import FleetClient
import FleetDeviceState
import FleetJSON
import FleetProtocol
import PosixThreads

/// An enrolled simulated device: its identity and the group it was enrolled into.
public struct FleetMember: Sendable, Hashable {
    public var id: String
    public var token: String
    /// `group-<n>`.
    public var group: String

    public init(id: String, token: String, group: String) {
        self.id = id
        self.token = token
        self.group = group
    }
}

/// Thousands of simulated devices (``SimulatedAgent``: the agent's own sync machine), each a
/// task performing its requests with fleetset's own client (``FleetClient`` over libcurl's
/// multi interface): one process holds a connection per device. What they see is counted in
/// ``counters``.
public final class SimulatedFleet: Sendable {
    /// How the devices behave.
    public struct Behavior: Sendable {
        /// The long-poll's `wait`, in seconds.
        public var longPollWait: Int
        /// The share (0 to 1) of devices that write a setting back when a change reaches them.
        public var writeBackShare: Double
        /// The backoff after failures.
        public var backoff: RetryBackoff
        /// The poll timer (after a revision decided on already comes again, or when the
        /// server refuses long-polls) and its jitter, as the agent's configuration sets them.
        public var pollInterval: Duration
        public var jitter: Duration

        public init(
            longPollWait: Int = 300, writeBackShare: Double = 0, backoff: RetryBackoff = RetryBackoff(cap: .seconds(30)),
            pollInterval: Duration = .seconds(60), jitter: Duration = .seconds(10)
        ) {
            self.longPollWait = longPollWait
            self.writeBackShare = writeBackShare
            self.backoff = backoff
            self.pollInterval = pollInterval
            self.jitter = jitter
        }

        /// The agent's rules for the simulator's app with this behaviour.
        func rules(app: String) -> SyncRules {
            SyncRules(app: app, longPollWait: longPollWait, pollInterval: pollInterval, jitter: jitter, backoff: backoff)
        }
    }

    public let app: String
    public let members: [FleetMember]
    public let counters = FleetCounters()
    private let baseURL: String
    private let clients: [HTTPClient]
    private let behavior: Behavior
    private let tasks = Locked<[Int: Task<Void, Never>]>([:])
    private let metadata = MetadataCache()

    /// - Parameter clients: the HTTP clients to spread the devices over (each one thread).
    public init(app: String, baseURL: String, members: [FleetMember], clients: [HTTPClient], behavior: Behavior) {
        precondition(!clients.isEmpty, "a fleet needs an HTTP client")
        self.app = app
        self.baseURL = baseURL
        self.members = members
        self.clients = clients
        self.behavior = behavior
    }

    /// Starts every device that is not running.
    public func connectAll() {
        for index in members.indices { connect(index) }
    }

    /// Starts device `index` (its first request goes at once), unless it runs already.
    public func connect(_ index: Int) {
        tasks.withLock { tasks in
            guard tasks[index] == nil else { return }
            // The device runs on its HTTP client's thread: an answer resumes it there.
            tasks[index] = Task(executorPreference: clients[index % clients.count].executor) { await self.run(index) }
        }
    }

    /// Stops device `index`: its request in flight is abandoned (its connection closed).
    public func disconnect(_ index: Int) async {
        let task = tasks.withLock { $0.removeValue(forKey: index) }
        task?.cancel()
        await task?.value
    }

    /// Stops every device.
    public func disconnectAll() async {
        let running = tasks.withLock { tasks in
            defer { tasks = [:] }
            return Array(tasks.values)
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
    }

    /// Whether device `index` runs.
    public func isConnected(_ index: Int) -> Bool { tasks.withLock { $0[index] != nil } }

    private func run(_ index: Int) async {
        let client = FleetClient(http: clients[index % clients.count], baseURL: baseURL, token: members[index].token)
        let share = behavior.writeBackShare
        let app = SimulatedApp(
            failure: { [members] index, settings in Self.stagedFailure(device: members[index].id, values: settings.values) },
            writeBack: { _, _ in
                guard share > 0, Double.random(in: 0..<1) < share else { return nil }
                return ["volume": .number(.integer(Int64.random(in: 0...10)))]
            })
        let agent = SimulatedAgent(
            index: index, client: client, app: self.app, rules: behavior.rules(app: self.app), counters: counters, metadata: metadata,
            simulatedApp: app)
        await agent.run()
    }

    /// The devices whose app fails on staged settings (a marker beginning with
    /// ``stagedMarkerPrefix``): about 10% of those whose hash bucket lies between 10% and 50%,
    /// the third wave of the rollout scenario's `1%, 10%, 50%, 100%`, and none before it. (Device
    /// ids are the server's, random: at 5% a fleet of 1,000 has fewer than 11 such devices in
    /// about one run of 60, too few for the gate's 2%: it happened in a CI-like run.)
    public static func failsOnStaged(_ deviceID: String) -> Bool {
        let bucket = RolloutWave.bucket(deviceID)
        return (1_000..<5_000).contains(bucket) && bucket % 10 == 0
    }

    /// Markers of staged changes begin with this.
    public static let stagedMarkerPrefix = "staged-"

    /// The error a device's app acknowledges for settings with these `values`, `nil` when it can use them.
    static func stagedFailure(device: String, values: JSONObject) -> String? {
        guard case .string(let marker)? = values[FleetCounters.markerKey], marker.hasPrefix(stagedMarkerPrefix),
            failsOnStaged(device)
        else { return nil }
        return "the simulated app cannot use \(marker)"
    }
}
