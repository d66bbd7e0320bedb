import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// ``SettingsStore`` on one SQLite file, through GRDB: WAL mode (readers never wait for the
/// writer), schema migrations applied at open (SQLiteSchema.swift), one transaction per call.
///
/// Writes take turns on the pool's one writer connection: ``write(_:)`` begins a transaction
/// there, runs the script's primitives (``SQLiteTransaction``) on it, and commits, and no other
/// write reaches the connection in between.
public final class SQLiteStore: SettingsStore {
    private let pool: DatabasePool
    private let calls: StoreCalls
    /// One write at a time on the writer connection, a transaction's primitives included.
    private let writer = SerialSection()

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    ///
    /// - Parameters:
    ///   - onStatement: called with the text of every SQL statement run, on the connection's
    ///     thread (for tests that show which requests touch the database).
    ///   - onTransaction: called when a call's transaction ends, with its kind (`read` or
    ///     `write`) and how long the call took, waiting for a connection or the write lock
    ///     included (for the server's metrics).
    public init(
        path: String, onStatement: (@Sendable (String) -> Void)? = nil,
        onTransaction: (@Sendable (_ kind: String, _ duration: Duration) -> Void)? = nil
    ) throws {
        try Self.createOwnerOnly(path)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        // A write transaction spans several calls on the writer connection (one per primitive).
        configuration.allowsUnsafeTransactions = true
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")  // WAL + NORMAL: durable at checkpoint, never corrupt
            if let onStatement { db.trace(options: .statement) { event in onStatement("\(event)") } }
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        self.calls = StoreCalls(onTransaction: onTransaction)
        try Self.migrator.migrate(pool)
    }

