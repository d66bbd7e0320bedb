import Curl
import FleetAgentCore
import FleetClient
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

/// Thousands of ``SimulatedDevice``s, each a task performing its requests with fleetset's own
/// client (``FleetClient`` over libcurl's multi interface): one process holds a connection per
/// device. What they see is counted in ``counters``.
public final class SimulatedFleet: Sendable {
    /// How the devices behave.
    public struct Behavior: Sendable {
        /// The long-poll's `wait`, in seconds.
        public var longPollWait: Int
        /// The share (0 to 1) of devices that write a setting back when a change reaches them.
        public var writeBackShare: Double
        /// The backoff after failures.
        public var backoff: RetryBackoff

        public init(longPollWait: Int = 300, writeBackShare: Double = 0, backoff: RetryBackoff = RetryBackoff(cap: .seconds(30))) {
            self.longPollWait = longPollWait
            self.writeBackShare = writeBackShare
            self.backoff = backoff
        }
    }

    public let app: String
    public let members: [FleetMember]
    public let counters = FleetCounters()
    private let baseURL: String
    private let clients: [HTTPClient]
    private let behavior: Behavior
    private let tasks = Locked<[Int: Task<Void, Never>]>([:])

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
            tasks[index] = Task { await self.run(index) }
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
        var device = SimulatedDevice(longPollWait: behavior.longPollWait, backoff: behavior.backoff)
        var random = SystemRandomNumberGenerator()
        var action = device.start
        var held: SettingsDocument?
        while !Task.isCancelled {
            if action.after > .zero {
                do { try await Task.sleep(for: action.after) } catch { return }
            }
            let failure = held.flatMap { Self.stagedFailure(device: members[index].id, document: $0) }
            guard
                let event = await perform(
                    action.request, client: client, device: index, simulated: &device, failure: failure, random: &random)
            else {
                return
            }
            if case .settings(let document) = event { held = document }
            if case .settings(let document) = event, counters.received(document, device: index),
                behavior.writeBackShare > 0, Double.random(in: 0..<1, using: &random) < behavior.writeBackShare
            {
                device.requestWriteBack()
            }
            action = device.handle(event, using: &random)
        }
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

    /// The error a device reports for `document`, `nil` for `applied`.
    static func stagedFailure(device: String, document: SettingsDocument) -> String? {
        guard case .string(let marker)? = document.values[FleetCounters.markerKey], marker.hasPrefix(stagedMarkerPrefix),
            failsOnStaged(device)
        else { return nil }
        return "the simulated app cannot use \(marker)"
    }

    /// The report of `revision`: `error` with `failure` when one is given, else `applied`.
    static func report(_ revision: SimulatedDevice.Revision, failure: String?) -> StatusReport {
        StatusReport(
            revision: revision.revision, schemaVersion: revision.schemaVersion, state: failure == nil ? .applied : .error,
            message: failure ?? "", source: .agent)
    }

    /// Sends `request`; `nil` when the device was stopped meanwhile. A report says `error` with
    /// `failure` when one is given. `simulated` hears what each settings answer says of reports.
    private func perform(
        _ request: SimulatedDevice.Request, client: FleetClient, device: Int, simulated: inout SimulatedDevice, failure: String?,
        random: inout some RandomNumberGenerator
    ) async -> SimulatedDevice.Event? {
        do {
            switch request {
            case .settings(let known, let wait, let reporting):
                if wait > 0 { counters.beginWait() }
                defer { if wait > 0 { counters.endWait() } }
                let started = ContinuousClock.now
                let answer = try await client.settingsAnswer(
                    app: app, knownRevision: known, wait: wait, status: reporting.map { Self.report($0, failure: failure) })
                simulated.heard(acceptsStatus: answer.acceptsStatus)
                if reporting != nil { counters.count(failure == nil ? "status on poll" : "status error on poll") }
                guard let document = answer.document else {
                    if let nextPoll = answer.nextPoll {
                        counters.count("settings 304 busy")
                        return .deferred(nextPoll: nextPoll)
                    }
                    counters.count("settings 304")
                    return .unchanged(elapsed: started.duration(to: .now))
                }
                counters.count("settings 200")
                return .settings(document)
            case .report(let revision, let schemaVersion):
                try await client.reportStatus(
                    app: app, Self.report(SimulatedDevice.Revision(revision: revision, schemaVersion: schemaVersion), failure: failure))
                counters.count(failure == nil ? "status 202" : "status error 202")
                return .reported
            case .writeBack(let revision):
                let volume = JSONValue.number(.integer(Int64.random(in: 0...10, using: &random)))
                let document = try await client.patchSettings(app: app, patch: ["volume": volume], basedOn: revision)
                counters.count("write-back 200")
                return .settings(document)
            }
        } catch let error as FleetClientError {
            if Task.isCancelled { return nil }
            counters.failed([error.status.map(String.init) ?? "bad-answer", error.code?.rawValue].compactMap { $0 }.joined(separator: " "))
            if case .writeBack = request, let status = error.status, [403, 409, 422].contains(status) { return .writeBackRefused }
            return .failed(retryAfter: error.retryAfter)
        } catch let error as HTTPClientError {
            if Task.isCancelled || error.kind == .clientShutDown { return nil }
            counters.failed("\(error.kind)")
            return .failed(retryAfter: nil)
        } catch {
            if Task.isCancelled || error is CancellationError { return nil }
            counters.failed("other")
            return .failed(retryAfter: nil)
        }
    }
}
