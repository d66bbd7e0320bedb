import FleetProtocol
import PosixThreads

/// Wakes long-polls when what their device sees may have changed, without polling the database,
/// and wakes only those.
///
/// Every write that can change what devices of an app see calls ``changed(_:scope:)`` with the
/// scope it wrote: a device-scope write wakes that device's long-poll for the app, a group
/// write the long-polls of the group's devices, an app-wide write or a metadata upload all of
/// the app's. A change to a device itself (disabled, deleted, its apps or groups changed, its
/// token rotated) calls ``deviceChanged(_:)``, which wakes all of that device's long-polls so
/// that each checks its device again (a revoked device is then answered 401 at once).
///
/// A long-poll reads ``generation(of:device:)`` *before* it computes the device's revision, and
/// waits with ``waitForChange(of:device:groups:after:)`` only if that revision is the one the
/// device already has: a change between the two (of the app, or of the device itself) is never
/// lost, because the generation has then moved and the wait returns at once.
///
/// One long-poll per device and app: a newer one replaces the older, which ends
/// ``WaitOutcome/replaced`` (a device that reconnected after a dropped connection leaves no
/// stale waiter behind, and a device cannot pile up waiters).
///
/// Both calls first invalidate ``cache`` (what the hot path reads instead of the store), so a
/// woken long-poll, and every request after the call, sees the write.
///
/// At most ``capacity`` long-polls are held at once (each holds a connection, and so an open
/// file): one more ends ``WaitOutcome/shed`` at once, so that the server sheds load rather
/// than running out of descriptors. A long-poll replacing the same device's is never shed.
public actor ChangeNotifier {
    /// How a wait ended.
    public enum WaitOutcome: Sendable, Hashable {
        /// Something the device sees may have changed: check again.
        case changed
        /// The calling task or its ``WaitCancellation`` was cancelled (the client went away), or
        /// the server is shutting down.
        case cancelled
        /// A newer long-poll of the same device and app took its place.
        case replaced
        /// The time was up.
        case timedOut
        /// ``capacity`` long-polls are held already: the device should come back later.
        case shed
        /// ``busyLimit`` long-polls are held already: the device is told when to poll next
        /// instead of being held (see ``FleetServices/LongPollAnswer/nextPoll``).
        case busy
    }

    private struct Waiter {
        let app: String
        let device: String
        let groups: [String]
        /// Told how the wait ended, once.
        let resume: @Sendable (WaitOutcome) -> Void
        let cancellation: ObjectIdentifier?
    }

    /// The one sleep that ends waits whose time is up.
    private struct Timer {
        let wakesAt: Duration
        let task: Task<Void, Never>

        func cancel() { task.cancel() }
    }

    private struct DeviceApp: Hashable {
        let device: String
        let app: String
    }

    private var generations: [String: UInt64] = [:]
    /// Counts the times everything may have changed (``StoreChange/unknown``).
    private var everythingGeneration: UInt64 = 0
    private var policyGeneration: UInt64 = 0
    private var waiters: [Int: Waiter] = [:]
    private var waitersByApp: [String: Set<Int>] = [:]
    private var waitersByDevice: [String: Set<Int>] = [:]
    private var waiterByDeviceApp: [DeviceApp: Int] = [:]
    private var deviceGenerations: [String: UInt64] = [:]
    private var waiterByCancellation: [ObjectIdentifier: Int] = [:]
    private var deadlines = DeadlineQueue<Duration>()
    private var timer: Timer?
    private var nextWaiter = 0
    /// How many long-polls the last ``changed(_:scope:)`` or ``deviceChanged(_:)`` woke.
    public private(set) var lastWakeCount = 0
    /// The most long-polls held at once.
    public let capacity: Int
    /// What the hot path keeps in memory; invalidated here, before long-polls are woken.
    public nonisolated let cache: ServingCache
    private let onHeldCountChange: @Sendable (Int) -> Void
    /// What deadlines are measured by.
    private let clock: ServiceClock

    /// - Parameters:
    ///   - capacity: the most long-polls held at once (at least 1).
    ///   - cache: what the service keeps in memory (a new, empty one by default).
    ///   - busyLimit: from how many long-polls held on the next is answered ``WaitOutcome/busy``
    ///     (at most `capacity`; `.max`: never).
    ///   - onHeldCountChange: told the number of long-polls held whenever it changes (a gauge).
    ///   - clock: what deadlines are measured by (the services' clock).
    public init(
        capacity: Int = .max, busyLimit: Int = .max, cache: ServingCache = ServingCache(),
        onHeldCountChange: @escaping @Sendable (Int) -> Void = { _ in }, clock: ServiceClock = .continuous
    ) {
        self.clock = clock
        self.capacity = max(1, capacity)
        self.busyLimit = min(max(1, busyLimit), max(1, capacity))
        self.cache = cache
        self.onHeldCountChange = onHeldCountChange
    }

    /// From this many long-polls held on, the next is not held but answered at once and told
    /// when to poll next (``WaitOutcome/busy``): the gentle step before ``capacity``.
    public let busyLimit: Int

    /// The number of long-polls held, over all apps.
    public var heldCount: Int { waiters.count }

    /// Where a long-poll starts from: the changes of its app and of its device so far.
    public struct Generation: Sendable, Hashable {
        public let app: UInt64
        public let device: UInt64
        /// The times changes made elsewhere may have been missed.
        public let everything: UInt64
        /// The changes of agent policies (any scope: a device's policy comes from several).
        public let policy: UInt64

        /// Before any change.
        public static let start = Generation(app: 0, device: 0, everything: 0, policy: 0)
    }

    /// How many changes of `app` there have been (0 at start).
    public func generation(of app: String) -> UInt64 {
        generations[app, default: 0]
    }

    /// The changes of `app` and of `device` so far: read before computing the device's revision.
    public func generation(of app: String, device: String) -> Generation {
        Generation(
            app: generations[app, default: 0], device: deviceGenerations[device, default: 0], everything: everythingGeneration,
            policy: policyGeneration)
    }

    /// Records a write of `app` at `scope` and wakes the long-polls of the devices it reaches.
    /// `.app` and `.defaults` (a metadata upload) reach every device of the app.
    public func changed(_ app: String, scope: Scope) {
        cache.invalidate(app: app, scope: scope)
        generations[app, default: 0] += 1
        let all = waitersByApp[app] ?? []
        let reached: [Int]
        switch scope {
        case .defaults, .app:
            reached = Array(all)
        case .group(let name):
            reached = all.filter { waiters[$0]?.groups.contains(name) == true }
        case .device(let device):
            // The one long-poll a device may have per app: no scan of the app's waiters.
            reached = waiterByDeviceApp[DeviceApp(device: device, app: app)].map { [$0] } ?? []
        }
        lastWakeCount = wake(reached, with: .changed)
    }

    /// Wakes every long-poll of `device`, in every app, so that each checks the device again.
    public func deviceChanged(_ device: String) {
        cache.invalidate(device: device)
        // A long-poll of the device between reading its generation and waiting sees this too.
        deviceGenerations[device, default: 0] += 1
        lastWakeCount = wake(waitersByDevice[device] ?? [], with: .changed)
    }

    /// Records a change of the agent policy at `scope` and wakes the long-polls of the devices
    /// it reaches, so that each answers with the policy's new tag.
    public func policyChanged(_ scope: PolicyScope) {
        cache.invalidatePolicies()
        // A long-poll between reading its generation and waiting sees this too.
        policyGeneration += 1
        let reached: [Int]
        switch scope {
        case .app(let app): reached = Array(waitersByApp[app] ?? [])
        case .group(let name): reached = waiters.filter { $0.value.groups.contains(name) }.map(\.key)
        case .device(let id): reached = Array(waitersByDevice[id] ?? [])
        }
        lastWakeCount = wake(reached, with: .changed)
    }

    /// Records a change another server instance on the same database made (heard from the
    /// store): forgets what it may have made stale, revisions included (see
    /// ``ServingCache/invalidateElsewhere(app:scope:)``), and wakes the long-polls it reaches,
    /// as ``changed(_:scope:)`` and ``deviceChanged(_:)`` do for this instance's own writes.
    /// ``StoreChange/unknown`` forgets everything and wakes every long-poll to check again.
    public func changedElsewhere(_ change: StoreChange) {
        switch change {
        case .values(let app, let scope):
            cache.invalidateElsewhere(app: app, scope: scope)
            changed(app, scope: scope)
        case .device(let id):
            deviceChanged(id)
        case .policy(let scope):
            policyChanged(scope)
        case .unknown:
            cache.invalidateAll()
            everythingGeneration += 1
            lastWakeCount = wake(Array(waiters.keys), with: .changed)
        }
    }

    /// The number of long-polls waiting on `app`.
    public func waiterCount(of app: String) -> Int {
        waitersByApp[app]?.count ?? 0
    }

    /// Waits until a change that reaches `device` (in `groups`) of `app` after `generation`
    /// (at once if `app` has changed since), a newer long-poll of the same device and app, or
    /// the cancellation of the calling task.
    public func waitForChange(of app: String, device: String, groups: [String], after generation: Generation) async -> WaitOutcome {
        await wait(of: app, device: device, groups: groups, after: generation, deadline: nil, cancellation: nil)
    }

    /// As ``waitForChange(of:device:groups:after:)``, for at most `timeout` (``WaitOutcome/timedOut``),
    /// and ended ``WaitOutcome/cancelled`` by `cancellation` (its client went away, the server
    /// is shutting down).
    ///
    /// No task is made per wait: the notifier's one timer ends the waits whose time is up, in
    /// deadline order (see ``DeadlineQueue``).
    public func waitForChange(
        of app: String, device: String, groups: [String], after generation: Generation, timeout: Duration,
        cancellation: WaitCancellation? = nil
    ) async -> WaitOutcome {
        await wait(
            of: app, device: device, groups: groups, after: generation, deadline: clock.now + timeout,
            cancellation: cancellation)
    }

    /// Ends the long-poll `cancellation` was given to (``WaitOutcome/cancelled``), or the one it
    /// will be given to at once. Safe from any thread, synchronous code included (a channel's
    /// close).
    public nonisolated func cancel(_ cancellation: WaitCancellation) {
        guard cancellation.markCancelled() else { return }
        Task { await self.cancelWaiter(of: cancellation) }
    }

    /// As ``waitForChange(of:device:groups:after:timeout:cancellation:)``, without a task that
    /// waits: a parked long-poll is a small record here until its wait ends, and `resume` is
    /// then called once with the outcome (on this actor: it should only hand the outcome on).
    ///
    /// - Returns: the outcome when the wait ends before it begins (`resume` is then never
    ///   called): the app or device changed since `generation`, the long-poll is ``WaitOutcome/shed``
    ///   or ``WaitOutcome/busy``, `cancellation` was cancelled, or `timeout` is not positive;
    ///   `nil` when it waits.
    public func park(
        of app: String, device: String, groups: [String], after generation: Generation, timeout: Duration,
        cancellation: WaitCancellation?, resume: @escaping @Sendable (WaitOutcome) -> Void
    ) -> WaitOutcome? {
        if self.generation(of: app, device: device) != generation { return .changed }
        if cancellation?.isCancelled == true { return .cancelled }
        let id = nextWaiter
        nextWaiter += 1
        return register(
            id, of: app, device: device, groups: groups, deadline: clock.now + timeout, cancellation: cancellation, resume: resume)
    }

    private func wait(
        of app: String, device: String, groups: [String], after generation: Generation, deadline: Duration?,
        cancellation: WaitCancellation?
    ) async -> WaitOutcome {
        if self.generation(of: app, device: device) != generation { return .changed }
        let id = nextWaiter
        nextWaiter += 1
        // The waiter is registered before this call first suspends, so a cancellation (whose
        // handler hops back onto this actor) always finds it registered, or woken already.
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled || cancellation?.isCancelled == true {
                    continuation.resume(returning: .cancelled)
                    return
                }
                let outcome = register(
                    id, of: app, device: device, groups: groups, deadline: deadline, cancellation: cancellation,
                    resume: { continuation.resume(returning: $0) })
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            Task { await self.cancel(id) }
        }
    }

    /// Holds waiter `id` until its wait ends and `resume` is told how; returns the outcome
    /// instead when the wait cannot begin (out of time, shed, busy).
    private func register(
        _ id: Int, of app: String, device: String, groups: [String], deadline: Duration?, cancellation: WaitCancellation?,
        resume: @escaping @Sendable (WaitOutcome) -> Void
    ) -> WaitOutcome? {
        if let deadline, deadline <= clock.now { return .timedOut }
        let key = DeviceApp(device: device, app: app)
        if let older = waiterByDeviceApp[key] {
            _ = wake([older], with: .replaced)
        } else if waiters.count >= capacity {
            return .shed
        } else if waiters.count >= busyLimit {
            return .busy
        }
        waiters[id] = Waiter(
            app: app, device: device, groups: groups, resume: resume, cancellation: cancellation.map(ObjectIdentifier.init))
        waitersByApp[app, default: []].insert(id)
        waitersByDevice[device, default: []].insert(id)
        waiterByDeviceApp[key] = id
        if let cancellation { waiterByCancellation[ObjectIdentifier(cancellation)] = id }
        if let deadline {
            deadlines.add(id, at: deadline)
            armTimer()
        }
        onHeldCountChange(waiters.count)
        return nil
    }

    private func cancel(_ id: Int) {
        // Not there: it was woken already.
        _ = wake([id], with: .cancelled)
    }

    private func cancelWaiter(of cancellation: WaitCancellation) {
        guard let id = waiterByCancellation[ObjectIdentifier(cancellation)] else { return }
        _ = wake([id], with: .cancelled)
    }

    /// Sleeps until the earliest deadline, unless the timer already wakes by then.
    private func armTimer() {
        guard let earliest = deadlines.earliest else {
            timer?.cancel()
            timer = nil
            return
        }
        if let timer, timer.wakesAt <= earliest { return }
        timer?.cancel()
        let task = Task {
            try? await self.clock.sleep(until: earliest)
            guard !Task.isCancelled else { return }
            self.expireDue()
        }
        timer = Timer(wakesAt: earliest, task: task)
    }

    /// Ends the waits whose time is up, and sleeps until the next.
    private func expireDue() {
        timer = nil
        _ = wake(deadlines.due(at: clock.now), with: .timedOut)
        deadlines.compact { waiters[$0] != nil }
        armTimer()
    }

    /// Ends the waits `ids` with `outcome`; returns how many there were.
    private func wake(_ ids: some Collection<Int>, with outcome: WaitOutcome) -> Int {
        var count = 0
        for id in ids {
            guard let waiter = waiters.removeValue(forKey: id) else { continue }
            waitersByApp[waiter.app]?.remove(id)
            if waitersByApp[waiter.app]?.isEmpty == true { waitersByApp[waiter.app] = nil }
            waitersByDevice[waiter.device]?.remove(id)
            if waitersByDevice[waiter.device]?.isEmpty == true { waitersByDevice[waiter.device] = nil }
            let key = DeviceApp(device: waiter.device, app: waiter.app)
            if waiterByDeviceApp[key] == id { waiterByDeviceApp[key] = nil }
            if let cancellation = waiter.cancellation, waiterByCancellation[cancellation] == id { waiterByCancellation[cancellation] = nil }
            waiter.resume(outcome)
            count += 1
        }
        if count > 0 { onHeldCountChange(waiters.count) }
        return count
    }
}

/// What ends one long-poll from outside its task: its client went away, or the server is
/// shutting down. Give it to
/// ``ChangeNotifier/waitForChange(of:device:groups:after:timeout:cancellation:)`` and call
/// ``ChangeNotifier/cancel(_:)`` when the connection closes — before, during or after the wait.
public final class WaitCancellation: Sendable {
    private let cancelled = Locked(false)

    public init() {}

    /// Whether ``ChangeNotifier/cancel(_:)`` has been called with it.
    public var isCancelled: Bool { cancelled.withLock { $0 } }

    /// Marks it cancelled; `false` when it was already.
    func markCancelled() -> Bool {
        cancelled.withLock { cancelled in
            defer { cancelled = true }
            return !cancelled
        }
    }
}
