import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

/// The primitives of one SQLite write transaction: each runs its statements on the pool's
/// writer connection, inside the transaction ``SQLiteStore/write(_:)`` began there (the store
/// lets no other write onto that connection until it ends).
struct SQLiteTransaction: StoreTransaction {
    let pool: DatabasePool

    private func run<T: Sendable>(_ statements: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await pool.writeWithoutTransaction(statements)
    }

    func metadataVersion(app: String) async throws -> Int? {
        try await run { db in try Int.fetchOne(db, sql: "SELECT version FROM metadata WHERE app = ?", arguments: [app]) }
    }

    func insertMetadata(_ metadata: StoredMetadata) async throws -> Bool {
        try await run { db in try SQLiteRows.insertMetadata(metadata, db) }
    }

    func updateMetadata(_ metadata: StoredMetadata) async throws {
        try await run { db in
            try db.execute(
                sql: "UPDATE metadata SET version = ?, document = ? WHERE app = ?",
                arguments: [metadata.version, metadata.document, metadata.app])
        }
    }

    func setValues(_ values: JSONObject, app: String, scope: Scope) async throws {
        try await run { db in try SQLiteRows.setValues(values, app: app, scope: scope, db) }
    }

    func newestHistoryNumber(app: String) async throws -> Int64 {
        try await run { db in try SQLiteRows.newestHistoryNumber(app: app, db) }
    }

    func newestHistoryNumber(app: String, writtenBefore time: Int64) async throws -> Int64? {
        try await run { db in
            try Int64.fetchOne(db, sql: "SELECT max(number) FROM history WHERE app = ? AND at < ?", arguments: [app, time])
        }
    }

    func insertHistory(_ entry: HistoryEntry) async throws {
        try await run { db in try SQLiteRows.insertHistory(entry, db) }
    }

    func historyFloor(app: String) async throws -> Int64? {
        try await run { db in try SQLiteRows.historyFloor(app: app, db) }
    }

    func raiseHistoryFloor(app: String, to number: Int64) async throws {
        try await run { db in
            try db.execute(
                sql: """
                    INSERT INTO history_floor (app, number) VALUES (?, ?)
                    ON CONFLICT (app) DO UPDATE SET number = max(number, excluded.number)
                    """, arguments: [app, number])
        }
    }

    func removeHistory(app: String, through cut: Int64) async throws -> Int {
        try await run { db in
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
            return db.changesCount
        }
    }

    func hasActiveRollout(app: String) async throws -> Bool {
        try await run { db in try Bool.fetchOne(db, sql: "SELECT 1 FROM rollouts WHERE app = ? AND active = 1", arguments: [app]) ?? false }
    }

    func insertRollout(_ rollout: Rollout) async throws {
        try await run { db in try SQLiteRows.insertRollout(rollout, db) }
    }

    func replaceRollout(_ rollout: Rollout, storedVersion version: Int64) async throws -> Bool {
        try await run { db in
            try db.execute(
                sql: "UPDATE rollouts SET active = ?, version = ?, document = ? WHERE id = ? AND version = ?",
                arguments: [rollout.phase.isActive, rollout.version, rollout.storedJSON.serialized(), rollout.id, version])
            return db.changesCount == 1
        }
    }

    func device(id: String) async throws -> Device? {
        try await run { db in try SQLiteRows.device(id: id, db) }
    }

    func device(enrolledWith tokenHash: String, requestID: String, since: Int64) async throws -> Device? {
        try await run { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT * FROM devices WHERE enrollment_token_hash = ? AND enrollment_request_id = ? AND enrolled_at >= ? AND disabled = 0
                    """,
                arguments: [tokenHash, requestID, since]
            ).map(SQLiteRows.device)
        }
    }

    func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?) async throws {
        try await run { db in try SQLiteRows.insertDevice(device, enrolledWith: enrollment, db) }
    }

    func updateDevice(_ device: Device) async throws {
        try await run { db in
            try db.execute(
                sql: """
                    UPDATE devices SET token_hash = ?, pending_token_hash = ?, apps = ?, groups = ?, disabled = ?, rotation_requested = ?
                    WHERE id = ?
                    """,
                arguments: [
                    device.tokenHash, device.pendingTokenHash, StoredText.text(device.apps), StoredText.text(device.groups),
                    device.disabled,
                    device.rotationRequested, device.id,
                ])
        }
    }

    func removeDevice(id: String) async throws -> Bool {
        try await run { db in
            for table in ["revisions", "status_reports", "status_history", "device_info"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE device_id = ?", arguments: [id])
            }
            try db.execute(sql: "DELETE FROM scoped_values WHERE scope = ?", arguments: [Scope.device(id).description])
            try db.execute(sql: "DELETE FROM agent_policies WHERE scope = ?", arguments: [PolicyScope.device(id).description])
            try db.execute(sql: "DELETE FROM devices WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await run { db in try SQLiteRows.enrollmentToken(hash: hash, db) }
    }

    func insertEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try await run { db in try SQLiteRows.insertEnrollmentToken(token, db) }
    }

    func setUsesLeft(_ usesLeft: Int, enrollmentToken hash: String) async throws {
        try await run { db in try db.execute(sql: "UPDATE enrollment_tokens SET uses_left = ? WHERE hash = ?", arguments: [usesLeft, hash])
        }
    }

    func removeEnrollmentToken(id: String) async throws -> Bool {
        try await run { db in
            try db.execute(sql: "DELETE FROM enrollment_tokens WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await run { db in try SQLiteRows.deviceInfo(id: id, db) }
    }

    func setDeviceInfo(_ info: StoredDeviceInfo, id: String) async throws {
        try await run { db in
            try db.execute(
                sql: """
                    INSERT INTO device_info (device_id, info, updated_at) VALUES (?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET info = excluded.info, updated_at = excluded.updated_at
                    """,
                arguments: [id, JSONValue.object(info.info).serialized(), info.updatedAt])
        }
    }

    func groupDefinitions() async throws -> [GroupDefinition] {
        try await run { db in try SQLiteRows.groupDefinitions(db) }
    }

    func setGroupDefinition(_ definition: GroupDefinition) async throws {
        try await run { db in
            try db.execute(
                sql:
                    "INSERT INTO group_definitions (name, document) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET document = excluded.document",
                arguments: [definition.name, definition.storedText])
        }
    }

    func removeGroupDefinition(name: String) async throws -> Bool {
        try await run { db in
            try db.execute(sql: "DELETE FROM group_definitions WHERE name = ?", arguments: [name])
            return db.changesCount == 1
        }
    }

    func lockedDevices() async throws -> [Device] {
        // One writer at a time: every row is this transaction's until it commits.
        try await run { db in try Row.fetchAll(db, sql: "SELECT * FROM devices ORDER BY id").map(SQLiteRows.device) }
    }

    func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        try await run { db in try SQLiteRows.allDeviceInfo(db) }
    }

    func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        try await run { db in try SQLiteRows.setAgentPolicy(policy, scope: scope, db) }
    }

    func insertRevision(_ state: RevisionState, app: String, deviceID: String) async throws {
        try await run { db in try SQLiteRows.putRevision(state, app: app, deviceID: deviceID, db) }
    }

    func recordStatuses(_ records: [StatusRecord]) async throws {
        try await run { db in try SQLiteRows.recordStatuses(records, db) }
    }

    func count(of kind: StoredKind) async throws -> Int {
        try await run { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM \(kind.table)") ?? 0 }
    }

    /// No other instance shares a SQLite file: nothing to tell.
    func announce(_ change: StoreChange) async throws {}
}
