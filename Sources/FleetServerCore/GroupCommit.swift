import FleetProtocol
import HTTPTypes
import PosixThreads

/// Writes items to the store with as few transactions as the store's pace allows (group
/// commit): items that arrive while one batch is being written go together in the next. An
/// app-wide change that wakes 10,000 long-polls then costs a few dozen write transactions for
/// their revisions, and a few dozen more for the status reports that follow, not 10,000 each.
///
/// The first caller that finds no batch being written writes batches until none is waiting;
/// every caller gets its own item's result, or its batch's error.
final class GroupCommit<Item: Sendable, Output: Sendable>: Sendable {
    /// The most items in one transaction, so that one batch never holds the write lock long.
    let batchLimit: Int

    private struct Waiting {
        let item: Item
        let continuation: CheckedContinuation<Result<Output, any Error>, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let commit: @Sendable ([Item]) async throws -> [Output]
    private let state = Locked(State())

    /// - Parameter commit: writes the items in one transaction and returns their results in order.
    init(batchLimit: Int = 512, commit: @escaping @Sendable ([Item]) async throws -> [Output]) {
        self.batchLimit = max(1, batchLimit)
        self.commit = commit
    }

    /// The result of `item`, written with whatever other items are waiting.
    func submit(_ item: Item) async throws -> Output {
        let result = await withCheckedContinuation { continuation in
            let writesNow = state.withLock { state in
                state.waiting.append(Waiting(item: item, continuation: continuation))
                guard !state.writing else { return false }
                state.writing = true
                return true
            }
            if writesNow { Task { await self.writeBatches() } }
        }
        return try result.get()
    }

    private func writeBatches() async {
        while true {
            let batch = state.withLock { state in
                let batch = Array(state.waiting.prefix(batchLimit))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                let outputs = try await commit(batch.map(\.item))
                guard outputs.count == batch.count else {
                    throw ServiceError(500, .internalError, "the store answered \(outputs.count) results for \(batch.count) items")
                }
                for (waiting, output) in zip(batch, outputs) { waiting.continuation.resume(returning: .success(output)) }
            } catch {
                for waiting in batch { waiting.continuation.resume(returning: .failure(error)) }
            }
        }
    }
}
