import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStorePostgres
import FleetTestSupport
import Foundation
import PosixThreads
import Testing

/// What another role that may connect to fleetset's database can no longer do (issue 34): make
/// every instance flush its caches with a forged notification, or stall every write by taking
/// the write lock's fixed key. And what `check-database` looks at.
@Suite("PostgreSQL: a neighbour on the database")
struct PostgresNeighbourTests {
    /// The key the write lock had before it was drawn per database ("fleets" and 2).
    static let formerFixedKey: Int64 = 0x666c_6565_7473_0002

    /// Whether, within 20 s, one session of `database` holds (`granted`) or waits for the former
    /// fixed key.
    static func formerKey(granted: Bool, in database: String) async throws -> Bool {
        let cluster = try await PostgresCluster.shared()
        for _ in 0..<200 {
            let count = try await cluster.psql(
                """
                SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted = \(granted)
                    AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND objid = \(formerFixedKey & 0xffff_ffff)
                """, database: database)
            if count.trimmingCharacters(in: .whitespacesAndNewlines) == "1" { return true }
            try await Task.sleep(for: .milliseconds(100))
        }
        return false
    }

    @Test("forged notifications cost a read of the feed, nothing more; changes written by an older release's instance are heard")
    func forgedNotifications() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, url: String) async throws in
            let heard = Locked<[StoreChange]>([])
            let listening = LogCapture()
            let cluster = try await PostgresCluster.shared()
            let database = PostgresCluster.databaseName(url)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await second.followChanges(onListening: { listening.append("listening\n") }) { change in
                        heard.withLock { $0.append(change) }
                    }
                }
                _ = try await listening.waitForLine(containing: "listening", timeout: .seconds(20))
                // What any role that may connect can send, in a loop.
                for _ in 0..<20 {
                    try await cluster.psql(
                        #"NOTIFY fleetset_changes, '{"from": "forged", "unknown": true}'; NOTIFY fleetset_changes, '{"from": "forged", "app": "kiosk", "scope": "app"}'"#,
                        database: database)
                }
                // An instance of the release before writes values the old way: only its notification names them.
                try await cluster.psql(
                    """
                    SET application_name = 'fleetset-server'; INSERT INTO scoped_values (app, scope, "values") VALUES ('kiosk', 'group:old', '{"volume": 1}');
                    SELECT pg_notify('fleetset_changes', '{"from": "old-release", "app": "kiosk", "scope": "group:old"}')
                    """, database: database)
                // A real change of a current instance comes after all of them.
                try await first.setValues(["volume": 4], app: "kiosk", scope: .group("lobby"))
                try await Waiting.until(timeout: .seconds(20), "the real change was not heard") {
                    heard.withLock { $0.contains(.values(app: "kiosk", scope: .group("lobby"))) }
                }
                group.cancelAll()
            }
            #expect(
                heard.withLock { $0 } == [
                    .unknown, .values(app: "kiosk", scope: .group("old")), .values(app: "kiosk", scope: .group("lobby")),
                ])
        }
    }

    @Test("the write lock's key is the database's own: a neighbour holding the former fixed key does not stall writes")
    func writeLockKey() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, url: String) async throws in
            #expect(first.writeLockKey == second.writeLockKey, "two instances on one database share the key")
            #expect(first.writeLockKey != Self.formerFixedKey)
            let cluster = try await PostgresCluster.shared()
            let database = PostgresCluster.databaseName(url)
            let neighbour = Task {
                try await cluster.psql("SELECT pg_advisory_lock(\(Self.formerFixedKey)); SELECT pg_sleep(60)", database: database)
            }
            defer { neighbour.cancel() }
            let held = try await Self.formerKey(granted: true, in: database)
            try #require(held, "the neighbour did not take the lock")
            let wrote = try await first.writeLock.withLock {
                try await first.setValues(["volume": 2], app: "kiosk", scope: .app)
                return true
            }
            #expect(wrote)
            let sleeping = try await cluster.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)' AND query LIKE '%pg_sleep(60)%' AND state = 'active' AND pid <> pg_backend_pid()",
                database: database)
            #expect(
                sleeping.trimmingCharacters(in: .whitespacesAndNewlines) == "1", "the write went while the neighbour still held its lock")
            try await cluster.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)' AND query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()",
                database: database)
            _ = try? await neighbour.value
        }
    }

    @Test("during a rolling upgrade, writes wait for an instance of the release before, which locks the former fixed key")
    func olderInstanceStillExcluded() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, _: PostgresStore, url: String) async throws in
            let cluster = try await PostgresCluster.shared()
            let database = PostgresCluster.databaseName(url)
            // An instance of the release before, in the middle of a write.
            let older = Task {
                try await cluster.psql(
                    "SET application_name = 'fleetset-server'; SELECT pg_advisory_lock(\(Self.formerFixedKey)); SELECT pg_sleep(60)",
                    database: database)
            }
            defer { older.cancel() }
            let held = try await Self.formerKey(granted: true, in: database)
            try #require(held, "the older instance did not take its lock")
            let wrote = Locked(false)
            let writing = Task {
                try await first.writeLock.withLock {
                    try await first.setValues(["volume": 2], app: "kiosk", scope: .app)
                    wrote.withLock { $0 = true }
                }
            }
            // It waits on the older instance's lock: still not written while that holds it…
            let blocked = try await Self.formerKey(granted: false, in: database)
            #expect(blocked, "the write did not wait for the former key")
            #expect(!wrote.withLock { $0 })
            // …and goes once the older instance's write ends.
            try await cluster.psql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)' AND application_name = 'fleetset-server'",
                database: database)
            try await writing.value
            #expect(wrote.withLock { $0 })
            _ = try? await older.value
        }
    }

    @Test("history entries an instance of the release before writes are indexed by scope: paged, reverted to, kept by the retention")
    func olderInstanceHistory() async throws {
        try await withTwoPostgresInstances { (store: PostgresStore, _: PostgresStore, url: String) async throws in
            let cluster = try await PostgresCluster.shared()
            let database = PostgresCluster.databaseName(url)
            _ = try await store.commit(HistoryRetentionStoreTests.write(.app, "a", 1, at: 100))
            // The release before inserts the history row alone.
            try await cluster.psql(
                #"INSERT INTO history (app, number, at, actor, message, kind, scopes) VALUES ('kiosk', 2, 200, 'device d-1', '', 'values', '[{"scope": "device:d-1", "patch": {"b": 2}, "after": {"b": 2}}]')"#,
                database: database)
            _ = try await store.commit(HistoryRetentionStoreTests.write(.app, "a", 3, at: 300))
            #expect(try await store.history(app: "kiosk", page: .init(scope: .device("d-1"))).map(\.number) == [2])
            #expect(try await store.historyBase(app: "kiosk", through: 2).values == [.app: ["a": 1], .device("d-1"): ["b": 2]])
            try await store.addDevice(Device(id: "d-1", tokenHash: "h-1", apps: ["kiosk"], groups: [], enrolledAt: 0))
            _ = try await store.commit(HistoryRetentionStoreTests.write(.app, "a", 4, at: 400))
            // Keep 1: the cut is 3; at or before it, the app's base is 3 and device d-1's is 2.
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumCount: 1), now: 500).removed == 1)
            #expect(try await store.history(app: "kiosk").map(\.number) == [2, 3, 4], "entry 2 is device d-1's base")
        }
    }

    @Test("the privileges PUBLIC has on a new database are found; revoked, none are")
    func privileges() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        let database = PostgresCluster.databaseName(url)
        // Read on a connection of its own: the check migrates nothing.
        let (findings, fix) = try await PostgresStore.privileges(at: try PostgresLocation(url: url), logger: storeTestLogger)
        #expect(findings.count == 2 && findings[0].contains("PUBLIC may CONNECT") && findings[1].contains("TEMPORARY"), "\(findings)")
        #expect(fix.hasPrefix("REVOKE CONNECT, TEMPORARY ON DATABASE \(database) FROM PUBLIC;"))
        let migrated = try await cluster.psql("SELECT to_regclass('fleetset_migrations') IS NULL", database: database)
        #expect(migrated.hasPrefix("t"), "check-database made no table")
        try await cluster.psql(fix, database: database)
        try await PostgresStore.with(try PostgresLocation(url: url), logger: storeTestLogger) { store in
            let after = try await store.privileges()
            #expect(after.findings.isEmpty)
        }
    }
}

