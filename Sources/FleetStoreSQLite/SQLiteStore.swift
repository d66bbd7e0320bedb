import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

/// ``SettingsStore`` on one SQLite file, through GRDB: WAL mode (readers never wait for the
/// writer), schema migrations applied at open, one transaction per call.
public final class SQLiteStore: SettingsStore {
    private let pool: DatabasePool

    /// Opens (creating if needed) the database at `path` and migrates it to the current schema.
    public init(path: String) throws {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")  // WAL + NORMAL: durable at checkpoint, never corrupt
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        try Self.migrator.migrate(pool)
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
        return migrator
    }

    /// The SQLite journal mode in use (`wal`).
    public func journalMode() async throws -> String {
        try await pool.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") ?? "" }
    }

    // MARK: - Metadata

    public func metadata(app: String) async throws -> StoredMetadata? {
        try await pool.read { db in
            try Row.fetchOne(db, sql: "SELECT version, document FROM metadata WHERE app = ?", arguments: [app]).map { row in
                StoredMetadata(app: app, version: row["version"], document: row["document"])
            }
        }
    }

    public func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?) async throws -> Bool {
        try await pool.write { db in
            let current = try Int.fetchOne(db, sql: "SELECT version FROM metadata WHERE app = ?", arguments: [metadata.app])
            guard current == expectedVersion else { return false }
            try db.execute(
                sql: "INSERT OR REPLACE INTO metadata (app, version, document) VALUES (?, ?, ?)",
                arguments: [metadata.app, metadata.version, metadata.document])
            return true
        }
    }

    // MARK: - Values

    public func values(app: String, scope: Scope) async throws -> JSONObject {
        let text = try await pool.read { db in
            try String.fetchOne(
                db, sql: #"SELECT "values" FROM scoped_values WHERE app = ? AND scope = ?"#, arguments: [app, scope.description])
        }
        guard let text else { return [:] }
        return try Self.object(text, what: "values of \(app) at \(scope)")
    }

    public func setValues(_ values: JSONObject, app: String, scope: Scope) async throws {
        let text = JSONValue.object(values).serialized()
        try await pool.write { db in
            if values.isEmpty {
                try db.execute(sql: "DELETE FROM scoped_values WHERE app = ? AND scope = ?", arguments: [app, scope.description])
            } else {
                try db.execute(
                    sql: #"INSERT OR REPLACE INTO scoped_values (app, scope, "values") VALUES (?, ?, ?)"#,
                    arguments: [app, scope.description, text])
            }
        }
    }

    // MARK: - Devices and enrollment

    public func addDevice(_ device: Device) async throws {
        let groups = Self.text(device.groups)
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO devices (id, token_hash, groups, enrolled_at, last_seen_at) VALUES (?, ?, ?, ?, ?)",
                arguments: [device.id, device.tokenHash, groups, device.enrolledAt, device.lastSeenAt])
        }
    }

    public func device(tokenHash: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE token_hash = ?", tokenHash)
    }

    public func device(id: String) async throws -> Device? {
        try await fetchDevice(sql: "SELECT * FROM devices WHERE id = ?", id)
    }

    private func fetchDevice(sql: String, _ argument: String) async throws -> Device? {
        try await pool.read { db in try Row.fetchOne(db, sql: sql, arguments: [argument]).map(Self.device) }
    }

    public func devices() async throws -> [Device] {
        try await pool.read { db in try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map(Self.device) }
    }

    public func touch(deviceID: String, at time: Int64) async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE devices SET last_seen_at = ? WHERE id = ?", arguments: [time, deviceID])
        }
    }

    public func addEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        let groups = Self.text(token.groups)
        try await pool.write { db in
            try db.execute(
                sql: "INSERT INTO enrollment_tokens (hash, expires_at, uses_left, groups) VALUES (?, ?, ?, ?)",
                arguments: [token.hash, token.expiresAt, token.usesLeft, groups])
        }
    }

    public func consumeEnrollmentToken(hash: String, now: Int64) async throws -> [String]? {
        let groups = try await pool.write { db -> String? in
            try db.execute(
                sql: "UPDATE enrollment_tokens SET uses_left = uses_left - 1 WHERE hash = ? AND uses_left > 0 AND expires_at > ?",
                arguments: [hash, now])
            guard db.changesCount == 1 else { return nil }
            return try String.fetchOne(db, sql: "SELECT groups FROM enrollment_tokens WHERE hash = ?", arguments: [hash])
        }
        return try groups.map { try Self.strings($0, what: "groups of an enrollment token") }
    }

    // MARK: - Revisions and status

    public func revision(app: String, deviceID: String) async throws -> RevisionState? {
        try await pool.read { db in
            try Row.fetchOne(
                db, sql: "SELECT revision, fingerprint FROM revisions WHERE app = ? AND device_id = ?", arguments: [app, deviceID]
            )
            .map { row in
                RevisionState(revision: row["revision"], fingerprint: UInt64(bitPattern: row["fingerprint"] as Int64))
            }
        }
    }

    public func setRevision(_ state: RevisionState, app: String, deviceID: String) async throws {
        try await pool.write { db in
            try db.execute(
                sql: "INSERT OR REPLACE INTO revisions (app, device_id, revision, fingerprint) VALUES (?, ?, ?, ?)",
                arguments: [app, deviceID, state.revision, Int64(bitPattern: state.fingerprint)])
        }
    }

    public func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws {
        try await pool.write { db in
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO status_reports
                    (app, device_id, revision, schema_version, state, message, source, received_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    app, deviceID, report.revision, report.schemaVersion, report.state.rawValue, report.message, report.source.rawValue,
                    time,
                ])
        }
    }

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        let stored = try await pool.read { db -> StoredStatus? in
            try Row.fetchOne(db, sql: "SELECT * FROM status_reports WHERE app = ? AND device_id = ?", arguments: [app, deviceID])
                .map { row in
                    guard let state = StatusReport.State(rawValue: row["state"]), let source = StatusReport.Source(rawValue: row["source"])
                    else {
                        throw StoreCorruption(what: "status report of \(deviceID) for \(app)")
                    }
                    let report = StatusReport(
                        revision: row["revision"], schemaVersion: row["schema_version"], state: state, message: row["message"],
                        source: source)
                    return StoredStatus(report: report, receivedAt: row["received_at"])
                }
        }
        return stored.map { ($0.report, $0.receivedAt) }
    }

    // MARK: - Encoding

    private static func device(_ row: Row) throws -> Device {
        let id: String = row["id"]
        return Device(
            id: id, tokenHash: row["token_hash"], groups: try strings(row["groups"], what: "groups of device \(id)"),
            enrolledAt: row["enrolled_at"], lastSeenAt: row["last_seen_at"])
    }

    private static func text(_ strings: [String]) -> String {
        JSONValue.array(strings.map(JSONValue.string)).serialized()
    }

    private static func strings(_ text: String, what: String) throws -> [String] {
        guard case .array(let elements)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        return try elements.map { element in
            guard case .string(let value) = element else { throw StoreCorruption(what: what) }
            return value
        }
    }

    private static func object(_ text: String, what: String) throws -> JSONObject {
        guard case .object(let object)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        return object
    }
}

private struct StoredStatus: Sendable {
    var report: StatusReport
    var receivedAt: Int64
}

/// A row the store wrote cannot be read back: the database was changed outside fleetset.
public struct StoreCorruption: Error, Sendable, CustomStringConvertible {
    /// Which stored item.
    public let what: String

    public var description: String { "the stored \(what) cannot be read; the database was changed outside fleetset" }
}
