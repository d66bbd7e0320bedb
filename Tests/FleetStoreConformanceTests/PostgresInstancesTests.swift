import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStorePostgres
import FleetTestSupport
import Foundation
import PosixThreads
import Testing

/// What several instances on one PostgreSQL database rely on, with two stores (two pools) on
/// one real database, as two `fleetset-server` processes have them.
@Suite("PostgreSQL: several instances")
struct PostgresInstancesTests {
    @Test("TLS to the database: verified against the given certificate and the host name; a server it did not sign is refused")
    func tls() async throws {
        let cluster = try await PostgresCluster.shared()
        let database = PostgresCluster.databaseName(try await cluster.makeDatabase())
        let verified = "postgres://fleetset@localhost:\(cluster.port)/\(database)?sslmode=verify-full&sslrootcert=\(cluster.certificate)"
        try await PostgresStore.with(try PostgresLocation(url: verified), logger: storeTestLogger) { store in
            try await store.setValues(["volume": 3], app: "kiosk", scope: .app)
            #expect(try await store.values(app: "kiosk", scope: .app) == ["volume": 3])
            let connections = try await cluster.psql(
                """
                SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
                WHERE a.datname = '\(database)' AND a.application_name LIKE 'fleetset-server %'
                """)
            let counts = connections.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "|")
            #expect(counts.count == 2 && counts[0] == counts[1] && counts[0] != "0", "TLS connections | all: \(connections)")
        }
        let untrusted =
            "postgres://fleetset@localhost:\(cluster.port)/\(database)?sslmode=verify-full&sslrootcert=\(cluster.otherCertificate)"
        await #expect(throws: (any Error).self) {
            try await PostgresStore.with(try PostgresLocation(url: untrusted), logger: storeTestLogger) { store in
                _ = try await store.devices()
            }
        }
    }

    @Test("instances starting at once migrate the database once")
    func concurrentMigrations() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await PostgresStore.with(try PostgresLocation(url: url), logger: storeTestLogger) { store in
                        _ = try await store.devices()
                    }
                }
            }
            try await group.waitForAll()
        }
        let database = PostgresCluster.databaseName(url)
        // One row per migration: each was applied once, by whichever instance got the lock first.
        let applied = try await cluster.psql("SELECT name FROM fleetset_migrations ORDER BY applied_at, name", database: database)
        #expect(applied.split(separator: "\n").map(String.init).sorted() == PostgresStore.migrationNames.sorted())
    }

    @Test(
        "a database the releases before migrated, which recorded PostgreSQL's own version names, has every version: nothing is applied again"
    )
    func namesOfTheReleasesBefore() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        let location = try PostgresLocation(url: url)
        try await PostgresStore.with(location, logger: storeTestLogger) { store in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h-1", apps: ["kiosk"], groups: [], enrolledAt: 0))
        }
        let database = PostgresCluster.databaseName(url)
        // What v0.7.0 recorded: six names, the first standing for StoreSchema's versions 1 and 2.
        let before = [
            "v1: metadata, values, devices, enrollment tokens, revisions, status", "v2: recent status reports",
            "v3: history of writes, rollouts", "v4: device facts, agent policies",
            "v5: history paged and pruned (the scopes each entry wrote, each app's floor); ended console sessions",
            "v6: the change feed as a table, the write lock's key of this database, the history's scopes indexed by a trigger",
        ]
        // v0.7.0 had none of the tables of the versions after it (accounts, v8; one-time values, v9; webhooks, v10;
        // group definitions and the reports' detail, v11).
        _ = try await cluster.psql(
            "DROP TABLE accounts, api_tokens, audit_log, one_time_values, webhook_outbox, webhook_subscriptions, group_definitions; DROP SEQUENCE webhook_outbox_sequence; ALTER TABLE status_reports DROP COLUMN detail; ALTER TABLE status_history DROP COLUMN detail; DELETE FROM fleetset_migrations; INSERT INTO fleetset_migrations (name) VALUES "
                + before.map { "('\($0.replacingOccurrences(of: "'", with: "''"))')" }.joined(separator: ", "), database: database)
        // Applying any version it has again would fail (its tables exist); the store opens and
        // reads, having applied the versions after it.
        try await PostgresStore.with(location, logger: storeTestLogger) { store in
            let ids = try await store.devices().map(\.id)
            #expect(ids == ["d-1"])
            #expect(try await store.accounts().isEmpty)
        }
        let recorded = try await cluster.psql("SELECT name FROM fleetset_migrations", database: database)
        let after = StoreSchema.versions.filter { $0.number > 7 }.map(\.name)
        #expect(recorded.split(separator: "\n").map(String.init).sorted() == (before + after).sorted())
    }

    @Test("20 concurrent enrollments over two instances never spend more than the token's uses")
    func enrollmentsAcrossInstances() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, _: String) async throws in
            try await first.addEnrollmentToken(
                EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 7, apps: ["kiosk"], groups: []))
            let enrolled = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<20 {
                    let store = index.isMultiple(of: 2) ? first : second
                    group.addTask {
                        let attempt = EnrollmentAttempt(tokenHash: "t", requestID: "request-\(index)", now: 1, retryWindow: 100)
                        let outcome = try await store.enroll(attempt, newTokenHash: "h-\(index)") { apps, groups in
                            Device(id: "d-\(index)", tokenHash: "h-\(index)", apps: apps, groups: groups, enrolledAt: 1)
                        }
                        if case .enrolled = outcome { return true }
                        #expect(outcome == .usedUp)
                        return false
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(enrolled == 7)
            #expect(try await second.devices().count == 7)
            #expect(try await first.enrollmentToken(hash: "t")?.usesLeft == 0)
        }
    }

    @Test("a query defined on one instance while the other stores reports of facts: every device ends where its last facts say")
    func groupQueryRacesReports() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, _: String) async throws in
            for index in 0..<40 {
                try await first.addDevice(Device(id: "d-\(index)", tokenHash: "h-\(index)", apps: ["kiosk"], groups: [], enrolledAt: 1))
            }
            let query = GroupDefinition(name: "pi", conditions: [try DeviceInfoFilter(parsing: "machine.arch=aarch64")])
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { _ = try await first.defineGroup(query) }
                for index in 0..<40 {
                    group.addTask {
                        let arch = index.isMultiple(of: 2) ? "aarch64" : "x86_64"
                        _ = try await second.updateDeviceInfo(id: "d-\(index)", at: 2) { _ in ["machine": ["arch": .string(arch)]] }
                    }
                }
                try await group.waitForAll()
            }
            for device in try await first.devices() {
                let index = Int(device.id.dropFirst(2)) ?? -1
                #expect(device.groups == (index.isMultiple(of: 2) ? ["pi"] : []), "\(device.id)")
            }
        }
    }

    @Test("revisions stay monotonic when both instances advance the same device at once")
    func monotonicRevisions() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, _: String) async throws in
            try await first.addDevice(Device(id: "d-1", tokenHash: "h", apps: ["kiosk"], groups: [], enrolledAt: 1))
            // 40 rounds; in each both instances advance to the round's fingerprint together.
            var seen: [Int64] = []
            for round in 1...40 {
                let fingerprint = UInt64(round % 3)  // values changed back and forth: fingerprints repeat
                async let a = first.advanceRevisions([RevisionAdvance(app: "kiosk", deviceID: "d-1", fingerprint: fingerprint)])
                async let b = second.advanceRevisions([RevisionAdvance(app: "kiosk", deviceID: "d-1", fingerprint: fingerprint)])
                let (fromFirst, fromSecond) = try await (a[0], b[0])
                #expect(fromFirst == fromSecond, "round \(round): the two instances made two revisions for one change")
                seen.append(fromFirst.revision)
            }
            #expect(seen == Array(1...40).map(Int64.init), "each change is exactly one new revision, never one going back")
        }
    }

    @Test("a change committed on one instance is heard by the other (not by itself); a rollback sends nothing")
    func changeNotifications() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, _: String) async throws in
            let heardBySecond = Locked<[StoreChange]>([])
            let heardByFirst = Locked<[StoreChange]>([])
            let listening = LogCapture()
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    await second.followChanges(onListening: { listening.append("second\n") }) { change in
                        heardBySecond.withLock { $0.append(change) }
                    }
                }
                group.addTask {
                    await first.followChanges(onListening: { listening.append("first\n") }) { change in
                        heardByFirst.withLock { $0.append(change) }
                    }
                }
                _ = try await listening.waitForLine(containing: "second", timeout: .seconds(20))
                _ = try await listening.waitForLine(containing: "first", timeout: .seconds(20))
                try await first.setValues(["volume": 4], app: "kiosk", scope: .group("lobby"))
                try await first.addDevice(Device(id: "d-1", tokenHash: "h", apps: ["kiosk"], groups: [], enrolledAt: 1))
                _ = try await first.updateDevice(id: "d-1", DeviceChange(disabled: true))
                // A restore into a non-empty store rolls back: its notification must never arrive.
                await #expect(throws: StoreNotEmpty.self) { try await first.restore(StoreSnapshot()) }
                _ = try await first.replaceMetadata(StoredMetadata(app: "kiosk", version: 1, document: "{}"), expectedVersion: nil)
                try await Waiting.until(timeout: .seconds(20), "the metadata change was not heard") {
                    heardBySecond.withLock { $0.contains(.values(app: "kiosk", scope: .defaults)) }
                }
                group.cancelAll()
            }
            #expect(
                heardBySecond.withLock { $0 } == [
                    .unknown, .values(app: "kiosk", scope: .group("lobby")), .device("d-1"), .values(app: "kiosk", scope: .defaults),
                ])
            #expect(heardByFirst.withLock { $0 } == [.unknown], "an instance hears none of its own changes")
        }
    }

    @Test("one write at a time across instances, and a holder whose connection dies releases the lock")
    func writeLock() async throws {
        try await withTwoPostgresInstances { (first: PostgresStore, second: PostgresStore, url: String) async throws in
            let inside = Locked(0)
            let most = Locked(0)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for index in 0..<12 {
                    let lock = (index.isMultiple(of: 2) ? first : second).writeLock
                    group.addTask {
                        try await lock.withLock {
                            let now = inside.withLock {
                                $0 += 1; return $0
                            }
                            most.withLock { $0 = max($0, now) }
                            try await Task.sleep(for: .milliseconds(5))
                            inside.withLock { $0 -= 1 }
                        }
                    }
                }
                try await group.waitForAll()
            }
            #expect(most.withLock { $0 } == 1)

            // The first instance holds the lock and its database connection is killed (as when the
            // instance dies): the second gets the lock.
            let cluster = try await PostgresCluster.shared()
            let database = PostgresCluster.databaseName(url)
            let holding = LogCapture()
            let holder = Task {
                try await first.writeLock.withLock {
                    holding.append("holding\n")
                    try await Task.sleep(for: .seconds(120))
                }
            }
            _ = try await holding.waitForLine(containing: "holding", timeout: .seconds(20))
            let killed = try await cluster.psql(
                """
                SELECT count(pg_terminate_backend(pid)) FROM pg_locks
                WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
                """, database: database)
            #expect(killed == "1\n")
            try await second.writeLock.withLock { holding.append("second\n") }
            #expect(holding.text.hasSuffix("second\n"))
            holder.cancel()
            _ = await holder.result
        }
    }
}
