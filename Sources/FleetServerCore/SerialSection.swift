import FleetProtocol
import HTTPTypes

/// Runs async operations one at a time, in arrival order: the server's writes go through one
/// section, so a check and the write it guards (the `If-Match` revision, the metadata version,
/// the validation of stored values) can never interleave with another write.
///
/// An actor alone does not give this: it is re-entered at every `await` of the store.
///
/// With a ``SharedWriteLock`` (several instances on one PostgreSQL database), the operation
/// whose turn it is here also takes that lock, so one write at a time runs across every
/// instance; the others of this instance wait here, in order, not on the database.
public actor SerialSection {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private let shared: (any SharedWriteLock)?

    /// - Parameter shared: the lock of all instances on the same database, if there are several.
    public init(shared: (any SharedWriteLock)? = nil) {
        self.shared = shared
    }

    /// Runs `operation` once every operation that arrived before it has finished (and, with a
    /// shared lock, while this instance holds it).
    public func run<T: Sendable>(_ operation: @Sendable () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer { handOver() }
        guard let shared else { return try await operation() }
        return try await shared.withLock(operation)
    }

    private func handOver() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()  // stays busy: the next one owns the section now
        }
    }
}

extension SerialSection {
    /// How many times ``checkedWrite(read:check:commit:)`` checks again after another write
    /// changed what it checked, before it gives up with 409 `concurrent-write`.
    public static let checkAttempts = 5

    /// A write whose check runs outside the section (and off the section's actor: `nonisolated`,
    /// so the caller's task runs it): `check` (a validation, which may be slow) works on what
    /// `read` returned; then, inside the section, `read` runs again and `commit`
    /// runs only if it returns the same. If another write changed it in between, the check is
    /// made again on the new state. So one slow validation never holds up the other writes,
    /// and no write is committed on the strength of a check of something else.
    ///
    /// - Throws: what `read`, `check` or `commit` throw; 409 `concurrent-write` when the state
    ///   changed under every one of ``checkAttempts`` checks.
    nonisolated public func checkedWrite<State: Equatable & Sendable, Checked: Sendable, Result: Sendable>(
        read: @Sendable () async throws -> State,
        check: @Sendable (State) throws -> Checked,
        commit: @Sendable (State, Checked) async throws -> Result
    ) async throws -> Result {
        let written = try await checkedWriteUnlessUnchanged(read: read, check: { state -> Checked? in try check(state) }, commit: commit)
        guard let written else { preconditionFailure("a check that returns a value always writes") }
        return written
    }

    /// ``checkedWrite(read:check:commit:)`` for a write that may change nothing: when `check`
    /// returns `nil` (the state already is what the write asks for), the section is not
    /// entered, nothing is committed and the answer is `nil`. A write that changes nothing then
    /// costs a read, not the write lock (fleet-wide on PostgreSQL), a history entry and a
    /// wake-up of every long-poll it concerns.
    nonisolated public func checkedWriteUnlessUnchanged<State: Equatable & Sendable, Checked: Sendable, Result: Sendable>(
        read: @Sendable () async throws -> State,
        check: @Sendable (State) throws -> Checked?,
        commit: @Sendable (State, Checked) async throws -> Result
    ) async throws -> Result? {
        for _ in 0..<Self.checkAttempts {
            let state = try await read()
            guard let checked = try check(state) else { return nil }
            let outcome: Result? = try await run {
                guard try await read() == state else { return nil }
                return try await commit(state, checked)
            }
            if let outcome { return outcome }
        }
        throw ServiceError(
            409, .concurrentWrite, "other writes kept changing what this one depends on; send it again")
    }
}
