import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import GRDB
import Testing

/// The history and rollout parts of the store contract, against SQLite and PostgreSQL.
@Suite("Store conformance: history and rollouts")
struct HistoryAndRolloutStoreTests {
    static func rollout(id: String = "r-1", app: String = "kiosk", version: Int64 = 1, phase: RolloutPhase = .running) -> Rollout {
        Rollout(
            id: id, app: app, scope: .group("lobby"), patch: ["greeting": "hi", "volume": 7], waves: [.share(basisPoints: 500), .everyone],
            pauseOnErrorsBasisPoints: 200, waveWaitSeconds: 600, phase: phase, waveStartedAt: 1_000, startedAt: 1_000,
            actor: "admin (token 1a2b3c4d)", message: "try the new greeting", version: version)
    }

    @Test(
        "each write gets the app's next revision, with who, when, why and each scope's patch and values",
        arguments: ConformingStore.allCases)
    func historyNumbersAndContent(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            let metadata = ChangeRecord(at: 10, actor: "admin (token aa)", message: "first", kind: .metadata, metadataVersion: 1)
            #expect(
                try await store.replaceMetadata(
                    StoredMetadata(app: "kiosk", version: 1, document: "{}"), expectedVersion: nil, recording: metadata))
            let write = ChangeRecord(
                at: 20, actor: "device d-1", message: "ünïcode — why", kind: .values,
                scopes: [
                    .init(scope: .app, patch: ["a": 1, "b": .null], after: ["a": 1]),
                    .init(scope: .device("d-1"), patch: ["c": ["x": [1, 2]]], after: ["c": ["x": [1, 2]]]),
                ])
            #expect(
                try await store.commit(
                    AppWrite(app: "kiosk", values: [.app: ["a": 1], .device("d-1"): ["c": ["x": [1, 2]]]], change: write)) == 2)
            #expect(try await store.commit(AppWrite(app: "other", values: [.app: ["z": true]], change: write)) == 1)
            #expect(
                try await store.commit(AppWrite(app: "kiosk", values: [.app: [:]], change: ChangeRecord(at: 30, actor: "x", kind: .revert)))
                    == 3)
            let history = try await store.history(app: "kiosk")
            #expect(history.map(\.number) == [1, 2, 3])
            #expect(history[0].change == metadata)
            #expect(history[1].change == write)
            #expect(history[2].change.kind == .revert)
            #expect(try await store.values(app: "kiosk", scope: .app).isEmpty)
            #expect(try await store.values(app: "kiosk", scope: .device("d-1")) == ["c": ["x": [1, 2]]])
            #expect(try await store.history(app: "other").map(\.number) == [1])
            #expect(try await store.history(app: "none").isEmpty)
        }
    }

    @Test(
        "one active rollout per app; a change needs the version before it; inactive ones stay listed", arguments: ConformingStore.allCases)
    func rolloutVersions(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            let change = ChangeRecord(at: 1, actor: "admin", kind: .rollout)
            var rollout = Self.rollout()
            _ = try await store.commit(AppWrite(app: "kiosk", rollout: rollout, change: change))
            #expect(try await store.activeRollout(app: "kiosk") == rollout)
            #expect(try await store.activeRollouts() == [rollout])
            // A second active rollout of the same app is refused, and nothing of that write lands.
            await #expect(throws: RolloutConflict.self) {
                _ = try await store.commit(
                    AppWrite(app: "kiosk", values: [.app: ["a": 1]], rollout: Self.rollout(id: "r-2"), change: change))
            }
            #expect(try await store.values(app: "kiosk", scope: .app).isEmpty)
            #expect(try await store.history(app: "kiosk").count == 1)
            // A stale version is refused; the next one lands.
            rollout.currentWave = 1
            rollout.version = 3
            await #expect(throws: RolloutConflict.self) {
                _ = try await store.commit(AppWrite(app: "kiosk", rollout: rollout, change: change))
            }
            rollout.version = 2
            _ = try await store.commit(AppWrite(app: "kiosk", rollout: rollout, change: change))
            #expect(try await store.activeRollout(app: "kiosk")?.currentWave == 1)
            rollout.end(.completed, at: 2_000, reason: "")
            _ = try await store.commit(
                AppWrite(app: "kiosk", values: [.group("lobby"): ["greeting": "hi"]], rollout: rollout, change: change))
            #expect(try await store.activeRollout(app: "kiosk") == nil)
            #expect(try await store.activeRollouts().isEmpty)
            // Another may start now; both are listed, newest first.
            var next = Self.rollout(id: "r-2")
            next.startedAt = 3_000
            _ = try await store.commit(AppWrite(app: "kiosk", rollout: next, change: change))
            #expect(try await store.rollouts(app: "kiosk").map(\.id) == ["r-2", "r-1"])
            #expect(try await store.rollouts(app: "kiosk").last == rollout)
        }
    }

    @Test("status history of one app: every device's recent reports", arguments: ConformingStore.allCases)
    func statusHistoryOfApp(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            for id in ["d-1", "d-2"] {
                try await store.addDevice(Device(id: id, tokenHash: "h-" + id, apps: ["kiosk", "other"], groups: [], enrolledAt: 0))
            }
            func record(_ device: String, _ app: String, _ revision: Int64, _ source: StatusReport.Source) -> StatusRecord {
                StatusRecord(
                    report: StatusReport(revision: revision, schemaVersion: 1, state: .applied, source: source), app: app, deviceID: device,
                    time: 5)
            }
            _ = try await store.recordStatuses([
                record("d-1", "kiosk", 1, .agent), record("d-1", "kiosk", 1, .app), record("d-1", "kiosk", 2, .agent),
                record("d-2", "kiosk", 4, .agent), record("d-2", "other", 9, .agent),
            ])
            let kiosk = try await store.statusHistory(app: "kiosk")
            #expect(
                Set(kiosk) == [
                    record("d-1", "kiosk", 1, .agent), record("d-1", "kiosk", 1, .app), record("d-1", "kiosk", 2, .agent),
                    record("d-2", "kiosk", 4, .agent),
                ])
            #expect(try await store.statusHistory(app: "other") == [record("d-2", "other", 9, .agent)])
        }
    }

    @Test("history and rollouts move with a snapshot", arguments: ConformingStore.allCases)
    func snapshotCarriesHistory(kind: ConformingStore) async throws {
        var source: StoreSnapshot?
        try await withStore(kind) { (store: any SettingsStore) async throws in
            #expect(try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 1, document: "{}"), expectedVersion: nil))
            _ = try await store.commit(
                AppWrite(
                    app: "kiosk", values: [.app: ["a": 1]], rollout: Self.rollout(),
                    change: ChangeRecord(
                        at: 7, actor: "admin", message: "m", kind: .values, scopes: [.init(scope: .app, patch: ["a": 1], after: ["a": 1])]))
            )
            source = try await store.snapshot()
        }
        let snapshot = try #require(source)
        #expect(snapshot.history.count == 2)
        #expect(snapshot.rollouts == [Self.rollout()])
        for destination in ConformingStore.allCases {
            try await withStore(destination) { (store: any SettingsStore) async throws in
                try await store.restore(snapshot)
                #expect(try await store.snapshot().sorted() == snapshot.sorted())
                // Numbering goes on after the copied entries.
                #expect(try await store.commit(AppWrite(app: "kiosk", change: ChangeRecord(at: 8, actor: "x", kind: .rollout))) == 3)
            }
        }
    }
}

