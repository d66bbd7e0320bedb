/// Wakes long-polls when an app's settings change, without polling the database.
///
/// Every write that can change what devices of an app see (metadata, values at any scope)
/// calls ``changed(_:)``. A long-poll reads ``generation(of:)`` *before* it computes the
/// device's revision, and waits with ``waitForChange(of:after:)`` only if that revision is the
/// one the device already has: a change between the two is never lost, because the generation
/// has then moved and the wait returns at once. Waking is per app; each woken long-poll
/// recomputes its own device's revision and waits again if it did not move.
public actor ChangeNotifier {
    private var generations: [String: UInt64] = [:]
    private var waiters: [String: [Int: CheckedContinuation<Bool, Never>]] = [:]
    private var cancelledBeforeRegistration: Set<Int> = []
    private var nextWaiter = 0

    public init() {}

    /// How many changes of `app` there have been (0 at start).
    public func generation(of app: String) -> UInt64 {
        generations[app, default: 0]
    }

    /// Records a change of `app` and wakes everything waiting on it.
    public func changed(_ app: String) {
        generations[app, default: 0] += 1
        guard let woken = waiters.removeValue(forKey: app) else { return }
        for continuation in woken.values { continuation.resume(returning: true) }
    }

    /// The number of long-polls waiting on `app` (for tests and metrics).
    public func waiterCount(of app: String) -> Int {
        waiters[app]?.count ?? 0
    }

    /// Returns true when `app` changed after `generation` (at once if it already has), false
    /// when the calling task is cancelled first.
    public func waitForChange(of app: String, after generation: UInt64) async -> Bool {
        if generations[app, default: 0] != generation { return true }
        let id = nextWaiter
        nextWaiter += 1
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if cancelledBeforeRegistration.remove(id) != nil || Task.isCancelled {
                    continuation.resume(returning: false)
                } else {
                    waiters[app, default: [:]][id] = continuation
                }
            }
        } onCancel: {
            Task { await self.cancel(id, app: app) }
        }
    }

    private func cancel(_ id: Int, app: String) {
        if let continuation = waiters[app]?.removeValue(forKey: id) {
            continuation.resume(returning: false)
        } else {
            cancelledBeforeRegistration.insert(id)
        }
    }

    /// Waits for a change of `app` after `generation` for at most `timeout` on `clock`;
    /// returns whether it changed.
    public func waitForChange<C: Clock>(of app: String, after generation: UInt64, timeout: C.Duration, clock: C) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask { await self.waitForChange(of: app, after: generation) }
            group.addTask {
                try? await clock.sleep(for: timeout)
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }
}
