import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

/// The SQL of the SQLite store, each statement once, for its reads and its transactions: rows
/// in and out, no rules.
enum SQLiteRows {
    // MARK: - Metadata and values

    static func allMetadata(_ db: Database) throws -> [StoredMetadata] {
        try Row.fetchAll(db, sql: "SELECT app, version, document FROM metadata ORDER BY app").map { row in
            StoredMetadata(app: row["app"], version: row["version"], document: row["document"])
        }
    }

    static func insertMetadata(_ metadata: StoredMetadata, _ db: Database) throws -> Bool {
        try db.execute(
            sql: "INSERT OR IGNORE INTO metadata (app, version, document) VALUES (?, ?, ?)",
            arguments: [metadata.app, metadata.version, metadata.document])
        return db.changesCount == 1
    }

    static func setValues(_ values: JSONObject, app: String, scope: Scope, _ db: Database) throws {
        if values.isEmpty {
            try db.execute(sql: "DELETE FROM scoped_values WHERE app = ? AND scope = ?", arguments: [app, scope.description])
        } else {
            try db.execute(
                sql: #"INSERT OR REPLACE INTO scoped_values (app, scope, "values") VALUES (?, ?, ?)"#,
                arguments: [app, scope.description, JSONValue.object(values).serialized()])
        }
    }

    static func scope(_ text: String, of app: String) throws -> Scope {
        guard let scope = Scope(parameter: text) else { throw StoreCorruption(what: "scope \(text) of \(app)") }
        return scope
    }

    // MARK: - History and rollouts

    static func insertHistory(_ entry: HistoryEntry, _ db: Database) throws {
        try insertHistoryRow(entry, db)
        for scope in Set(entry.change.scopes.map(\.scope.description)) {
            try db.execute(
                sql: "INSERT INTO history_scopes (app, scope, number) VALUES (?, ?, ?)", arguments: [entry.app, scope, entry.number])
        }
    }

