import FleetJSON
import FleetProtocol
import FleetServerCore
import PostgresNIO

/// The SQL of the PostgreSQL store that its reads and its transactions share, each statement
/// once, and the mapping of its rows: no rules.
enum PostgresRows {
    /// The columns ``device(_:)`` reads, in its order.
    static let deviceColumns = """
        id, token_hash, apps, "groups", enrolled_at, last_seen_at, disabled, pending_token_hash, rotation_requested
        """
    /// The columns ``enrollmentToken(_:)`` reads, in its order.
    static let tokenColumns = #"hash, id, expires_at, uses_left, apps, "groups""#
    /// The columns ``historyEntry(_:)`` reads, in its order.
    static let historyColumns = "app, number, at, actor, message, kind, scopes, metadata_version"
    /// The columns ``storedStatus(_:)`` reads, in its order.
    static let statusColumns = "app, device_id, revision, schema_version, state, message, source, received_at, detail"

    static let allMetadataQuery: PostgresQuery = #"SELECT app, version, document FROM metadata ORDER BY app COLLATE "C""#

    static func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?) -> PostgresQuery {
        """
        INSERT INTO devices (id, token_hash, apps, "groups", enrolled_at, last_seen_at, disabled, pending_token_hash,
            rotation_requested, enrollment_token_hash, enrollment_request_id)
        VALUES (\(device.id), \(device.tokenHash), \(StoredText.text(device.apps)), \(StoredText.text(device.groups)),
            \(device.enrolledAt), \(device.lastSeenAt), \(device.disabled), \(device.pendingTokenHash), \(device.rotationRequested),
            \(enrollment?.tokenHash), \(enrollment?.requestID))
        """
    }

    static func insertEnrollmentToken(_ token: EnrollmentTokenRecord) -> PostgresQuery {
        """
        INSERT INTO enrollment_tokens (hash, id, expires_at, uses_left, apps, "groups")
        VALUES (\(token.hash), \(token.id), \(token.expiresAt), \(token.usesLeft), \(StoredText.text(token.apps)),
            \(StoredText.text(token.groups)))
        """
    }

    static func insertHistory(_ entry: HistoryEntry) -> PostgresQuery {
        // history_scopes: filled by the trigger on history (migration v6).
        let change = entry.change
        return """
            INSERT INTO history (app, number, at, actor, message, kind, scopes, metadata_version)
            VALUES (\(entry.app), \(entry.number), \(change.at), \(change.actor), \(change.message), \(change.kind.rawValue),
                \(change.scopesText), \(change.metadataVersion.map(Int64.init)))
            """
    }

    static func insertRollout(_ rollout: Rollout) -> PostgresQuery {
        """
        INSERT INTO rollouts (id, app, active, version, started_at, document)
        VALUES (\(rollout.id), \(rollout.app), \(rollout.phase.isActive), \(rollout.version), \(rollout.startedAt),
            \(rollout.storedJSON.serialized()))
        """
    }

    /// One statement for a batch of reports: the latest of each device and app (of two in the
    /// batch, the later stays), and each report in its history slot (the same rule per slot).
    static func upsertStatuses(_ records: [StatusRecord]) -> PostgresQuery {
        func lastOfEach(_ key: (StatusRecord) -> String) -> [StatusRecord] {
            var latest: [String: Int] = [:]
            for (index, record) in records.enumerated() { latest[key(record)] = index }
            return latest.values.sorted().map { records[$0] }
        }
        let kept = lastOfEach { $0.app + "\u{0}" + $0.deviceID }
        let history = lastOfEach { $0.app + "\u{0}" + $0.deviceID + "\u{0}" + String(StatusHistory.slot(of: $0.report)) }
        // The first INSERT runs as a data-modifying WITH: once, whether or not the second reads it.
        return """
            WITH latest AS (
                INSERT INTO status_reports (app, device_id, revision, schema_version, state, message, source, received_at, detail)
                SELECT a, d, r, v, st, m, so, t, NULLIF(x, '') FROM unnest(\(kept.map(\.app))::text[], \(kept.map(\.deviceID))::text[],
                    \(kept.map(\.report.revision))::int8[], \(kept.map(\.report.schemaVersion))::int8[], \(kept.map(\.report.state.rawValue))::text[],
                    \(kept.map(\.report.message))::text[], \(kept.map(\.report.source.rawValue))::text[], \(kept.map(\.time))::int8[],
                    \(kept.map(\.detailText))::text[]) AS u(a, d, r, v, st, m, so, t, x)
                ON CONFLICT (app, device_id) DO UPDATE SET revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version,
                    state = EXCLUDED.state, message = EXCLUDED.message, source = EXCLUDED.source, received_at = EXCLUDED.received_at,
                    detail = EXCLUDED.detail
                RETURNING 1)
            INSERT INTO status_history (device_id, app, slot, revision, schema_version, state, message, source, received_at, detail)
            SELECT d, a, sl, r, v, st, m, so, t, NULLIF(x, '') FROM unnest(\(history.map(\.deviceID))::text[], \(history.map(\.app))::text[],
                \(history.map { StatusHistory.slot(of: $0.report) })::int8[], \(history.map(\.report.revision))::int8[],
                \(history.map(\.report.schemaVersion))::int8[], \(history.map(\.report.state.rawValue))::text[],
                \(history.map(\.report.message))::text[], \(history.map(\.report.source.rawValue))::text[], \(history.map(\.time))::int8[],
                \(history.map(\.detailText))::text[]) AS u(d, a, sl, r, v, st, m, so, t, x)
            ON CONFLICT (device_id, app, slot) DO UPDATE SET revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version,
                state = EXCLUDED.state, message = EXCLUDED.message, source = EXCLUDED.source, received_at = EXCLUDED.received_at,
                detail = EXCLUDED.detail
            """
    }

    // MARK: - Decoding

    static func storedMetadata(_ row: PostgresRow) throws -> StoredMetadata {
        let (app, version, document) = try row.decode((String, Int, String).self)
        return StoredMetadata(app: app, version: version, document: document)
    }

    static func historyEntry(_ row: PostgresRow) throws -> HistoryEntry {
        let (app, number, at, actor, message, kindText, scopes, metadataVersion) = try row.decode(
            (String, Int64, Int64, String, String, String, String, Int64?).self)
        let what = "history entry \(number) of \(app)"
        guard let kind = ChangeRecord.Kind(rawValue: kindText) else { throw StoreCorruption(what: what) }
        return HistoryEntry(
            app: app, number: number,
            change: ChangeRecord(
                at: at, actor: actor, message: message, kind: kind, scopes: try ChangeRecord.scopes(scopes, what: what),
                metadataVersion: metadataVersion.map(Int.init)))
    }

    static func groupDefinition(_ row: PostgresRow) throws -> GroupDefinition {
        let (name, text) = try row.decode((String, String).self)
        return try GroupDefinition(name: name, storedText: text)
    }

    /// Facts rows (`device_id, info, updated_at`) by device id.
    static func deviceInfoByID(_ rows: [PostgresRow]) throws -> [String: StoredDeviceInfo] {
        var all: [String: StoredDeviceInfo] = [:]
        for row in rows { all[try row.decode((String, String, Int64).self).0] = try storedInfo(row) }
        return all
    }

    static func storedInfo(_ row: PostgresRow) throws -> StoredDeviceInfo {
        let (id, text, updatedAt) = try row.decode((String, String, Int64).self)
        return StoredDeviceInfo(info: try StoredText.object(text, what: "facts of device \(id)"), updatedAt: updatedAt)
    }

    static func scopedPolicy(_ row: PostgresRow) throws -> (PolicyScope, AgentPolicy) {
        let (text, policyText) = try row.decode((String, String).self)
        guard let scope = PolicyScope(text), let policy = try? AgentPolicy(json: .object(StoredText.object(policyText, what: text))) else {
            throw StoreCorruption(what: "agent policy at \(text)")
        }
        return (scope, policy)
    }

    static func scope(_ text: String, of app: String) throws -> Scope {
        guard let scope = Scope(parameter: text) else { throw StoreCorruption(what: "scope \(text) of \(app)") }
        return scope
    }

    static func device(_ row: PostgresRow) throws -> Device {
        let (id, tokenHash, apps, groups, enrolledAt, lastSeenAt, disabled, pendingTokenHash, rotationRequested) = try row.decode(
            (String, String, String, String, Int64, Int64?, Bool, String?, Bool).self)
        return Device(
            id: id, tokenHash: tokenHash, apps: try StoredText.strings(apps, what: "apps of device \(id)"),
            groups: try StoredText.strings(groups, what: "groups of device \(id)"), enrolledAt: enrolledAt, lastSeenAt: lastSeenAt,
            disabled: disabled, pendingTokenHash: pendingTokenHash, rotationRequested: rotationRequested)
    }

    static func enrollmentToken(_ row: PostgresRow) throws -> EnrollmentTokenRecord {
        let (hash, id, expiresAt, usesLeft, apps, groups) = try row.decode((String, String, Int64, Int, String, String).self)
        return EnrollmentTokenRecord(
            hash: hash, id: id, expiresAt: expiresAt, usesLeft: usesLeft,
            apps: try StoredText.strings(apps, what: "apps of enrollment token \(id)"),
            groups: try StoredText.strings(groups, what: "groups of enrollment token \(id)"))
    }

    static func revisionState(_ row: PostgresRow) throws -> RevisionState {
        let (revision, fingerprint) = try row.decode((Int64, Int64).self)
        return RevisionState(revision: revision, fingerprint: UInt64(bitPattern: fingerprint))
    }

    static func storedStatus(_ row: PostgresRow) throws -> (app: String, deviceID: String, report: StatusReport, receivedAt: Int64) {
        let (app, deviceID, revision, schemaVersion, stateText, message, sourceText, receivedAt, detailText) = try row.decode(
            (String, String, Int64, Int64, String, String, String, Int64, String?).self)
        guard let state = StatusReport.State(rawValue: stateText), let source = StatusReport.Source(rawValue: sourceText) else {
            throw StoreCorruption(what: "status report of \(deviceID) for \(app)")
        }
        // A detail a later release wrote and this one does not know is left out, not refused.
        let report = StatusReport(
            revision: revision, schemaVersion: schemaVersion, state: state, message: message, source: source,
            detail: detailText.flatMap(StatusReport.Detail.init(rawValue:)))
        return (app, deviceID, report, receivedAt)
    }
}

extension StatusRecord {
    /// The report's detail as the batch statement sends it: empty for none (stored as `NULL`).
    fileprivate var detailText: String { report.detail?.rawValue ?? "" }
}