/// A database from before the history: what it stores becomes each app's first entry.
@Suite("Store migration: the history begins with what is stored")
struct HistoryMigrationTests {
    @Test("SQLite: a database at schema v3 gets one initial entry per app, with every scope's values and the metadata version")
    func sqlite() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("fleet.sqlite").path
        do {
            let store = try SQLiteStore(path: path)
            #expect(try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 3, document: "{}"), expectedVersion: nil))
            try await store.setValues(["volume": 3, "greeting": "hi"], app: "kiosk", scope: .app)
            try await store.setValues(["volume": 9], app: "kiosk", scope: .group("lobby"))
        }
        // Back to v3, as a database written by the previous release.
        let pool = try DatabasePool(path: path)
        try await pool.write { db in
            try db.execute(
                sql:
                    "DROP TABLE history; DROP TABLE rollouts; DROP TABLE history_scopes; DROP TABLE history_floor; DROP TABLE ended_console_sessions"
            )
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier LIKE 'v4:%' OR identifier LIKE 'v6:%'")
        }
        try pool.close()
        let upgraded = try SQLiteStore(path: path)
        try await Self.expectInitialEntry(upgraded)
    }

    @Test("PostgreSQL: a database at schema v3 gets one initial entry per app, with every scope's values and the metadata version")
    func postgres() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        let location = try PostgresLocation(url: url)
        try await PostgresStore.with(location, logger: storeTestLogger) { store in
            #expect(try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 3, document: "{}"), expectedVersion: nil))
            try await store.setValues(["volume": 3, "greeting": "hi"], app: "kiosk", scope: .app)
            try await store.setValues(["volume": 9], app: "kiosk", scope: .group("lobby"))
        }
        let database = PostgresCluster.databaseName(url)
        _ = try await cluster.psql(
            "DROP TABLE history; DROP TABLE rollouts; DROP TABLE history_scopes; DROP TABLE history_floor; DROP TABLE ended_console_sessions; DELETE FROM fleetset_migrations WHERE name LIKE 'v4:%' OR name LIKE 'v6:%'",
            database: database)
        try await PostgresStore.with(location, logger: storeTestLogger) { store in try await Self.expectInitialEntry(store) }
    }

    static func expectInitialEntry(_ store: any SettingsStore) async throws {
        let history = try await store.history(app: "kiosk")
        #expect(history.count == 1)
        let entry = try #require(history.first)
        #expect(entry.number == 1 && entry.change.kind == .initial && entry.change.metadataVersion == 3)
        #expect(entry.change.at > 1_700_000_000)
        #expect(
            Dictionary(uniqueKeysWithValues: entry.change.scopes.map { ($0.scope, $0.after) }) == [
                .app: ["volume": 3, "greeting": "hi"], .group("lobby"): ["volume": 9],
            ])
        // A revert to it restores exactly those values, read through the index of scopes the
        // later migration built from the entries already there.
        #expect(AppHistory.values(after: 1, in: history) == [.app: ["volume": 3, "greeting": "hi"], .group("lobby"): ["volume": 9]])
        #expect(
            try await store.historyBase(app: "kiosk", through: 1).values == [
                .app: ["volume": 3, "greeting": "hi"], .group("lobby"): ["volume": 9],
            ])
        #expect(try await store.history(app: "kiosk", page: .init(scope: .group("lobby"))).map(\.number) == [1])
        // The next write is revision 2.
        #expect(try await store.commit(AppWrite(app: "kiosk", change: ChangeRecord(at: 1, actor: "x", kind: .values))) == 2)
    }
}