    /// Creates the database file readable by its owner only (0600) if it does not exist yet,
    /// whatever the process's umask: it holds `x-secret` values, token hashes and the history.
    /// SQLite gives its `-wal` and `-shm` files the database file's permissions.
    static func createOwnerOnly(_ path: String) throws {
        let descriptor = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0o600)
        if descriptor >= 0 {
            close(descriptor)
        } else if errno != EEXIST {
            throw DatabaseError(resultCode: .SQLITE_CANTOPEN, message: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The SQLite journal mode in use (`wal`).
    public func journalMode() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    // MARK: - Transactions

    /// A write transaction that is on disk when it returns: `synchronous = FULL` for it alone
    /// (WAL with NORMAL, the default here, is durable only at the next checkpoint). Every
    /// transaction script is a write whose success is confirmed to a client.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreTransaction) async throws -> T) async throws -> T {
        try await calls.run("write") {
            // Not cancelled with the caller: a transaction begun on the shared connection always ends.
            try await Task { try await self.writer.run { try await self.transaction(body) } }.value
        }
    }

    private func transaction<T: Sendable>(_ body: @Sendable (any StoreTransaction) async throws -> T) async throws -> T {
        try await pool.writeWithoutTransaction { db in
            // A transaction a failed rollback left open would refuse every later BEGIN: end it.
            if db.isInsideTransaction { try? db.rollback() }
            try db.execute(sql: "PRAGMA synchronous = FULL")
            do {
                try db.beginTransaction(.immediate)
            } catch {
                try? db.execute(sql: "PRAGMA synchronous = NORMAL")
                throw error
            }
        }
        let result: T
        do {
            result = try await body(SQLiteTransaction(pool: pool))
        } catch {
            // The script's error is what the caller hears, whatever the rollback meets.
            try? await pool.writeWithoutTransaction { db in
                defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
                if db.isInsideTransaction { try? db.rollback() }
            }
            throw error
        }
        try await pool.writeWithoutTransaction { db in
            defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
            do {
                try db.commit()
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
        return result
    }

    /// `pool.read` of `body`, run as ``StoreCalls`` runs every call.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await calls.run("read") { try await self.pool.read(body) }
    }

    /// One transaction of the serving path's batched writes (`synchronous = NORMAL`: a report
    /// or a revision lost to a power cut is sent or made again), taking its turn on the writer.
    private func batchWrite<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await calls.run("write") { try await self.writer.run { try await self.pool.write(body) } }
    }

    // MARK: - Metadata

    public func metadata(app: String) async throws -> StoredMetadata? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT version, document FROM metadata WHERE app = ?", arguments: [app]).map { row in
                StoredMetadata(app: app, version: row["version"], document: row["document"])
            }
        }
    }

    public func allMetadata() async throws -> [StoredMetadata] {
        try await read { db in try SQLiteRows.allMetadata(db) }
    }

    // MARK: - Values

    public func values(app: String, scope: Scope) async throws -> JSONObject {
        let text = try await read { db in
            try String.fetchOne(
                db, sql: #"SELECT "values" FROM scoped_values WHERE app = ? AND scope = ?"#, arguments: [app, scope.description])
        }
        guard let text else { return [:] }
        return try StoredText.object(text, what: "values of \(app) at \(scope)")
    }

    public func history(app: String, page: HistoryPage) async throws -> [HistoryEntry] {
        try await read { db in
            // Newest first through the primary key (or the scope's index), then turned around.
            let before = page.before ?? .max
            let limit = page.limit ?? -1  // SQLite: no limit
            let rows =
                if let scope = page.scope {
                    try Row.fetchAll(
                        db,
                        sql: """
                            SELECT h.* FROM history_scopes s JOIN history h ON h.app = s.app AND h.number = s.number
                            WHERE s.app = ? AND s.scope = ? AND s.number < ? ORDER BY s.number DESC LIMIT ?
                            """, arguments: [app, scope.description, before, limit])
                } else {
                    try Row.fetchAll(
                        db, sql: "SELECT * FROM history WHERE app = ? AND number < ? ORDER BY number DESC LIMIT ?",
                        arguments: [app, before, limit])
                }
            return try SQLiteRows.historyEntries(rows.reversed())
        }
    }

    public func historyBase(app: String, through number: Int64) async throws -> HistoryBase {
        try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM history WHERE app = ?1 AND number IN (
                        SELECT max(number) FROM history_scopes WHERE app = ?1 AND number <= ?2 GROUP BY scope)
                    ORDER BY number
                    """, arguments: [app, number])
            return HistoryBase(
                number: number,
                isKept: try Bool.fetchOne(db, sql: "SELECT 1 FROM history WHERE app = ? AND number = ?", arguments: [app, number]) ?? false,
                newest: try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ?", arguments: [app]) ?? 0,
                floor: try Int64.fetchOne(db, sql: "SELECT number FROM history_floor WHERE app = ?", arguments: [app]) ?? 1,
                entries: try SQLiteRows.historyEntries(rows))
        }
    }

    public func rollouts(app: String) async throws -> [Rollout] {
        try await read { db in
            try String.fetchAll(db, sql: "SELECT document FROM rollouts WHERE app = ? ORDER BY started_at DESC, id DESC", arguments: [app])
                .map(Rollout.init(storedText:))
        }
    }

    public func activeRollout(app: String) async throws -> Rollout? {
        try await read { db in
            try String.fetchOne(db, sql: "SELECT document FROM rollouts WHERE app = ? AND active = 1", arguments: [app])
                .map(Rollout.init(storedText:))
        }
    }

    public func activeRollouts() async throws -> [Rollout] {
        try await read { db in
            try String.fetchAll(db, sql: "SELECT document FROM rollouts WHERE active = 1 ORDER BY app").map(Rollout.init(storedText:))
        }
    }

    public func valueLayers(app: String, groups: [String], deviceID: String) async throws -> ValueLayers {
        let wanted = [Scope.app.description, Scope.device(deviceID).description] + groups.map { Scope.group($0).description }
        let placeholders = Array(repeating: "?", count: wanted.count).joined(separator: ", ")
        let (rows, rollout) = try await read { db in
            // The primary key (app, scope) answers this without reading other devices' rows.
            let rows = try Row.fetchAll(
                db, sql: #"SELECT scope, "values" FROM scoped_values WHERE app = ? AND scope IN ("# + placeholders + ")",
                arguments: StatementArguments([app] + wanted)
            )
            .map { ScopeRow(scope: $0["scope"], values: $0["values"]) }
            let rollout = try String.fetchOne(db, sql: "SELECT document FROM rollouts WHERE app = ? AND active = 1", arguments: [app])
            return (rows, rollout)
        }
        var layers = ValueLayers(rollout: try rollout.map(Rollout.init(storedText:)))
        for row in rows {
            let values = try StoredText.object(row.values, what: "values of \(app) at \(row.scope)")
            switch Scope(parameter: row.scope) {
            case .app: layers.app = values
            case .group(let name): layers.groups[name] = values
            case .device: layers.device = values
            case .defaults, nil: throw StoreCorruption(what: "scope \(row.scope) of \(app)")
            }
        }
        return layers
    }

    public func allValues(app: String) async throws -> [Scope: JSONObject] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: #"SELECT scope, "values" FROM scoped_values WHERE app = ?"#, arguments: [app])
                .map { ScopeRow(scope: $0["scope"], values: $0["values"]) }
        }
        var result: [Scope: JSONObject] = [:]
        for row in rows {
            guard let scope = Scope(parameter: row.scope) else { throw StoreCorruption(what: "scope \(row.scope) of \(app)") }
            result[scope] = try StoredText.object(row.values, what: "values of \(app) at \(row.scope)")
        }
        return result
    }

    // MARK: - Devices and enrollment

    public func device(tokenHash: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE token_hash = ? OR pending_token_hash = ?", [tokenHash, tokenHash])
    }

    public func device(id: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE id = ?", [id])
    }

    private func fetchDevice(sql: String, _ arguments: StatementArguments) async throws -> Device? {
        try await read { db in try Row.fetchOne(db, sql: sql, arguments: arguments).map(SQLiteRows.device) }
    }

    public func devices() async throws -> [Device] {
        try await read { db in try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map(SQLiteRows.device) }
    }

    public func touch(_ seen: [DeviceSeen]) async throws -> [Void] {
        try await batchWrite { db in
            try seen.map { device in
                // Cached: prepared once per connection, not once per device of a batch.
                try db.cachedStatement(sql: "UPDATE devices SET last_seen_at = ? WHERE id = ?").execute(arguments: [
                    device.time, device.deviceID,
                ])
            }
        }
    }

    // MARK: - Device facts and agent policies

    public func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM device_info WHERE device_id = ?", arguments: [id]).map(SQLiteRows.storedInfo)
        }
    }

    public func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        try await read { db in try SQLiteRows.allDeviceInfo(db) }
    }

    public func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        try await read { db in try SQLiteRows.agentPolicies(db) }
    }

    public func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM enrollment_tokens WHERE hash = ?", arguments: [hash]).map(SQLiteRows.enrollmentToken)
        }
    }

    public func enrollmentTokens() async throws -> [EnrollmentTokenRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM enrollment_tokens ORDER BY id").map(SQLiteRows.enrollmentToken)
        }
    }

    // MARK: - Revisions and status

    public func revision(app: String, deviceID: String) async throws -> RevisionState? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT revision, fingerprint FROM revisions WHERE app = ? AND device_id = ?", arguments: [app, deviceID]
            )
            .map(SQLiteRows.revisionState)
        }
    }

    public func advanceRevisions(_ advances: [RevisionAdvance]) async throws -> [RevisionState] {
        try await batchWrite { db in try advances.map { try SQLiteRows.advanceRevision($0, db) } }
    }

    public func revisions(app: String) async throws -> [String: RevisionState] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT device_id, revision, fingerprint FROM revisions WHERE app = ?", arguments: [app])
                .map { ($0["device_id"] as String, SQLiteRows.revisionState($0)) }
        }
        return Dictionary(rows, uniquingKeysWith: { first, _ in first })
    }

    public func recordStatuses(_ records: [StatusRecord]) async throws -> [Void] {
        try await batchWrite { db in
            try SQLiteRows.recordStatuses(records, db)
            return records.map { _ in () }
        }
    }

    public func recentStatuses(deviceID: String) async throws -> [StatusRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM status_history WHERE device_id = ? ORDER BY received_at DESC, app, revision DESC, source",
                arguments: [deviceID]
            ).map { row in
                let stored = try SQLiteRows.storedStatus(row)
                return StatusRecord(report: stored.report, app: row["app"], deviceID: deviceID, time: stored.receivedAt)
            }
        }
    }

    public func statusHistory(app: String) async throws -> [StatusRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_history WHERE app = ?", arguments: [app]).map { row in
                let stored = try SQLiteRows.storedStatus(row)
                return StatusRecord(report: stored.report, app: app, deviceID: stored.deviceID, time: stored.receivedAt)
            }
        }
    }

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_reports WHERE app = ? AND device_id = ?", arguments: [app, deviceID])
                .map(SQLiteRows.storedStatus)
        }
        return rows.first.map { ($0.report, $0.receivedAt) }
    }

    public func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_reports WHERE app = ?", arguments: [app]).map(SQLiteRows.storedStatus)
        }
        var result: [String: (report: StatusReport, receivedAt: Int64)] = [:]
        for row in rows { result[row.deviceID] = (row.report, row.receivedAt) }
        return result
    }

    // MARK: - Moving a fleet

    public func snapshot() async throws -> StoreSnapshot {
        try await read { db in
            var snapshot = StoreSnapshot()
            snapshot.metadata = try SQLiteRows.allMetadata(db)
            snapshot.values = try Row.fetchAll(db, sql: #"SELECT app, scope, "values" FROM scoped_values ORDER BY app, scope"#).map { row in
                let app: String = row["app"]
                let scopeText: String = row["scope"]
                guard let scope = Scope(parameter: scopeText) else { throw StoreCorruption(what: "scope \(scopeText) of \(app)") }
                return StoreSnapshot.Values(
                    app: app, scope: scope, values: try StoredText.object(row["values"], what: "values of \(app) at \(scopeText)"))
            }
            snapshot.devices = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map { row in
                StoreSnapshot.EnrolledDevice(
                    device: try SQLiteRows.device(row), enrollmentTokenHash: row["enrollment_token_hash"],
                    enrollmentRequestID: row["enrollment_request_id"])
            }
            snapshot.enrollmentTokens = try Row.fetchAll(db, sql: "SELECT * FROM enrollment_tokens ORDER BY id").map(
                SQLiteRows.enrollmentToken)
            snapshot.revisions = try Row.fetchAll(db, sql: "SELECT * FROM revisions ORDER BY app, device_id").map { row in
                StoreSnapshot.Revision(app: row["app"], deviceID: row["device_id"], state: SQLiteRows.revisionState(row))
            }
            snapshot.reports = try Row.fetchAll(db, sql: "SELECT * FROM status_reports ORDER BY app, device_id").map { row in
                let stored = try SQLiteRows.storedStatus(row)
                return StoreSnapshot.Report(
                    app: row["app"], deviceID: stored.deviceID, report: stored.report, receivedAt: stored.receivedAt)
            }
            snapshot.history = try SQLiteRows.history(db, app: nil)
            for row in try Row.fetchAll(db, sql: "SELECT app, number FROM history_floor") {
                snapshot.historyFloors[row["app"]] = row["number"]
            }
            snapshot.rollouts = try String.fetchAll(db, sql: "SELECT document FROM rollouts ORDER BY id").map(Rollout.init(storedText:))
            snapshot.deviceInfo = try SQLiteRows.allDeviceInfo(db)
            snapshot.policies = try SQLiteRows.agentPolicies(db)
            try SQLiteAccountRows.snapshot(into: &snapshot, db)
            snapshot.webhookSubscriptions = try String.fetchAll(
                db, sql: "SELECT document FROM webhook_subscriptions ORDER BY created_at, id"
            )
            .map(WebhookSubscription.init(storedText:))
            snapshot.outbox = try Row.fetchAll(db, sql: "SELECT * FROM webhook_outbox ORDER BY sequence").map(SQLiteTransaction.outboxEntry)
            snapshot.outboxSequence = try Int64.fetchOne(db, sql: "SELECT last FROM webhook_outbox_counter") ?? 0
            snapshot.groupDefinitions = try SQLiteRows.groupDefinitions(db)
            return snapshot
        }
    }
}