    /// The entry's row in `history` (without the index of its scopes).
    static func insertHistoryRow(_ entry: HistoryEntry, _ db: Database) throws {
        let change = entry.change
        try db.execute(
            sql: "INSERT INTO history (app, number, at, actor, message, kind, scopes, metadata_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            arguments: [
                entry.app, entry.number, change.at, change.actor, change.message, change.kind.rawValue, change.scopesText,
                change.metadataVersion,
            ])
    }

    static func history(_ db: Database, app: String?) throws -> [HistoryEntry] {
        let rows =
            if let app {
                try Row.fetchAll(db, sql: "SELECT * FROM history WHERE app = ? ORDER BY number", arguments: [app])
            } else {
                try Row.fetchAll(db, sql: "SELECT * FROM history ORDER BY app, number")
            }
        return try historyEntries(rows)
    }

    static func historyEntries(_ rows: some Sequence<Row>) throws -> [HistoryEntry] {
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

    static func newestHistoryNumber(app: String, _ db: Database) throws -> Int64 {
        try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ?", arguments: [app]) ?? 0
    }

    static func historyFloor(app: String, _ db: Database) throws -> Int64? {
        try Int64.fetchOne(db, sql: "SELECT number FROM history_floor WHERE app = ?", arguments: [app])
    }

    static func insertRollout(_ rollout: Rollout, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO rollouts (id, app, active, version, started_at, document) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [
                rollout.id, rollout.app, rollout.phase.isActive, rollout.version, rollout.startedAt, rollout.storedJSON.serialized(),
            ])
    }

    // MARK: - Devices and tokens

    static func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO devices (id, token_hash, apps, groups, enrolled_at, last_seen_at, disabled, pending_token_hash,
                    rotation_requested, enrollment_token_hash, enrollment_request_id)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                device.id, device.tokenHash, StoredText.text(device.apps), StoredText.text(device.groups), device.enrolledAt,
                device.lastSeenAt, device.disabled, device.pendingTokenHash, device.rotationRequested, enrollment?.tokenHash,
                enrollment?.requestID,
            ])
    }

    static func device(id: String, _ db: Database) throws -> Device? {
        try Row.fetchOne(db, sql: "SELECT * FROM devices WHERE id = ?", arguments: [id]).map(device)
    }

    static func device(_ row: Row) throws -> Device {
        let id: String = row["id"]
        return Device(
            id: id, tokenHash: row["token_hash"], apps: try StoredText.strings(row["apps"], what: "apps of device \(id)"),
            groups: try StoredText.strings(row["groups"], what: "groups of device \(id)"), enrolledAt: row["enrolled_at"],
            lastSeenAt: row["last_seen_at"], disabled: row["disabled"], pendingTokenHash: row["pending_token_hash"],
            rotationRequested: row["rotation_requested"])
    }

    static func insertEnrollmentToken(_ token: EnrollmentTokenRecord, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO enrollment_tokens (hash, id, expires_at, uses_left, apps, groups) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [token.hash, token.id, token.expiresAt, token.usesLeft, StoredText.text(token.apps), StoredText.text(token.groups)])
    }

    static func enrollmentToken(hash: String, _ db: Database) throws -> EnrollmentTokenRecord? {
        try Row.fetchOne(db, sql: "SELECT * FROM enrollment_tokens WHERE hash = ?", arguments: [hash]).map(enrollmentToken)
    }

    static func enrollmentToken(_ row: Row) throws -> EnrollmentTokenRecord {
        let id: String = row["id"]
        return EnrollmentTokenRecord(
            hash: row["hash"], id: id, expiresAt: row["expires_at"], usesLeft: row["uses_left"],
            apps: try StoredText.strings(row["apps"], what: "apps of enrollment token \(id)"),
            groups: try StoredText.strings(row["groups"], what: "groups of enrollment token \(id)"))
    }

    // MARK: - Facts, policies, revisions and reports

    static func deviceInfo(id: String, _ db: Database) throws -> StoredDeviceInfo? {
        try Row.fetchOne(db, sql: "SELECT * FROM device_info WHERE device_id = ?", arguments: [id]).map(storedInfo)
    }

    static func allDeviceInfo(_ db: Database) throws -> [String: StoredDeviceInfo] {
        var all: [String: StoredDeviceInfo] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT * FROM device_info") { all[row["device_id"]] = try storedInfo(row) }
        return all
    }

    static func groupDefinitions(_ db: Database) throws -> [GroupDefinition] {
        try Row.fetchAll(db, sql: "SELECT name, document FROM group_definitions ORDER BY name").map { row in
            try GroupDefinition(name: row["name"], storedText: row["document"])
        }
    }

    static func storedInfo(_ row: Row) throws -> StoredDeviceInfo {
        let id: String = row["device_id"]
        return StoredDeviceInfo(info: try StoredText.object(row["info"], what: "facts of device \(id)"), updatedAt: row["updated_at"])
    }

    static func agentPolicies(_ db: Database) throws -> [PolicyScope: AgentPolicy] {
        var policies: [PolicyScope: AgentPolicy] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT scope, policy FROM agent_policies") {
            let text: String = row["scope"]
            guard let scope = PolicyScope(text), let policy = try? AgentPolicy(json: .object(StoredText.object(row["policy"], what: text)))
            else { throw StoreCorruption(what: "agent policy at \(text)") }
            policies[scope] = policy
        }
        return policies
    }

    static func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope, _ db: Database) throws {
        guard !policy.isEmpty else {
            try db.execute(sql: "DELETE FROM agent_policies WHERE scope = ?", arguments: [scope.description])
            return
        }
        try db.execute(
            sql: "INSERT INTO agent_policies (scope, policy) VALUES (?, ?) ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy",
            arguments: [scope.description, policy.json.serialized()])
    }

    static func revisionState(_ row: Row) -> RevisionState {
        RevisionState(revision: row["revision"], fingerprint: UInt64(bitPattern: row["fingerprint"] as Int64))
    }

    static func advanceRevision(_ advance: RevisionAdvance, _ db: Database) throws -> RevisionState {
        let current = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT revision, fingerprint FROM revisions WHERE app = ? AND device_id = ?"),
            arguments: [advance.app, advance.deviceID]
        ).map(revisionState)
        let next = RevisionState.next(after: current, fingerprint: advance.fingerprint)
        if next != current { try putRevision(next, app: advance.app, deviceID: advance.deviceID, db) }
        return next
    }

    static func putRevision(_ state: RevisionState, app: String, deviceID: String, _ db: Database) throws {
        try db.cachedStatement(sql: "INSERT OR REPLACE INTO revisions (app, device_id, revision, fingerprint) VALUES (?, ?, ?, ?)")
            .execute(arguments: [app, deviceID, state.revision, Int64(bitPattern: state.fingerprint)])
    }

    static func recordStatuses(_ records: [StatusRecord], _ db: Database) throws {
        for record in records {
            let report = record.report
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO status_reports
                    (app, device_id, revision, schema_version, state, message, source, received_at, detail)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    record.app, record.deviceID, report.revision, report.schemaVersion, report.state.rawValue, report.message,
                    report.source.rawValue, record.time, report.detail?.rawValue,
                ])
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO status_history
                    (device_id, app, slot, revision, schema_version, state, message, source, received_at, detail)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    record.deviceID, record.app, StatusHistory.slot(of: report), report.revision, report.schemaVersion,
                    report.state.rawValue, report.message, report.source.rawValue, record.time, report.detail?.rawValue,
                ])
        }
    }

    static func storedStatus(_ row: Row) throws -> StoredStatus {
        let deviceID: String = row["device_id"]
        let app: String = row["app"]
        let detailText: String? = row["detail"]
        guard let state = StatusReport.State(rawValue: row["state"]), let source = StatusReport.Source(rawValue: row["source"]) else {
            throw StoreCorruption(what: "status report of \(deviceID) for \(app)")
        }
        // A detail a later release wrote and this one does not know is left out, not refused.
        let report = StatusReport(
            revision: row["revision"], schemaVersion: row["schema_version"], state: state, message: row["message"], source: source,
            detail: detailText.flatMap(StatusReport.Detail.init(rawValue:)))
        return StoredStatus(app: app, deviceID: deviceID, report: report, receivedAt: row["received_at"])
    }
}

/// A status report row.
struct StoredStatus: Sendable {
    var app: String
    var deviceID: String
    var report: StatusReport
    var receivedAt: Int64

    var record: StatusRecord { StatusRecord(report: report, app: app, deviceID: deviceID, time: receivedAt) }
}

/// A scope's values as stored.
struct ScopeRow: Sendable {
    var scope: String
    var values: String
}