@Suite("The change feed's cursor: ids that commit out of order")
struct ChangeFeedCursorTests {
    @Test("a later id seen first is taken; the missing one is taken when it commits; one never committed is given up after 10 s")
    func outOfOrder() {
        var cursor = ChangeFeedCursor<ContinuousClock.Instant>(after: 10)
        let start = ContinuousClock.Instant.now
        #expect(cursor.take([11, 13], now: start).new == [11, 13])
        #expect(cursor.floor == 11, "12 is missing: its transaction may still commit")
        #expect(cursor.highest == 13 && cursor.missing == [12], "the next read: after 13, and 12")
        #expect(cursor.take([13], now: start.advanced(by: .seconds(1))).new.isEmpty, "read again, 13 is not new")
        #expect(cursor.take([12, 13, 14], now: start.advanced(by: .seconds(2))).new == [12, 14])
        #expect(cursor.floor == 14 && cursor.missing.isEmpty)
        #expect(cursor.take([16], now: start.advanced(by: .seconds(3))).new == [16])
        #expect(cursor.floor == 14)
        #expect(cursor.take([], now: start.advanced(by: .seconds(12))) == .init(new: [], gaveUp: false))
        #expect(cursor.floor == 14, "15 has waited 9 s")
        #expect(cursor.take([], now: start.advanced(by: .seconds(13))) == .init(new: [], gaveUp: true), "the reader forgets what it kept")
        #expect(cursor.floor == 16, "15 given up on after 10 s")
        #expect(cursor.take([9, 10, 16], now: start.advanced(by: .seconds(14))).new.isEmpty)
    }
}
