/// Whether the agent's loops are alive, for the systemd watchdog.
///
/// Every loop announces, before each step (a request, a sleep, a hook), the latest time by
/// which it will be back: the step's own limit plus ``slack``. The watchdog is fed only while no
/// loop has overstayed its deadline, so a loop stuck anywhere (a hung call, a deadlock) makes
/// systemd restart the agent, while a loop that is merely waiting on a long-poll does not.
public struct Liveness: Sendable, Equatable {
    /// Added to every announced step limit.
    public static let slack: Duration = .seconds(30)

    private var deadlines: [String: ContinuousClock.Instant] = [:]

    public init() {}

    /// Records that `loop` starts a step that ends within `limit` of `now`.
    public mutating func beginStep(_ loop: String, limit: Duration, now: ContinuousClock.Instant) {
        deadlines[loop] = now + limit + Self.slack
    }

    /// Forgets `loop` (it ended on purpose).
    public mutating func remove(_ loop: String) { deadlines[loop] = nil }

    /// The loops past their deadline at `now`, sorted.
    public func overdueLoops(at now: ContinuousClock.Instant) -> [String] {
        deadlines.filter { $0.value < now }.map(\.key).sorted()
    }
}

/// When the agent tells systemd it is ready: once every app is served, from disk or from the
/// server, or when the ready timeout passes (so a device that starts offline with nothing on
/// disk does not hold up the boot; the status line names the apps still waiting).
public struct Readiness: Sendable, Equatable {
    public private(set) var waiting: Set<String>
    public private(set) var announced = false

    public init(apps: [String]) {
        waiting = Set(apps)
    }

    /// Records that `app` has settings to serve. Returns `true` when this makes the agent ready
    /// for the first time.
    public mutating func served(_ app: String) -> Bool {
        waiting.remove(app)
        return announceIfReady()
    }

    /// Records that the ready timeout passed. Returns `true` when the agent was not yet announced.
    public mutating func timedOut() -> Bool {
        guard !announced else { return false }
        announced = true
        return true
    }

    private mutating func announceIfReady() -> Bool {
        guard waiting.isEmpty, !announced else { return false }
        announced = true
        return true
    }
}
