import FleetJSON
import FleetProtocol
import FleetServerCore
import PostgresNIO

extension PostgresStore {
    public func snapshot() async throws -> StoreSnapshot {
        try await transaction { connection in
            // One snapshot of the whole database, as a read-only transaction sees it.
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: self.logger)
            var snapshot = StoreSnapshot()
            snapshot.metadata = try await connection.query(PostgresRows.allMetadataQuery, logger: self.logger).collect().map(
                PostgresRows.storedMetadata)
            for row in try await connection.query(
                #"SELECT app, scope, "values" FROM scoped_values ORDER BY app, scope"#, logger: self.logger
            )
            .collect() {
                let (app, scopeText, text) = try row.decode((String, String, String).self)
                guard let scope = Scope(parameter: scopeText) else { throw StoreCorruption(what: "scope \(scopeText) of \(app)") }
                snapshot.values.append(
                    .init(app: app, scope: scope, values: try StoredText.object(text, what: "values of \(app) at \(scopeText)")))
            }
            for row in try await connection.query(
                "SELECT \(unescaped: PostgresRows.deviceColumns), enrollment_token_hash, enrollment_request_id FROM devices ORDER BY id",
                logger: self.logger
            ).collect() {
                let columns = row.makeRandomAccess()
                snapshot.devices.append(
                    .init(
                        device: try PostgresRows.device(row),
                        enrollmentTokenHash: try columns["enrollment_token_hash"].decode(String?.self),
                        enrollmentRequestID: try columns["enrollment_request_id"].decode(String?.self)))
            }
            snapshot.enrollmentTokens = try await connection.query(
                "SELECT \(unescaped: PostgresRows.tokenColumns) FROM enrollment_tokens ORDER BY id", logger: self.logger
            ).collect().map(PostgresRows.enrollmentToken)
            for row in try await connection.query(
                "SELECT app, device_id, revision, fingerprint FROM revisions ORDER BY app, device_id", logger: self.logger
            ).collect() {
                let (app, deviceID, revision, fingerprint) = try row.decode((String, String, Int64, Int64).self)
                snapshot.revisions.append(
                    .init(
                        app: app, deviceID: deviceID, state: RevisionState(revision: revision, fingerprint: UInt64(bitPattern: fingerprint))
                    ))
            }
            for row in try await connection.query(
                "SELECT \(unescaped: PostgresRows.statusColumns) FROM status_reports ORDER BY app, device_id", logger: self.logger
            ).collect() {
                let stored = try PostgresRows.storedStatus(row)
                snapshot.reports.append(
                    .init(app: stored.app, deviceID: stored.deviceID, report: stored.report, receivedAt: stored.receivedAt))
            }
            snapshot.history = try await connection.query(
                #"SELECT \#(unescaped: PostgresRows.historyColumns) FROM history ORDER BY app COLLATE "C", number"#, logger: self.logger
            ).collect().map(PostgresRows.historyEntry)
            for row in try await connection.query("SELECT app, number FROM history_floor", logger: self.logger).collect() {
                let (app, floor) = try row.decode((String, Int64).self)
                snapshot.historyFloors[app] = floor
            }
            snapshot.rollouts = try await connection.query("SELECT document FROM rollouts ORDER BY id", logger: self.logger).collect().map {
                try Rollout(storedText: try $0.decode(String.self))
            }
            for row in try await connection.query("SELECT device_id, info, updated_at FROM device_info", logger: self.logger).collect() {
                snapshot.deviceInfo[try row.decode((String, String, Int64).self).0] = try PostgresRows.storedInfo(row)
            }
            for row in try await connection.query("SELECT scope, policy FROM agent_policies", logger: self.logger).collect() {
                let (scope, policy) = try PostgresRows.scopedPolicy(row)
                snapshot.policies[scope] = policy
            }
            try await PostgresAccountRows.snapshot(into: &snapshot, connection, logger: self.logger)
            snapshot.webhookSubscriptions = try await connection.query(
                #"SELECT document FROM webhook_subscriptions ORDER BY created_at, id COLLATE "C""#, logger: self.logger
            ).collect().map { try WebhookSubscription(storedText: try $0.decode(String.self)) }
            snapshot.outbox = try await connection.query(
                "SELECT \(unescaped: PostgresTransaction.outboxColumns) FROM webhook_outbox ORDER BY sequence", logger: self.logger
            ).collect().map(PostgresTransaction.outboxEntry)
            snapshot.outboxSequence =
                try await connection.query(
                    "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM webhook_outbox_sequence", logger: self.logger
                ).collect().first.map { try $0.decode(Int64.self) } ?? 0
            snapshot.groupDefinitions = try await connection.query(
                #"SELECT name, document FROM group_definitions ORDER BY name COLLATE "C""#, logger: self.logger
            ).collect().map(PostgresRows.groupDefinition)
            return snapshot
        }
    }
}
