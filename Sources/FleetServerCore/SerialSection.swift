/// Runs async operations one at a time, in arrival order: the server's writes go through one
/// section, so a check and the write it guards (the `If-Match` revision, the metadata version,
/// the validation of stored values) can never interleave with another write.
///
/// An actor alone does not give this: it is re-entered at every `await` of the store.
public actor SerialSection {
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init() {}

    /// Runs `operation` once every operation that arrived before it has finished.
    public func run<T: Sendable>(_ operation: @Sendable () async throws -> T) async throws -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer { handOver() }
        return try await operation()
    }

    private func handOver() {
        if waiting.isEmpty {
            busy = false
        } else {
            waiting.removeFirst().resume()  // stays busy: the next one owns the section now
        }
    }
}
