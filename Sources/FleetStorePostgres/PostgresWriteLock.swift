import FleetServerCore
import Logging
import PosixThreads
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
    /// The key instances of the release before lock (`"fleets"` and 2): taken first, as well,
    /// while one of them is connected (a rolling upgrade), so that their writes and this
    /// instance's still go one at a time.
    static let formerKey: Int64 = 0x666c_6565_7473_0002

    let client: PostgresClient
    /// The advisory lock key of writes, this database's own (``PostgresStore/writeLockKey``).
    let key: Int64
    let olderInstances: OlderInstances
    let logger: Logger

    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            if try await olderInstances.areConnected() {
                try await connection.query("SELECT pg_advisory_xact_lock(\(Self.formerKey))", logger: logger)
            }
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

/// Whether instances of the release before this one are connected to the database: their
/// connections' `application_name` is `fleetset-server` alone (this release's add the instance
/// id). Looked up at most every 10 s.
final class OlderInstances: Sendable {
    private let client: PostgresClient
    private let logger: Logger
    private let known = Locked<(connected: Bool, at: ContinuousClock.Instant)?>(nil)
    private let clock = ContinuousClock()

    init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    func areConnected() async throws -> Bool {
        let now = clock.now
        if let known = known.withLock({ $0 }), known.at.duration(to: now) < .seconds(10) { return known.connected }
        let rows = try await client.query(
            """
            SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'fleetset-server')
            """, logger: logger
        ).collect()
        let connected = try rows.first?.decode(Bool.self) ?? false
        known.withLock { $0 = (connected, now) }
        return connected
    }
}
