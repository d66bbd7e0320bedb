import FleetAgentCore
import PosixThreads

/// Requests the inbox has checked, waiting for their app's loop, in the order they arrived.
///
/// Waiting is level-triggered: ``next()`` returns at once while anything is queued and
/// otherwise waits for the next delivery, the check and the wait made under one lock. A
/// delivery can therefore never be missed between the loop's last look and its wait: no
/// wake-up flag is needed.
final class InboxQueue: Sendable {
    private struct State {
        var queued: [InboxDelivery] = []
        var reader: CheckedContinuation<[InboxDelivery]?, Never>?
    }

    private let state = Locked(State())

    /// Adds a delivery, handing it to a waiting reader at once.
    func deliver(_ delivery: InboxDelivery) {
        let handOver: (CheckedContinuation<[InboxDelivery]?, Never>, [InboxDelivery])? = state.withLock { state in
            state.queued.append(delivery)
            guard let reader = state.reader else { return nil }
            state.reader = nil
            defer { state.queued = [] }
            return (reader, state.queued)
        }
        if let (reader, deliveries) = handOver { reader.resume(returning: deliveries) }
    }

    /// Takes what is queued now, without waiting.
    func takeQueued() -> [InboxDelivery] {
        state.withLock { state in
            defer { state.queued = [] }
            return state.queued
        }
    }

    /// Takes everything queued, waiting for a first delivery when there is none; `nil` once the
    /// task is cancelled. One reader at a time.
    func next() async -> [InboxDelivery]? {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<[InboxDelivery]?, Never>) in
                let ready: [InboxDelivery]?? = state.withLock { state in
                    if !state.queued.isEmpty {
                        defer { state.queued = [] }
                        return .some(state.queued)
                    }
                    // Cancelled before the reader was stored: the handler found nobody to resume.
                    if Task.isCancelled { return .some(nil) }
                    state.reader = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let reader = state.withLock { state in
                defer { state.reader = nil }
                return state.reader
            }
            reader?.resume(returning: nil)
        }
    }
}
