import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// ``SettingsStore`` on one SQLite file, through GRDB: WAL mode (readers never wait for the
/// writer), schema migrations applied at open, one transaction per call.
public final class SQLiteStore: SettingsStore {
    private let pool: DatabasePool
    private let calls: StoreCalls

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

    /// The schema, one migration per change; never edit a migration that has shipped.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1: metadata, values, devices, tokens, revisions, status") { db in
            try db.execute(
                sql: """
                    CREATE TABLE metadata (app TEXT PRIMARY KEY, version INTEGER NOT NULL, document TEXT NOT NULL);
                    CREATE TABLE scoped_values (app TEXT NOT NULL, scope TEXT NOT NULL, "values" TEXT NOT NULL, PRIMARY KEY (app, scope));
                    CREATE TABLE devices (
                        id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, groups TEXT NOT NULL,
                        enrolled_at INTEGER NOT NULL, last_seen_at INTEGER);
                    CREATE TABLE enrollment_tokens (
                        hash TEXT PRIMARY KEY, expires_at INTEGER NOT NULL, uses_left INTEGER NOT NULL, groups TEXT NOT NULL);
                    CREATE TABLE revisions (
                        app TEXT NOT NULL, device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                        revision INTEGER NOT NULL, fingerprint INTEGER NOT NULL, PRIMARY KEY (app, device_id));
                    CREATE TABLE status_reports (
                        app TEXT NOT NULL, device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
                        revision INTEGER NOT NULL, schema_version INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
                        source TEXT NOT NULL, received_at INTEGER NOT NULL, PRIMARY KEY (app, device_id));
                    """)
        }
        migrator.registerMigration("v2: devices confined to apps, disabled, token rotation, idempotent enrollment; token ids") { db in
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN apps TEXT NOT NULL DEFAULT '[]';
                    ALTER TABLE devices ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE devices ADD COLUMN pending_token_hash TEXT;
                    ALTER TABLE devices ADD COLUMN rotation_requested INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE devices ADD COLUMN enrollment_token_hash TEXT;
                    ALTER TABLE devices ADD COLUMN enrollment_request_id TEXT;
                    CREATE UNIQUE INDEX devices_pending_token ON devices (pending_token_hash);
                    CREATE UNIQUE INDEX devices_enrollment_request ON devices (enrollment_token_hash, enrollment_request_id);
                    ALTER TABLE enrollment_tokens ADD COLUMN id TEXT;
                    ALTER TABLE enrollment_tokens ADD COLUMN apps TEXT NOT NULL DEFAULT '[]';
                    UPDATE enrollment_tokens SET id = 'et-' || substr(hash, 1, 16);
                    -- Devices and tokens from before apps were named keep every app stored now.
                    UPDATE devices SET apps = (SELECT coalesce(json_group_array(app), '[]') FROM (SELECT app FROM metadata ORDER BY app));
                    UPDATE enrollment_tokens SET apps = (SELECT coalesce(json_group_array(app), '[]') FROM (SELECT app FROM metadata ORDER BY app));
                    CREATE UNIQUE INDEX enrollment_tokens_id ON enrollment_tokens (id);
                    """)
        }
        migrator.registerMigration("v3: recent status reports") { db in
            try db.execute(
                sql: """
                    CREATE TABLE status_history (
                        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE, app TEXT NOT NULL, slot INTEGER NOT NULL,
                        revision INTEGER NOT NULL, schema_version INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
                        source TEXT NOT NULL, received_at INTEGER NOT NULL, PRIMARY KEY (device_id, app, slot));
                    """)
        }
        migrator.registerMigration("v4: history of writes, rollouts") { db in
            try db.execute(
                sql: """
                    CREATE TABLE history (
                        app TEXT NOT NULL, number INTEGER NOT NULL, at INTEGER NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
                        kind TEXT NOT NULL, scopes TEXT NOT NULL, metadata_version INTEGER, PRIMARY KEY (app, number));
                    CREATE TABLE rollouts (
                        id TEXT PRIMARY KEY, app TEXT NOT NULL, active INTEGER NOT NULL, version INTEGER NOT NULL,
                        started_at INTEGER NOT NULL, document TEXT NOT NULL);
                    CREATE UNIQUE INDEX rollouts_active ON rollouts (app) WHERE active = 1;
                    CREATE INDEX rollouts_app ON rollouts (app, started_at);
                    """)
            // What is stored now becomes each app's first entry, so that a revert can go back to it.
            let now = try Int64.fetchOne(db, sql: "SELECT CAST(strftime('%s', 'now') AS INTEGER)") ?? 0
            for metadata in try Self.allMetadata(db) {
                let scopes = try Row.fetchAll(
                    db, sql: #"SELECT scope, "values" FROM scoped_values WHERE app = ? ORDER BY scope"#, arguments: [metadata.app]
                ).map { row -> ChangeRecord.ScopeChange in
                    let scopeText: String = row["scope"]
                    guard let scope = Scope(parameter: scopeText) else {
                        throw StoreCorruption(what: "scope \(scopeText) of \(metadata.app)")
                    }
                    let values = try StoredText.object(row["values"], what: "values of \(metadata.app) at \(scopeText)")
                    return ChangeRecord.ScopeChange(scope: scope, patch: values, after: values)
                }
                // The history row alone: the tables of later migrations (history_scopes) are not there yet.
                try Self.insertRow(
                    HistoryEntry(
                        app: metadata.app, number: 1,
                        change: ChangeRecord(
                            at: now, actor: "server", message: "what was stored when the history began", kind: .initial, scopes: scopes,
                            metadataVersion: metadata.version)), db)
            }
        }
        migrator.registerMigration("v5: device facts, agent policies") { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_info (
                        device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE, info TEXT NOT NULL,
                        updated_at INTEGER NOT NULL);
                    CREATE TABLE agent_policies (scope TEXT PRIMARY KEY, policy TEXT NOT NULL);
                    """)
        }
        migrator.registerMigration("v6: history paged and pruned (the scopes each entry wrote, each app's floor); ended console sessions") {
            db in
            try db.execute(
                sql: """
                    CREATE TABLE history_scopes (
                        app TEXT NOT NULL, scope TEXT NOT NULL, number INTEGER NOT NULL, PRIMARY KEY (app, scope, number));
                    CREATE INDEX history_scopes_number ON history_scopes (app, number);
                    INSERT OR IGNORE INTO history_scopes (app, scope, number)
                        SELECT h.app, json_extract(j.value, '$.scope'), h.number FROM history h, json_each(h.scopes) j;
                    CREATE INDEX history_at ON history (app, at);
                    CREATE TABLE history_floor (app TEXT PRIMARY KEY, number INTEGER NOT NULL);
                    CREATE TABLE ended_console_sessions (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL);
                    """)
        }
        return migrator
    }

    /// The SQLite journal mode in use (`wal`).
    public func journalMode() async throws -> String {
        try await read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
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
        try await read { db in try Self.allMetadata(db) }
    }

    private static func allMetadata(_ db: Database) throws -> [StoredMetadata] {
        try Row.fetchAll(db, sql: "SELECT app, version, document FROM metadata ORDER BY app").map { row in
            StoredMetadata(app: row["app"], version: row["version"], document: row["document"])
        }
    }

    public func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?, recording change: ChangeRecord) async throws -> Bool {
        try await durableWrite { db in
            let current = try Int.fetchOne(db, sql: "SELECT version FROM metadata WHERE app = ?", arguments: [metadata.app])
            guard current == expectedVersion else { return false }
            try db.execute(
                sql: "INSERT OR REPLACE INTO metadata (app, version, document) VALUES (?, ?, ?)",
                arguments: [metadata.app, metadata.version, metadata.document])
            _ = try Self.append(change, app: metadata.app, db)
            return true
        }
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

    public func commit(_ write: AppWrite) async throws -> Int64 {
        try await durableWrite { db in
            if let rollout = write.rollout { try Self.save(rollout, db) }
            for (scope, values) in write.values {
                if values.isEmpty {
                    try db.execute(sql: "DELETE FROM scoped_values WHERE app = ? AND scope = ?", arguments: [write.app, scope.description])
                } else {
                    try db.execute(
                        sql: #"INSERT OR REPLACE INTO scoped_values (app, scope, "values") VALUES (?, ?, ?)"#,
                        arguments: [write.app, scope.description, JSONValue.object(values).serialized()])
                }
            }
            return try Self.append(write.change, app: write.app, db)
        }
    }

    /// Appends `change` to the app's history as its next number.
    private static func append(_ change: ChangeRecord, app: String, _ db: Database) throws -> Int64 {
        let number = (try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ?", arguments: [app]) ?? 0) + 1
        try insert(HistoryEntry(app: app, number: number, change: change), db)
        return number
    }

    private static func insert(_ entry: HistoryEntry, _ db: Database) throws {
        try insertRow(entry, db)
        for scope in Set(entry.change.scopes.map(\.scope.description)) {
            try db.execute(
                sql: "INSERT INTO history_scopes (app, scope, number) VALUES (?, ?, ?)", arguments: [entry.app, scope, entry.number])
        }
    }

    /// The entry's row in `history` (without the index of its scopes).
    private static func insertRow(_ entry: HistoryEntry, _ db: Database) throws {
        let change = entry.change
        try db.execute(
            sql: "INSERT INTO history (app, number, at, actor, message, kind, scopes, metadata_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                entry.app, entry.number, change.at, change.actor, change.message, change.kind.rawValue, change.scopesText,
                change.metadataVersion,
            ])
    }

    /// Inserts a new rollout or replaces the version before it.
    private static func save(_ rollout: Rollout, _ db: Database) throws {
        let document = rollout.storedJSON.serialized()
        if rollout.version == 1 {
            let active =
                try Int.fetchOne(db, sql: "SELECT count(*) FROM rollouts WHERE app = ? AND active = 1", arguments: [rollout.app]) ?? 0
            guard active == 0 else { throw RolloutConflict(app: rollout.app) }
            try insert(rollout, db)
        } else {
            try db.execute(
                sql: "UPDATE rollouts SET active = ?, version = ?, document = ? WHERE id = ? AND version = ?",
                arguments: [rollout.phase.isActive, rollout.version, document, rollout.id, rollout.version - 1])
            guard db.changesCount == 1 else { throw RolloutConflict(app: rollout.app) }
        }
    }

    private static func insert(_ rollout: Rollout, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO rollouts (id, app, active, version, started_at, document) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [
                rollout.id, rollout.app, rollout.phase.isActive, rollout.version, rollout.startedAt, rollout.storedJSON.serialized(),
            ])
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
            return try Self.historyEntries(rows.reversed())
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
                entries: try Self.historyEntries(rows))
        }
    }

    public func endConsoleSession(id: String, expiresAt: Int64, now: Int64) async throws {
        try await durableWrite { db in
            try db.execute(sql: "DELETE FROM ended_console_sessions WHERE expires_at <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT OR REPLACE INTO ended_console_sessions (id, expires_at) VALUES (?, ?)", arguments: [id, expiresAt])
        }
    }

    public func isConsoleSessionEnded(id: String) async throws -> Bool {
        try await read { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM ended_console_sessions WHERE id = ?", arguments: [id]) ?? false }
    }

    public func pruneHistory(app: String, keeping retention: HistoryRetention, now: Int64) async throws -> HistoryPruning {
        try await durableWrite { db in
            let newest = try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ?", arguments: [app]) ?? 0
            let floor = try Int64.fetchOne(db, sql: "SELECT number FROM history_floor WHERE app = ?", arguments: [app]) ?? 0
            let oldEnough = try retention.maximumAge.flatMap { age in
                try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ? AND at < ?", arguments: [app, now - age])
            }
            guard let (cut, finished) = retention.cut(newest: newest, newestOlderThanAge: oldEnough, floor: floor) else {
                return HistoryPruning(removed: 0, finished: true)
            }
            // Kept at or before the cut: each scope's newest entry, but none for a deleted device.
            try db.execute(
                sql: """
                    DELETE FROM history_scopes WHERE app = ?1 AND number <= ?2 AND number NOT IN (
                        SELECT max(number) FROM history_scopes WHERE app = ?1 AND number <= ?2
                            AND (scope NOT LIKE 'device:%' OR substr(scope, 8) IN (SELECT id FROM devices))
                        GROUP BY scope)
                    """, arguments: [app, cut])
            try db.execute(
                sql: """
                    DELETE FROM history WHERE app = ?1 AND number <= ?2
                        AND number NOT IN (SELECT number FROM history_scopes WHERE app = ?1 AND number <= ?2)
                    """, arguments: [app, cut])
            let removed = db.changesCount
            try db.execute(
                sql: """
                    INSERT INTO history_floor (app, number) VALUES (?, ?)
                    ON CONFLICT (app) DO UPDATE SET number = max(number, excluded.number)
                    """, arguments: [app, cut])
            return HistoryPruning(removed: removed, finished: finished)
        }
    }

    private static func history(_ db: Database, app: String?) throws -> [HistoryEntry] {
        let rows =
            if let app {
                try Row.fetchAll(db, sql: "SELECT * FROM history WHERE app = ? ORDER BY number", arguments: [app])
            } else {
                try Row.fetchAll(db, sql: "SELECT * FROM history ORDER BY app, number")
            }
        return try historyEntries(rows)
    }

    private static func historyEntries(_ rows: some Sequence<Row>) throws -> [HistoryEntry] {
        try rows.map { row in
            let app: String = row["app"]
            let number: Int64 = row["number"]
            let what = "history entry \(number) of \(app)"
            guard let kind = ChangeRecord.Kind(rawValue: row["kind"]) else { throw StoreCorruption(what: what) }
            return HistoryEntry(
                app: app, number: number,
                change: ChangeRecord(
                    at: row["at"], actor: row["actor"], message: row["message"], kind: kind,
                    scopes: try ChangeRecord.scopes(row["scopes"], what: what), metadataVersion: row["metadata_version"]))
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

    public func addDevice(_ device: Device) async throws {
        try await write { db in try Self.insert(device, db) }
    }

    private static func insert(_ device: Device, _ db: Database, enrolledWith attempt: EnrollmentAttempt? = nil) throws {
        try db.execute(
            sql: """
                INSERT INTO devices (id, token_hash, apps, groups, enrolled_at, last_seen_at, disabled, pending_token_hash,
                    rotation_requested, enrollment_token_hash, enrollment_request_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                device.id, device.tokenHash, StoredText.text(device.apps), StoredText.text(device.groups), device.enrolledAt,
                device.lastSeenAt, device.disabled,
                device.pendingTokenHash, device.rotationRequested, attempt?.tokenHash, attempt?.requestID,
            ])
    }

    public func device(tokenHash: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE token_hash = ? OR pending_token_hash = ?", [tokenHash, tokenHash])
    }

    public func device(id: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE id = ?", [id])
    }

    private func fetchDevice(sql: String, _ arguments: StatementArguments) async throws -> Device? {
        try await read { db in try Row.fetchOne(db, sql: sql, arguments: arguments).map(Self.device) }
    }

    public func devices() async throws -> [Device] {
        try await read { db in try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map(Self.device) }
    }

    public func touch(deviceID: String, at time: Int64) async throws {
        _ = try await touch([DeviceSeen(deviceID: deviceID, time: time)])
    }

    public func touch(_ seen: [DeviceSeen]) async throws -> [Void] {
        try await write { db in
            try seen.map { device in
                // Cached: prepared once per connection, not once per device of a batch.
                try db.cachedStatement(sql: "UPDATE devices SET last_seen_at = ? WHERE id = ?").execute(arguments: [
                    device.time, device.deviceID,
                ])
            }
        }
    }

    public func updateDevice(id: String, _ change: DeviceChange) async throws -> Device? {
        try await durableWrite { db in
            guard var device = try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE id = ?", arguments: [id]).map(Self.device) else {
                return nil
            }
            if let apps = change.apps { device.apps = apps }
            if let groups = change.groups { device.groups = groups }
            if let disabled = change.disabled { device.disabled = disabled }
            if let requested = change.rotationRequested { device.rotationRequested = requested }
            try db.execute(
                sql: "UPDATE devices SET apps = ?, groups = ?, disabled = ?, rotation_requested = ? WHERE id = ?",
                arguments: [StoredText.text(device.apps), StoredText.text(device.groups), device.disabled, device.rotationRequested, id])
            return device
        }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await durableWrite { db in
            try db.execute(sql: "DELETE FROM revisions WHERE device_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM status_reports WHERE device_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM status_history WHERE device_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM scoped_values WHERE scope = ?", arguments: [Scope.device(id).description])
            try db.execute(sql: "DELETE FROM device_info WHERE device_id = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM agent_policies WHERE scope = ?", arguments: [PolicyScope.device(id).description])
            try db.execute(sql: "DELETE FROM devices WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    // MARK: - Device facts and agent policies

    public func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM device_info WHERE device_id = ?", arguments: [id]).map(Self.storedInfo)
        }
    }

    public func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        try await read { db in try Self.allDeviceInfo(db) }
    }

    private static func allDeviceInfo(_ db: Database) throws -> [String: StoredDeviceInfo] {
        var all: [String: StoredDeviceInfo] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM device_info") { all[row["device_id"]] = try storedInfo(row) }
        return all
    }

    private static func storedInfo(_ row: Row) throws -> StoredDeviceInfo {
        let id: String = row["device_id"]
        return StoredDeviceInfo(info: try StoredText.object(row["info"], what: "facts of device \(id)"), updatedAt: row["updated_at"])
    }

    public func updateDeviceInfo(
        id: String, at time: Int64, _ update: @escaping @Sendable (JSONObject) throws -> JSONObject
    ) async throws -> JSONObject? {
        try await durableWrite { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM devices WHERE id = ?", arguments: [id]) != nil else { return nil }
            let before = try Row.fetchOne(db, sql: "SELECT * FROM device_info WHERE device_id = ?", arguments: [id]).map(Self.storedInfo)
            let after = try update(before?.info ?? [:])
            guard after != before?.info else { return after }
            try db.execute(
                sql: """
                    INSERT INTO device_info (device_id, info, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET info = excluded.info, updated_at = excluded.updated_at
                    """,
                arguments: [id, JSONValue.object(after).serialized(), time])
            return after
        }
    }

    public func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        try await read { db in try Self.agentPolicies(db) }
    }

    private static func agentPolicies(_ db: Database) throws -> [PolicyScope: AgentPolicy] {
        var policies: [PolicyScope: AgentPolicy] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT scope, policy FROM agent_policies") {
            let text: String = row["scope"]
            guard let scope = PolicyScope(text), let policy = try? AgentPolicy(json: .object(StoredText.object(row["policy"], what: text)))
            else { throw StoreCorruption(what: "agent policy at \(text)") }
            policies[scope] = policy
        }
        return policies
    }

    public func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        try await durableWrite { db in try Self.setAgentPolicy(policy, scope: scope, db) }
    }

    private static func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope, _ db: Database) throws {
        guard !policy.isEmpty else {
            try db.execute(sql: "DELETE FROM agent_policies WHERE scope = ?", arguments: [scope.description])
            return
        }
        try db.execute(
            sql: "INSERT INTO agent_policies (scope, policy) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy",
            arguments: [scope.description, policy.json.serialized()])
    }

    public func setPendingToken(deviceID: String, hash: String) async throws {
        try await durableWrite { db in
            try db.execute(sql: "UPDATE devices SET pending_token_hash = ? WHERE id = ?", arguments: [hash, deviceID])
        }
    }

    public func promotePendingToken(deviceID: String, hash: String) async throws -> Device? {
        try await durableWrite { db in
            try db.execute(
                sql: """
                    UPDATE devices SET token_hash = pending_token_hash, pending_token_hash = NULL, rotation_requested = 0
                    WHERE id = ? AND pending_token_hash = ?
                    """,
                arguments: [deviceID, hash])
            return try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE id = ?", arguments: [deviceID]).map(Self.device)
        }
    }

    public func addEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try await durableWrite { db in
            try db.execute(
                sql: "INSERT INTO enrollment_tokens (hash, id, expires_at, uses_left, apps, groups) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [
                    token.hash, token.id, token.expiresAt, token.usesLeft, StoredText.text(token.apps), StoredText.text(token.groups),
                ])
        }
    }

    public func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM enrollment_tokens WHERE hash = ?", arguments: [hash]).map(Self.enrollmentToken)
        }
    }

    public func enrollmentTokens() async throws -> [EnrollmentTokenRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM enrollment_tokens ORDER BY id").map(Self.enrollmentToken)
        }
    }

    public func deleteEnrollmentToken(id: String) async throws -> Bool {
        try await durableWrite { db in
            try db.execute(sql: "DELETE FROM enrollment_tokens WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    public func enroll(
        _ attempt: EnrollmentAttempt, newTokenHash: String, makeDevice: @escaping @Sendable (_ apps: [String], _ groups: [String]) -> Device
    ) async throws -> EnrollmentOutcome {
        try await durableWrite { db -> EnrollmentOutcome in
            guard
                let token = try Row.fetchOne(db, sql: "SELECT * FROM enrollment_tokens WHERE hash = ?", arguments: [attempt.tokenHash])
                    .map(Self.enrollmentToken)
            else { return .unknown }
            // A retry of an enrollment whose answer was lost: the same device, with a new token.
            if let earlier = try Row.fetchOne(
                db,
                sql: """
                    SELECT * FROM devices WHERE enrollment_token_hash = ? AND enrollment_request_id = ? AND enrolled_at >= ? AND disabled = 0
                    """,
                arguments: [attempt.tokenHash, attempt.requestID, attempt.now - attempt.retryWindow]
            ).map(Self.device) {
                try db.execute(
                    sql: "UPDATE devices SET token_hash = ?, pending_token_hash = NULL WHERE id = ?", arguments: [newTokenHash, earlier.id])
                var device = earlier
                device.tokenHash = newTokenHash
                device.pendingTokenHash = nil
                return .enrolled(device)
            }
            guard token.expiresAt > attempt.now else { return .expired }
            guard token.usesLeft > 0 else { return .usedUp }
            try db.execute(sql: "UPDATE enrollment_tokens SET uses_left = uses_left - 1 WHERE hash = ?", arguments: [attempt.tokenHash])
            let device = makeDevice(token.apps, token.groups)
            try Self.insert(device, db, enrolledWith: attempt)
            return .enrolled(device)
        }
    }

    /// A write transaction that is on disk when it returns: `synchronous = FULL` for it alone
    /// (WAL with NORMAL, the default here, is durable only at the next checkpoint). For every
    /// write whose success is confirmed to a client: enrollment, device and admin writes.
    private func durableWrite<T: Sendable>(_ updates: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await calls.run("write") {
            try await self.pool.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = FULL")
                defer { try? db.execute(sql: "PRAGMA synchronous = NORMAL") }
                var result: T?
                try db.inTransaction(.immediate) {
                    result = try updates(db)
                    return .commit
                }
                return result!
            }
        }
    }

    /// `pool.read` of `body`, run as ``StoreCalls`` runs every call.
    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await calls.run("read") { try await self.pool.read(body) }
    }

    /// `pool.write` of `body` (one transaction), run as ``StoreCalls`` runs every call.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await calls.run("write") { try await self.pool.write(body) }
    }

    // MARK: - Revisions and status

    public func revision(app: String, deviceID: String) async throws -> RevisionState? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT revision, fingerprint FROM revisions WHERE app = ? AND device_id = ?", arguments: [app, deviceID]
            )
            .map(Self.revisionState)
        }
    }

    public func advanceRevision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState {
        if let current = try await revision(app: app, deviceID: deviceID), current.fingerprint == fingerprint {
            return current  // the common case: nothing changed, no write transaction
        }
        return try await write { db in
            try Self.advanceRevision(db, RevisionAdvance(app: app, deviceID: deviceID, fingerprint: fingerprint))
        }
    }

    public func advanceRevisions(_ advances: [RevisionAdvance]) async throws -> [RevisionState] {
        try await write { db in try advances.map { try Self.advanceRevision(db, $0) } }
    }

    private static func advanceRevision(_ db: Database, _ advance: RevisionAdvance) throws -> RevisionState {
        let current = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT revision, fingerprint FROM revisions WHERE app = ? AND device_id = ?"),
            arguments: [advance.app, advance.deviceID]
        ).map(Self.revisionState)
        let next = RevisionState.next(after: current, fingerprint: advance.fingerprint)
        if next != current {
            try db.cachedStatement(sql: "INSERT OR REPLACE INTO revisions (app, device_id, revision, fingerprint) VALUES (?, ?, ?, ?)")
                .execute(arguments: [advance.app, advance.deviceID, next.revision, Int64(bitPattern: next.fingerprint)])
        }
        return next
    }

    public func revisions(app: String) async throws -> [String: RevisionState] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT device_id, revision, fingerprint FROM revisions WHERE app = ?", arguments: [app])
                .map { ($0["device_id"] as String, Self.revisionState($0)) }
        }
        return Dictionary(rows, uniquingKeysWith: { first, _ in first })
    }

    private static func revisionState(_ row: Row) -> RevisionState {
        RevisionState(revision: row["revision"], fingerprint: UInt64(bitPattern: row["fingerprint"] as Int64))
    }

    public func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws {
        _ = try await recordStatuses([StatusRecord(report: report, app: app, deviceID: deviceID, time: time)])
    }

    public func recordStatuses(_ records: [StatusRecord]) async throws -> [Void] {
        try await write { db in try Self.recordStatuses(records, db) }
    }

    private static func recordStatuses(_ records: [StatusRecord], _ db: Database) throws -> [Void] {
        try records.map { record in
            let report = record.report
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO status_reports
                    (app, device_id, revision, schema_version, state, message, source, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    record.app, record.deviceID, report.revision, report.schemaVersion, report.state.rawValue, report.message,
                    report.source.rawValue, record.time,
                ])
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO status_history
                    (device_id, app, slot, revision, schema_version, state, message, source, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    record.deviceID, record.app, StatusHistory.slot(of: report), report.revision, report.schemaVersion,
                    report.state.rawValue, report.message, report.source.rawValue, record.time,
                ])
        }
    }

    public func recentStatuses(deviceID: String) async throws -> [StatusRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM status_history WHERE device_id = ? ORDER BY received_at DESC, app, revision DESC, source",
                arguments: [deviceID]
            ).map { row in
                let stored = try Self.storedStatus(row)
                return StatusRecord(report: stored.report, app: row["app"], deviceID: deviceID, time: stored.receivedAt)
            }
        }
    }

    public func statusHistory(app: String) async throws -> [StatusRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_history WHERE app = ?", arguments: [app]).map { row in
                let stored = try Self.storedStatus(row)
                return StatusRecord(report: stored.report, app: app, deviceID: stored.deviceID, time: stored.receivedAt)
            }
        }
    }

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_reports WHERE app = ? AND device_id = ?", arguments: [app, deviceID])
                .map(Self.storedStatus)
        }
        return rows.first.map { ($0.report, $0.receivedAt) }
    }

    public func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)] {
        let rows = try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM status_reports WHERE app = ?", arguments: [app]).map(Self.storedStatus)
        }
        var result: [String: (report: StatusReport, receivedAt: Int64)] = [:]
        for row in rows { result[row.deviceID] = (row.report, row.receivedAt) }
        return result
    }

    private static func storedStatus(_ row: Row) throws -> StoredStatus {
        let deviceID: String = row["device_id"]
        let app: String = row["app"]
        guard let state = StatusReport.State(rawValue: row["state"]), let source = StatusReport.Source(rawValue: row["source"]) else {
            throw StoreCorruption(what: "status report of \(deviceID) for \(app)")
        }
        let report = StatusReport(
            revision: row["revision"], schemaVersion: row["schema_version"], state: state, message: row["message"], source: source)
        return StoredStatus(deviceID: deviceID, report: report, receivedAt: row["received_at"])
    }

    // MARK: - Moving a fleet

    public func snapshot() async throws -> StoreSnapshot {
        try await read { db in
            var snapshot = StoreSnapshot()
            snapshot.metadata = try Self.allMetadata(db)
            snapshot.values = try Row.fetchAll(db, sql: #"SELECT app, scope, "values" FROM scoped_values ORDER BY app, scope"#).map { row in
                let app: String = row["app"]
                let scopeText: String = row["scope"]
                guard let scope = Scope(parameter: scopeText) else { throw StoreCorruption(what: "scope \(scopeText) of \(app)") }
                return StoreSnapshot.Values(
                    app: app, scope: scope, values: try StoredText.object(row["values"], what: "values of \(app) at \(scopeText)"))
            }
            snapshot.devices = try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map { row in
                StoreSnapshot.EnrolledDevice(
                    device: try Self.device(row), enrollmentTokenHash: row["enrollment_token_hash"],
                    enrollmentRequestID: row["enrollment_request_id"])
            }
            snapshot.enrollmentTokens = try Row.fetchAll(db, sql: "SELECT * FROM enrollment_tokens ORDER BY id").map(Self.enrollmentToken)
            snapshot.revisions = try Row.fetchAll(db, sql: "SELECT * FROM revisions ORDER BY app, device_id").map { row in
                StoreSnapshot.Revision(app: row["app"], deviceID: row["device_id"], state: Self.revisionState(row))
            }
            snapshot.reports = try Row.fetchAll(db, sql: "SELECT * FROM status_reports ORDER BY app, device_id").map { row in
                let stored = try Self.storedStatus(row)
                return StoreSnapshot.Report(
                    app: row["app"], deviceID: stored.deviceID, report: stored.report, receivedAt: stored.receivedAt)
            }
            snapshot.history = try Self.history(db, app: nil)
            for row in try Row.fetchAll(db, sql: "SELECT app, number FROM history_floor") {
                snapshot.historyFloors[row["app"]] = row["number"]
            }
            snapshot.rollouts = try String.fetchAll(db, sql: "SELECT document FROM rollouts ORDER BY id").map(Rollout.init(storedText:))
            snapshot.deviceInfo = try Self.allDeviceInfo(db)
            snapshot.policies = try Self.agentPolicies(db)
            return snapshot
        }
    }

    public func restore(_ snapshot: StoreSnapshot) async throws {
        try await durableWrite { db in
            for (table, what) in [
                ("metadata", "metadata"), ("scoped_values", "values"), ("devices", "devices"), ("enrollment_tokens", "enrollment tokens"),
                ("agent_policies", "agent policies"),
            ] {
                let count = try Int.fetchOne(db, sql: "SELECT count(*) FROM \(table)") ?? 0
                if count > 0 { throw StoreNotEmpty(holds: "\(count) \(what)") }
            }
            for metadata in snapshot.metadata {
                try db.execute(
                    sql: "INSERT INTO metadata (app, version, document) VALUES (?, ?, ?)",
                    arguments: [metadata.app, metadata.version, metadata.document])
            }
            for entry in snapshot.values {
                try db.execute(
                    sql: #"INSERT INTO scoped_values (app, scope, "values") VALUES (?, ?, ?)"#,
                    arguments: [entry.app, entry.scope.description, JSONValue.object(entry.values).serialized()])
            }
            for entry in snapshot.devices {
                try Self.insert(entry.device, db)
                try db.execute(
                    sql: "UPDATE devices SET enrollment_token_hash = ?, enrollment_request_id = ? WHERE id = ?",
                    arguments: [entry.enrollmentTokenHash, entry.enrollmentRequestID, entry.device.id])
            }
            for token in snapshot.enrollmentTokens {
                try db.execute(
                    sql: "INSERT INTO enrollment_tokens (hash, id, expires_at, uses_left, apps, groups) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [
                        token.hash, token.id, token.expiresAt, token.usesLeft, StoredText.text(token.apps), StoredText.text(token.groups),
                    ])
            }
            for entry in snapshot.revisions {
                try db.execute(
                    sql: "INSERT INTO revisions (app, device_id, revision, fingerprint) VALUES (?, ?, ?, ?)",
                    arguments: [entry.app, entry.deviceID, entry.state.revision, Int64(bitPattern: entry.state.fingerprint)])
            }
            _ = try Self.recordStatuses(
                snapshot.reports.map { StatusRecord(report: $0.report, app: $0.app, deviceID: $0.deviceID, time: $0.receivedAt) }, db)
            for entry in snapshot.history { try Self.insert(entry, db) }
            for (app, floor) in snapshot.historyFloors {
                try db.execute(sql: "INSERT INTO history_floor (app, number) VALUES (?, ?)", arguments: [app, floor])
            }
            for rollout in snapshot.rollouts { try Self.insert(rollout, db) }
            for (id, stored) in snapshot.deviceInfo {
                try db.execute(
                    sql: "INSERT INTO device_info (device_id, info, updated_at) VALUES (?, ?, ?)",
                    arguments: [id, JSONValue.object(stored.info).serialized(), stored.updatedAt])
            }
            for (scope, policy) in snapshot.policies { try Self.setAgentPolicy(policy, scope: scope, db) }
        }
    }

    // MARK: - Encoding

    private static func device(_ row: Row) throws -> Device {
        let id: String = row["id"]
        return Device(
            id: id, tokenHash: row["token_hash"], apps: try StoredText.strings(row["apps"], what: "apps of device \(id)"),
            groups: try StoredText.strings(row["groups"], what: "groups of device \(id)"), enrolledAt: row["enrolled_at"],
            lastSeenAt: row["last_seen_at"], disabled: row["disabled"], pendingTokenHash: row["pending_token_hash"],
            rotationRequested: row["rotation_requested"])
    }

    private static func enrollmentToken(_ row: Row) throws -> EnrollmentTokenRecord {
        let id: String = row["id"]
        return EnrollmentTokenRecord(
            hash: row["hash"], id: id, expiresAt: row["expires_at"], usesLeft: row["uses_left"],
            apps: try StoredText.strings(row["apps"], what: "apps of enrollment token \(id)"),
            groups: try StoredText.strings(row["groups"], what: "groups of enrollment token \(id)"))
    }
}

private struct StoredStatus: Sendable {
    var deviceID: String
    var report: StatusReport
    var receivedAt: Int64
}

private struct ScopeRow: Sendable {
    var scope: String
    var values: String
}
