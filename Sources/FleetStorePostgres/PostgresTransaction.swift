import FleetJSON
import FleetProtocol
import FleetServerCore
import Logging
import PostgresNIO

/// The primitives of one PostgreSQL write transaction, on the connection it runs on. Rows read
/// here are locked (`FOR UPDATE`): a script that checks a row before it writes, on any
/// instance, waits for another that checks the same row.
struct PostgresTransaction: StoreTransaction {
    let connection: PostgresConnection
    let logger: Logger
    /// Names this instance in its notifications.
    let instanceID: String

    @discardableResult
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    private func optionalInteger(_ query: PostgresQuery) async throws -> Int64? {
        try await rows(query).first.flatMap { try $0.decode(Int64?.self) }
    }

    func metadataVersion(app: String) async throws -> Int? {
        try await rows("SELECT version FROM metadata WHERE app = \(app) FOR UPDATE").first.map { try $0.decode(Int.self) }
    }

    func insertMetadata(_ metadata: StoredMetadata) async throws -> Bool {
        try await !rows(
            """
            INSERT INTO metadata (app, version, document) VALUES (\(metadata.app), \(metadata.version), \(metadata.document))
            ON CONFLICT (app) DO NOTHING RETURNING app
            """
        ).isEmpty
    }

    func updateMetadata(_ metadata: StoredMetadata) async throws {
        try await rows("UPDATE metadata SET version = \(metadata.version), document = \(metadata.document) WHERE app = \(metadata.app)")
    }

