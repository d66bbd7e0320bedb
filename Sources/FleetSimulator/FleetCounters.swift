import FleetJSON
import FleetProtocol
import PosixThreads

/// What the simulated devices saw, counted as they go: requests and failures by kind, the
/// long-polls in flight, and for the phase being measured, when each expected device reached
/// its goal (got the settings carrying the phase's marker).
public final class FleetCounters: Sendable {
    /// The setting each scenario writes to make a change devices can recognise.
    public static let markerKey = "message"

    private struct State {
        var requests: [String: Int] = [:]
        var errors: [String: Int] = [:]
        var waiting = 0
        var marker: String?
        var expected: Set<Int> = []
        var started = ContinuousClock.now
        var reached: [Int: Duration] = [:]
    }

    /// The counts so far, for a progress line.
    public struct Snapshot: Sendable {
        public var requests: Int
        public var errors: Int
        /// Long-polls in flight.
        public var waiting: Int
        public var reached: Int
        public var expected: Int
    }

    private let state = Locked(State())

    public init() {}

    /// Starts a phase: counts start from zero, and `expected` devices are watched for
    /// settings whose ``markerKey`` is `marker`.
    public func begin(marker: String?, expected: Set<Int>) {
        let now = ContinuousClock.now
        state.withLock { state in
            state.requests = [:]
            state.errors = [:]
            state.marker = marker
            state.expected = expected
            state.reached = [:]
            state.started = now
        }
    }

    /// What the phase saw so far: per reached device, how long it took; requests and failures.
    public func phase() -> (latencies: [Duration], requests: [String: Int], errors: [String: Int], elapsed: Duration) {
        let now = ContinuousClock.now
        return state.withLock { state in (Array(state.reached.values), state.requests, state.errors, state.started.duration(to: now)) }
    }

    public var snapshot: Snapshot {
        state.withLock { state in
            Snapshot(
                requests: state.requests.values.reduce(0, +), errors: state.errors.values.reduce(0, +), waiting: state.waiting,
                reached: state.reached.count, expected: state.expected.count)
        }
    }

    /// Whether every expected device has reached the phase's goal.
    public var allReached: Bool { state.withLock { $0.reached.count == $0.expected.count } }

    /// The expected devices that have not reached the goal.
    public var unreached: Set<Int> { state.withLock { $0.expected.subtracting($0.reached.keys) } }

    /// Records settings a device got; true when they carry the phase's marker and the device
    /// is expected and had not got them before.
    func received(_ values: JSONObject, device: Int) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard let marker = state.marker, values[Self.markerKey] == .string(marker), state.expected.contains(device),
                state.reached[device] == nil
            else { return false }
            state.reached[device] = state.started.duration(to: now)
            return true
        }
    }

    func count(_ kind: String) { state.withLock { $0.requests[kind, default: 0] += 1 } }

    /// The agent's log events counted beside the requests (`event repeated`): what the agent's
    /// rules made of the answers.
    static let countedEvents: Set<String> = ["repeated", "long-poll-refused", "report-refused", "change-refused", "change-conflict"]

    /// Counts a log event of a device's machine, when it is one of ``countedEvents``.
    func logged(_ event: String) {
        guard Self.countedEvents.contains(event) else { return }
        count("event " + event)
    }

    func failed(_ kind: String) { state.withLock { $0.errors[kind, default: 0] += 1 } }

    func beginWait() { state.withLock { $0.waiting += 1 } }

    func endWait() { state.withLock { $0.waiting -= 1 } }
}
