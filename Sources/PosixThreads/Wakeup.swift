/// A wake-up call that is kept until someone waits for it: ``signal()`` any number of times,
/// and the next ``wait()`` returns at once (once). The agent's "reload" (SIGHUP); the server's
/// webhook dispatcher, woken when its instance queued a message.
public final class Wakeup: Sendable {
    private struct State {
        var pending = false
        var waiter: CheckedContinuation<Void, Never>?
    }

    private let state = Locked(State())

    public init() {}

    /// Wakes the waiter, or the next one to wait.
    public func signal() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if let waiter = state.waiter {
                state.waiter = nil
                return waiter
            }
            state.pending = true
            return nil
        }
        waiter?.resume()
    }

    /// Returns when signalled (at once if a signal is pending) or when the task is cancelled.
    /// One waiter at a time.
    public func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = state.withLock { state -> Bool in
                    if state.pending || Task.isCancelled {
                        state.pending = false
                        return true
                    }
                    precondition(state.waiter == nil, "one waiter at a time")
                    state.waiter = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
                defer { state.waiter = nil }
                return state.waiter
            }
            waiter?.resume()
        }
    }

    /// Returns when signalled, when `duration` has passed, or when the task is cancelled,
    /// whichever comes first.
    public func wait(upTo duration: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { try? await Task.sleep(for: duration) }
            group.addTask { await self.wait() }
            await group.next()
            group.cancelAll()
        }
    }
}