    func setValues(_ values: JSONObject, app: String, scope: Scope) async throws {
        if values.isEmpty {
            try await rows("DELETE FROM scoped_values WHERE app = \(app) AND scope = \(scope.description)")
        } else {
            let text = JSONValue.object(values).serialized()
            try await rows(
                #"""
                INSERT INTO scoped_values (app, scope, "values") VALUES (\#(app), \#(scope.description), \#(text))
                ON CONFLICT (app, scope) DO UPDATE SET "values" = EXCLUDED."values"
                """#)
        }
    }

    func newestHistoryNumber(app: String) async throws -> Int64 {
        try await optionalInteger("SELECT max(number) FROM history WHERE app = \(app)") ?? 0
    }

    func newestHistoryNumber(app: String, writtenBefore time: Int64) async throws -> Int64? {
        try await optionalInteger("SELECT max(number) FROM history WHERE app = \(app) AND at < \(time)")
    }

    func insertHistory(_ entry: HistoryEntry) async throws {
        try await rows(PostgresRows.insertHistory(entry))
    }

    func historyFloor(app: String) async throws -> Int64? {
        try await optionalInteger("SELECT number FROM history_floor WHERE app = \(app)")
    }

    func raiseHistoryFloor(app: String, to number: Int64) async throws {
        try await rows(
            """
            INSERT INTO history_floor (app, number) VALUES (\(app), \(number))
            ON CONFLICT (app) DO UPDATE SET number = greatest(history_floor.number, excluded.number)
            """)
    }

    func removeHistory(app: String, through cut: Int64) async throws -> Int {
        try await rows(
            """
            DELETE FROM history_scopes WHERE app = \(app) AND number <= \(cut) AND number NOT IN (
                SELECT max(number) FROM history_scopes WHERE app = \(app) AND number <= \(cut)
                    AND (scope NOT LIKE 'device:%' OR substr(scope, 8) IN (SELECT id FROM devices))
                GROUP BY scope)
            """)
        return try await rows(
            """
            DELETE FROM history WHERE app = \(app) AND number <= \(cut)
                AND number NOT IN (SELECT number FROM history_scopes WHERE app = \(app) AND number <= \(cut))
            RETURNING 1
            """
        ).count
    }

    func hasActiveRollout(app: String) async throws -> Bool {
        try await !rows("SELECT 1 FROM rollouts WHERE app = \(app) AND active").isEmpty
    }

    func insertRollout(_ rollout: Rollout) async throws {
        try await rows(PostgresRows.insertRollout(rollout))
    }

    func replaceRollout(_ rollout: Rollout, storedVersion version: Int64) async throws -> Bool {
        try await rows(
            """
            UPDATE rollouts SET active = \(rollout.phase.isActive), version = \(rollout.version), document = \(rollout.storedJSON.serialized())
            WHERE id = \(rollout.id) AND version = \(version) RETURNING 1
            """
        ).count == 1
    }

    func device(id: String) async throws -> Device? {
        try await rows("SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices WHERE id = \(id) FOR UPDATE").first.map(
            PostgresRows.device)
    }

    func device(enrolledWith tokenHash: String, requestID: String, since: Int64) async throws -> Device? {
        try await rows(
            """
            SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices WHERE enrollment_token_hash = \(tokenHash)
            AND enrollment_request_id = \(requestID) AND enrolled_at >= \(since) AND NOT disabled FOR UPDATE
            """
        ).first.map(PostgresRows.device)
    }

    func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?) async throws {
        try await rows(PostgresRows.insertDevice(device, enrolledWith: enrollment))
    }

    func updateDevice(_ device: Device) async throws {
        try await rows(
            """
            UPDATE devices SET token_hash = \(device.tokenHash), pending_token_hash = \(device.pendingTokenHash),
                apps = \(StoredText.text(device.apps)), "groups" = \(StoredText.text(device.groups)), disabled = \(device.disabled),
                rotation_requested = \(device.rotationRequested)
            WHERE id = \(device.id)
            """)
    }

    func removeDevice(id: String) async throws -> Bool {
        for table in ["revisions", "status_reports", "status_history", "device_info"] {
            try await rows("DELETE FROM \(unescaped: table) WHERE device_id = \(id)")
        }
        try await rows("DELETE FROM scoped_values WHERE scope = \(Scope.device(id).description)")
        try await rows("DELETE FROM agent_policies WHERE scope = \(PolicyScope.device(id).description)")
        return try await !rows("DELETE FROM devices WHERE id = \(id) RETURNING id").isEmpty
    }

    func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await rows("SELECT \(unescaped: PostgresRows.tokenColumns) FROM enrollment_tokens WHERE hash = \(hash) FOR UPDATE").first.map(
            PostgresRows.enrollmentToken)
    }

    func insertEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try await rows(PostgresRows.insertEnrollmentToken(token))
    }

    func setUsesLeft(_ usesLeft: Int, enrollmentToken hash: String) async throws {
        try await rows("UPDATE enrollment_tokens SET uses_left = \(usesLeft) WHERE hash = \(hash)")
    }

    func removeEnrollmentToken(id: String) async throws -> Bool {
        try await !rows("DELETE FROM enrollment_tokens WHERE id = \(id) RETURNING id").isEmpty
    }

    func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await rows("SELECT device_id, info, updated_at FROM device_info WHERE device_id = \(id)").first.map(PostgresRows.storedInfo)
    }

    func setDeviceInfo(_ info: StoredDeviceInfo, id: String) async throws {
        let text = JSONValue.object(info.info).serialized()
        try await rows(
            """
            INSERT INTO device_info (device_id, info, updated_at) VALUES (\(id), \(text), \(info.updatedAt))
            ON CONFLICT (device_id) DO UPDATE SET info = excluded.info, updated_at = excluded.updated_at
            """)
    }

    func groupDefinitions() async throws -> [GroupDefinition] {
        try await rows(#"SELECT name, document FROM group_definitions ORDER BY name COLLATE "C""#).map(PostgresRows.groupDefinition)
    }

    func setGroupDefinition(_ definition: GroupDefinition) async throws {
        try await rows(
            """
            INSERT INTO group_definitions (name, document) VALUES (\(definition.name), \(definition.storedText))
            ON CONFLICT (name) DO UPDATE SET document = excluded.document
            """)
    }

    func removeGroupDefinition(name: String) async throws -> Bool {
        try await rows("DELETE FROM group_definitions WHERE name = \(name) RETURNING 1").count == 1
    }

    func lockedDevices() async throws -> [Device] {
        try await rows("SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices ORDER BY id COLLATE \"C\" FOR UPDATE").map(
            PostgresRows.device)
    }

    func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        try PostgresRows.deviceInfoByID(try await rows("SELECT device_id, info, updated_at FROM device_info"))
    }

    func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        let scopeText = scope.description
        guard !policy.isEmpty else {
            try await rows("DELETE FROM agent_policies WHERE scope = \(scopeText)")
            return
        }
        let text = policy.json.serialized()
        try await rows(
            "INSERT INTO agent_policies (scope, policy) VALUES (\(scopeText), \(text)) ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy"
        )
    }

    func insertRevision(_ state: RevisionState, app: String, deviceID: String) async throws {
        try await rows(
            """
            INSERT INTO revisions (app, device_id, revision, fingerprint)
            VALUES (\(app), \(deviceID), \(state.revision), \(Int64(bitPattern: state.fingerprint)))
            """)
    }

    func recordStatuses(_ records: [StatusRecord]) async throws {
        guard !records.isEmpty else { return }
        try await rows(PostgresRows.upsertStatuses(records))
    }

    func count(of kind: StoredKind) async throws -> Int {
        try await rows("SELECT count(*) FROM \(unescaped: kind.table)").first.map { Int(try $0.decode(Int64.self)) } ?? 0
    }

    /// Triggers write every change of a table to the change feed; this adds "forget everything"
    /// (which has no row of its own) and the NOTIFY that makes the other instances read the feed
    /// now. Its payload is what instances of the release before read instead of the feed (during
    /// a rolling upgrade). Both are delivered when the transaction commits, never when it rolls back.
    func announce(_ change: StoreChange) async throws {
        if change == .unknown { try await rows(#"SELECT fleetset_feed('{"unknown": true}'::json)"#) }
        let payload = ChangeMessage(from: instanceID, change: change).payload
        try await rows("SELECT pg_notify(\(PostgresStore.changeChannel), \(payload))")
    }
}
