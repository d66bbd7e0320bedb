/// How a store runs each call: in a child task of the caller, timed for the server's metrics.
///
/// A task keeps the stack memory its deepest call ever needed for as long as it lives, and
/// database drivers' asynchronous calls are deep: run in the caller's task, a store access made
/// by a device's first request would stay with that connection's task (Hummingbird serves a
/// connection in one) for the connection's life — kilobytes per device of a fleet that holds
/// its connections all day. A child task's memory is freed when the access ends.
public struct StoreCalls: Sendable {
    private let onTransaction: (@Sendable (_ kind: String, _ duration: Duration) -> Void)?

    /// - Parameter onTransaction: called when a call ends, with its kind (`read` or `write`) and
    ///   how long it took, waiting for a connection or lock included.
    public init(onTransaction: (@Sendable (_ kind: String, _ duration: Duration) -> Void)?) {
        self.onTransaction = onTransaction
    }

    /// Runs `call` in a child task, timed as `kind`.
    public func run<T: Sendable>(_ kind: String, _ call: @escaping @Sendable () async throws -> T) async throws -> T {
        async let result = Self.timed(kind, onTransaction, call)
        return try await result
    }

    private static func timed<T: Sendable>(
        _ kind: String, _ onTransaction: (@Sendable (String, Duration) -> Void)?, _ call: @Sendable () async throws -> T
    ) async throws -> T {
        guard let onTransaction else { return try await call() }
        let start = ContinuousClock.now
        defer { onTransaction(kind, start.duration(to: .now)) }
        return try await call()
    }
}
