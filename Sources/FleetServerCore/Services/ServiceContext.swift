import FleetJSON
import FleetProtocol
import Logging
import PosixThreads

/// What the services share: the store and what stands in front of it (the serving cache, the
/// change notifier, the write section), the clocks, and where they report (logger, metrics,
/// events). One per server; every service holds the same one (a reference: a service reading
/// one part of it copies nothing else).
public final class ServiceContext: Sendable {
    /// Where the state is kept.
    public let store: any SettingsStore
    /// Wakes long-polls and keeps the serving cache (``ChangeNotifier/cache``) current.
    public let notifier: ChangeNotifier
    /// Serialises the writes that check before they write (across instances with a shared lock).
    let writes: SerialSection
    /// Timestamps: seconds since the epoch, as stored and shown.
    public let wallClock: any WallClock
    /// Waits and durations (long-poll deadlines): the system's continuous clock in the server,
    /// a manual one in tests.
    public let clock: ServiceClock
    public let logger: Logger
    /// What the server measures.
    public let metrics: ServerMetrics
    /// Reports and changes as they happen, for the console's live updates.
    public let events: ServiceEvents
    /// Revision advances, written in shared transactions (serving a device advances its revision).
    let revisionWrites: GroupCommit<RevisionAdvance, RevisionState>
    /// Which running rollouts have news to look at (status reports mark their app).
    let rolloutLooks = Locked(RolloutLooks())
    /// When the last write woke long-polls, on ``clock`` (for ``ServerMetrics/longPollWoken(after:)``).
    let lastNotified: Locked<Duration>
    /// Where requests and woken long-polls run, so many at once (see ``WorkGate``).
    public let workGate: WorkGate

    /// - Parameter writeLock: the lock shared with the other instances on the same database, if
    ///   any (their changes reach this one through ``ChangeNotifier/changedElsewhere(_:)``).
    public init(
        store: any SettingsStore, wallClock: any WallClock, clock: ServiceClock = .continuous, notifier: ChangeNotifier = ChangeNotifier(),
        metrics: ServerMetrics = ServerMetrics(), events: ServiceEvents = ServiceEvents(), writeLock: (any SharedWriteLock)? = nil,
        workGate: WorkGate = WorkGate(), logger: Logger
    ) {
        self.workGate = workGate
        self.store = store
        self.notifier = notifier
        self.writes = SerialSection(shared: writeLock)
        self.wallClock = wallClock
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        self.events = events
        self.revisionWrites = GroupCommit { try await store.advanceRevisions($0) }
        self.lastNotified = Locked(clock.now)
    }

    /// The wall clock's time, in seconds since the epoch.
    public var now: Int64 { wallClock.secondsSinceEpoch() }
}

/// A service over the shared ``ServiceContext``: its parts read as the service's own.
protocol FleetService: Sendable {
    var context: ServiceContext { get }
}

extension FleetService {
    var store: any SettingsStore { context.store }
    var notifier: ChangeNotifier { context.notifier }
    /// What the hot path reads instead of the store; the notifier invalidates it.
    var cache: ServingCache { context.notifier.cache }
    var writes: SerialSection { context.writes }
    var wallClock: any WallClock { context.wallClock }
    var clock: ServiceClock { context.clock }
    var logger: Logger { context.logger }
    var metrics: ServerMetrics { context.metrics }
    var events: ServiceEvents { context.events }
    var revisionWrites: GroupCommit<RevisionAdvance, RevisionState> { context.revisionWrites }
    var rolloutLooks: Locked<RolloutLooks> { context.rolloutLooks }
    var lastNotified: Locked<Duration> { context.lastNotified }
    /// The wall clock's time, in seconds since the epoch.
    var now: Int64 { context.now }
}

/// Any `Clock` measuring in `Duration`, as the services use it: time since the clock was
/// given, and sleeping until such a time. The server gives the system's continuous clock;
/// tests give a manual one, so that a long-poll's timeout passes without waiting.
public struct ServiceClock: Sendable {
    private let elapsed: @Sendable () -> Duration
    private let sleeper: @Sendable (Duration) async throws -> Void

    /// Measures from `clock`'s time now.
    public init<C: Clock<Duration>>(_ clock: C) {
        let origin = clock.now
        elapsed = { origin.duration(to: clock.now) }
        sleeper = { deadline in try await clock.sleep(until: origin.advanced(by: deadline), tolerance: .milliseconds(10)) }
    }

    /// The system's continuous clock.
    public static let continuous = ServiceClock(ContinuousClock())

    /// The time since the clock was given.
    public var now: Duration { elapsed() }

    /// Returns when ``now`` is `deadline` or later.
    ///
    /// - Throws: `CancellationError` when the calling task is cancelled first.
    public func sleep(until deadline: Duration) async throws { try await sleeper(deadline) }
}
