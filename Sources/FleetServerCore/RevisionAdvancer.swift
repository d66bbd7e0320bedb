import PosixThreads

/// One device's revision to move for values with a new fingerprint (see
/// ``SettingsStore/advanceRevisions(_:)``).
public struct RevisionAdvance: Sendable, Hashable {
    public var app: String
    public var deviceID: String
    public var fingerprint: UInt64

    public init(app: String, deviceID: String, fingerprint: UInt64) {
        self.app = app
        self.deviceID = deviceID
        self.fingerprint = fingerprint
    }
}

/// Moves devices' revisions in the store with as few transactions as the store's pace allows
/// (group commit): advances that arrive while one batch is being written go together in the
/// next. An app-wide change that wakes 10,000 long-polls then costs a few dozen write
/// transactions, not 10,000.
///
/// The first caller that finds no batch being written writes batches until none is waiting;
/// every caller gets its own device's state, or the batch's error.
final class RevisionAdvancer: Sendable {
    /// The most advances in one transaction, so that one batch never holds the write lock long.
    static let batchLimit = 512

    private struct Waiting {
        let advance: RevisionAdvance
        let continuation: CheckedContinuation<Result<RevisionState, any Error>, Never>
    }

    private struct State {
        var waiting: [Waiting] = []
        var writing = false
    }

    private let store: any SettingsStore
    private let state = Locked(State())

    init(store: any SettingsStore) {
        self.store = store
    }

    /// The device's revision after `advance`, written with whatever other advances are waiting.
    func advance(_ advance: RevisionAdvance) async throws -> RevisionState {
        let result = await withCheckedContinuation { continuation in
            let writesNow = state.withLock { state in
                state.waiting.append(Waiting(advance: advance, continuation: continuation))
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
                let batch = Array(state.waiting.prefix(Self.batchLimit))
                state.waiting.removeFirst(batch.count)
                if batch.isEmpty { state.writing = false }
                return batch
            }
            guard !batch.isEmpty else { return }
            do {
                let states = try await store.advanceRevisions(batch.map(\.advance))
                for (waiting, state) in zip(batch, states) { waiting.continuation.resume(returning: .success(state)) }
            } catch {
                for waiting in batch { waiting.continuation.resume(returning: .failure(error)) }
            }
        }
    }
}
