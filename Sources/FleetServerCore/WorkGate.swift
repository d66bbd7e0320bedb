import PosixThreads

/// Runs jobs in tasks of their own, at most ``limit`` at once; the others wait their turn, in
/// order, as closures: no task, no stack.
///
/// A Swift task keeps the memory its deepest call grew to (its async frames' slabs, about
/// 30 KB for a settings request) until it ends. When an app-wide change wakes 10,000 parked
/// long-polls, or 10,000 devices connect at once, a task each would all be alive together,
/// waiting for the same few grouped writes: hundreds of megabytes at the peak, which the
/// allocator then keeps. Through the gate only ``limit`` are alive; the rest are a closure
/// each until one ends. The machine's cores are busy either way, so the fleet is served no
/// later (and the grouped writes still take up to ``limit`` items at a time).
///
/// A job must not wait for a job submitted after it (it could wait for ever): requests do not.
public final class WorkGate: Sendable {
    private struct State {
        var running = 0
        var submitted = 0
        var waiting: [@Sendable () async -> Void] = []
        /// Index of the next waiting job (the array is compacted when it is used up).
        var next = 0
    }

    /// The most jobs running at once.
    public let limit: Int
    private let state = Locked(State())

    /// The default limit: enough to fill the grouped writes' batches (512 items) and keep two
    /// cores busy, little enough that their tasks take a few megabytes.
    public static let defaultLimit = 512

    public init(limit: Int = WorkGate.defaultLimit) {
        self.limit = max(1, limit)
    }

    /// Runs `job` in a task of its own, now or when a running job ends.
    public func submit(_ job: @escaping @Sendable () async -> Void) {
        let startsNow = state.withLock { state in
            state.submitted &+= 1
            guard state.running < limit else {
                state.waiting.append(job)
                return false
            }
            state.running += 1
            return true
        }
        if startsNow { start(job) }
    }

    /// Jobs submitted so far (wrapping).
    public var submitted: Int { state.withLock { $0.submitted } }

    /// Jobs running and waiting now.
    public var counts: (running: Int, waiting: Int) {
        state.withLock { ($0.running, $0.waiting.count - $0.next) }
    }

    private func start(_ job: @escaping @Sendable () async -> Void) {
        Task {
            var job = job
            while true {
                await job()
                guard let next = takeNext() else { return }
                job = next
            }
        }
    }

    /// The next waiting job, which takes the ended one's place; `nil`: none, one fewer runs.
    private func takeNext() -> (@Sendable () async -> Void)? {
        state.withLock { state in
            guard state.next < state.waiting.count else {
                state.running -= 1
                state.waiting.removeAll(keepingCapacity: false)
                state.next = 0
                return nil
            }
            let job = state.waiting[state.next]
            state.next += 1
            if state.next >= 1024 && state.next * 2 >= state.waiting.count {
                state.waiting.removeFirst(state.next)
                state.next = 0
            }
            return job
        }
    }
}
