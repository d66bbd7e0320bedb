import FleetServerCore
import Logging
import PostgresNIO

/// The write lock of all instances on one database: a transaction on a connection of the pool
/// that holds `pg_advisory_xact_lock(key)` while the write runs (its own statements run on other
/// connections, each its own transaction).
///
/// Why an advisory lock rather than SERIALIZABLE with retries: a checked write reads through
/// the service's caches and the store's separate calls, checks (validating every stored value
/// against new metadata can take a while), then writes; no single transaction spans that, so
/// SERIALIZABLE would not see the conflict. The lock gives the same guarantee the in-process
/// ``SerialSection`` gives one instance, across all of them. Being transaction-scoped, it is
/// released by COMMIT or ROLLBACK, and by the server when the connection drops (an instance
/// killed mid-write never leaves it held). Each instance still queues its own writers in its
/// ``SerialSection`` first, so at most one connection per instance waits on the lock.
struct PostgresWriteLock: SharedWriteLock {
    let client: PostgresClient
    /// The advisory lock key of writes, this database's own (``PostgresStore/writeLockKey``).
    let key: Int64
    let logger: Logger

    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            try await connection.query("SELECT pg_advisory_xact_lock(\(key))", logger: logger)
            let outcome: Result<T, any Error>
            do {
                outcome = .success(try await body())
            } catch {
                outcome = .failure(error)
            }
            // The body's writes are committed on their own connections whatever happens here. If
            // the database dropped this connection meanwhile (and with it the lock), there is
            // nothing to end: postgres-nio would wait forever for the answer to a query sent on
            // a closed connection.
            if !connection.isClosed { _ = try? await connection.query("COMMIT", logger: logger) }
            return try outcome.get()
        }
    }
}
