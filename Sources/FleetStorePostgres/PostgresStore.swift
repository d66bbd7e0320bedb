import FleetJSON
import FleetProtocol
import FleetServerCore
import Logging
import PostgresNIO

/// ``SettingsStore`` on PostgreSQL, through postgres-nio: what lets several `fleetset-server`
/// instances share one fleet.
///
/// Each call is one statement or one transaction (PostgreSQL commits durably by default). What
/// one instance needs to know of the others' writes travels with them: every transaction that
/// changes what devices are served sends a `NOTIFY` on ``changeChannel`` (delivered when it
/// commits), which ``followChanges(onListening:_:)`` hears on every other instance. Writes that
/// check before they write run under ``writeLock`` (a transaction-scoped advisory lock).
///
/// Open it with ``with(_:logger:onTransaction:_:)``, which runs the connection pool and applies
/// the migrations (under an advisory lock, so instances starting together migrate once).
public final class PostgresStore: SettingsStore {
    /// The channel the change notifications are sent on.
    public static let changeChannel = "fleetset_changes"

    let client: PostgresClient
    let location: PostgresLocation
    let logger: Logger
    /// Names this instance in its notifications, so that it ignores its own.
    let instanceID: String
    /// The `application_name` of this instance's connections (`fleetset-server <instanceID>`):
    /// the change feed's triggers record it as each change's origin.
    var applicationName: String { Self.applicationName(instanceID) }
    /// The advisory lock key of writes on this database (see ``PostgresWriteLock``).
    public let writeLockKey: Int64
    /// Whether instances of the release before (which lock a fixed key) are connected now.
    let olderInstances: OlderInstances
    private let calls: StoreCalls

    private init(
        client: PostgresClient, location: PostgresLocation, logger: Logger, instanceID: String, writeLockKey: Int64,
        onTransaction: (@Sendable (String, Duration) -> Void)?
    ) {
        self.client = client
        self.location = location
        self.logger = logger
        self.calls = StoreCalls(onTransaction: onTransaction)
        self.instanceID = instanceID
        self.writeLockKey = writeLockKey
        self.olderInstances = OlderInstances(client: client, logger: logger)
    }

    static func applicationName(_ instanceID: String) -> String { "fleetset-server " + instanceID }

    /// Runs `body` with a store on the database at `location`: the connection pool runs while
    /// `body` does, and the schema is migrated before `body` starts.
    ///
    /// - Throws: when the database cannot be reached, refuses the login, or fails TLS
    ///   verification (checked with one connection before the pool starts).
    ///
    /// - Parameters:
    ///   - logger: for postgres-nio's background messages (connections lost and made).
    ///   - onTransaction: called when a call's statement or transaction ends, with its kind
    ///     (`read` or `write`) and how long it took, waiting for a connection included.
    public static func with<T: Sendable>(
        _ location: PostgresLocation, logger: Logger, onTransaction: (@Sendable (String, Duration) -> Void)? = nil,
        _ body: (PostgresStore) async throws -> T
    ) async throws -> T {
        // One connection first: a database that cannot be reached, refuses the user or fails TLS
        // verification is an error now, with its reason (the pool would retry it forever).
        let first = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 0, logger: logger)
        try? await first.close()
        let instanceID = (0..<4).map { _ in String(UInt32.random(in: .min ... .max), radix: 16) }.joined(separator: "-")
        let client = PostgresClient(
            configuration: try location.clientConfiguration(applicationName: applicationName(instanceID)), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            try await PostgresMigrations.apply(on: client, logger: logger)
            let store = PostgresStore(
                client: client, location: location, logger: logger, instanceID: instanceID,
                writeLockKey: try await Self.writeLockKey(client, logger: logger), onTransaction: onTransaction)
            return try await body(store)
        }
    }

    /// This database's write lock key: a random number drawn by the migration that made
    /// `fleetset_keys` (under the migration lock, so instances starting together read the same),
    /// so that no fixed key in fleetset's source names the lock. (Any role connected to the
    /// database sees a held advisory lock's key in `pg_locks`: the protection is that no other
    /// role may connect, see `check-database`.)
    private static func writeLockKey(_ client: PostgresClient, logger: Logger) async throws -> Int64 {
        let rows = try await client.query("SELECT value FROM fleetset_keys WHERE name = 'write-lock'", logger: logger).collect()
        guard let key = try rows.first?.decode(Int64.self) else { throw StoreCorruption(what: "the write lock's key in fleetset_keys") }
        return key
    }

    /// The lock that serialises checked writes across every instance on this database.
    public var writeLock: any SharedWriteLock {
        PostgresWriteLock(client: client, key: writeLockKey, olderInstances: olderInstances, logger: logger)
    }

    // MARK: - Metadata

    public func metadata(app: String) async throws -> StoredMetadata? {
        try await rows("SELECT version, document FROM metadata WHERE app = \(app)").first.map { row in
            let (version, document) = try row.decode((Int, String).self)
            return StoredMetadata(app: app, version: version, document: document)
        }
    }

    /// The names of the schema's migrations, in the order they apply (one row each in
    /// `fleetset_migrations` once applied).
    public static var migrationNames: [String] { PostgresMigrations.all.map(\.name) }

    public func allMetadata() async throws -> [StoredMetadata] {
        try await rows(Self.allMetadataQuery).map(Self.storedMetadata)
    }

    private static let allMetadataQuery: PostgresQuery = #"SELECT app, version, document FROM metadata ORDER BY app COLLATE "C""#

    private static func storedMetadata(_ row: PostgresRow) throws -> StoredMetadata {
        let (app, version, document) = try row.decode((String, Int, String).self)
        return StoredMetadata(app: app, version: version, document: document)
    }

    public func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?, recording change: ChangeRecord) async throws -> Bool {
        try await transaction { connection in
            let current = try await connection.query(
                "SELECT version FROM metadata WHERE app = \(metadata.app) FOR UPDATE", logger: self.logger
            ).collect().first.map { try $0.decode(Int.self) }
            guard current == expectedVersion else { return false }
            if current == nil {
                // Two first uploads racing: the second's insert conflicts and stores nothing.
                let inserted = try await connection.query(
                    """
                    INSERT INTO metadata (app, version, document) VALUES (\(metadata.app), \(metadata.version), \(metadata.document))
                    ON CONFLICT (app) DO NOTHING RETURNING app
                    """, logger: self.logger
                ).collect()
                guard !inserted.isEmpty else { return false }
            } else {
                try await connection.query(
                    "UPDATE metadata SET version = \(metadata.version), document = \(metadata.document) WHERE app = \(metadata.app)",
                    logger: self.logger)
            }
            _ = try await self.append(change, app: metadata.app, on: connection)
            try await self.notify(.values(app: metadata.app, scope: .defaults), on: connection)
            return true
        }
    }

    // MARK: - Values

    public func values(app: String, scope: Scope) async throws -> JSONObject {
        guard let row = try await rows(#"SELECT "values" FROM scoped_values WHERE app = \#(app) AND scope = \#(scope.description)"#).first
        else { return [:] }
        return try StoredText.object(try row.decode(String.self), what: "values of \(app) at \(scope)")
    }

    public func commit(_ write: AppWrite) async throws -> Int64 {
        try await transaction { connection in
            let app = write.app
            if let rollout = write.rollout { try await self.save(rollout, on: connection) }
            for (scope, values) in write.values {
                if values.isEmpty {
                    try await connection.query(
                        "DELETE FROM scoped_values WHERE app = \(app) AND scope = \(scope.description)", logger: self.logger)
                } else {
                    let text = JSONValue.object(values).serialized()
                    try await connection.query(
                        #"""
                        INSERT INTO scoped_values (app, scope, "values") VALUES (\#(app), \#(scope.description), \#(text))
                        ON CONFLICT (app, scope) DO UPDATE SET "values" = EXCLUDED."values"
                        """#, logger: self.logger)
                }
            }
            let number = try await self.append(write.change, app: app, on: connection)
            for scope in write.touchedScopes { try await self.notify(.values(app: app, scope: scope), on: connection) }
            return number
        }
    }

    /// Appends `change` to the app's history as its next number (two writers racing for the same
    /// number: the second's insert fails on the primary key, and its transaction rolls back).
    private func append(_ change: ChangeRecord, app: String, on connection: PostgresConnection) async throws -> Int64 {
        let number =
            (try await connection.query("SELECT max(number) FROM history WHERE app = \(app)", logger: logger).collect().first
                .flatMap { try $0.decode(Int64?.self) } ?? 0) + 1
        try await insert(HistoryEntry(app: app, number: number, change: change), on: connection)
        return number
    }

    private func insert(_ entry: HistoryEntry, on connection: PostgresConnection) async throws {
        let change = entry.change
        try await connection.query(
            """
            INSERT INTO history (app, number, at, actor, message, kind, scopes, metadata_version)
            VALUES (\(entry.app), \(entry.number), \(change.at), \(change.actor), \(change.message), \(change.kind.rawValue),
                \(change.scopesText), \(change.metadataVersion.map(Int64.init)))
            """, logger: logger)
        // history_scopes: filled by the trigger on history (migration v6).
    }

    /// Inserts a new rollout or replaces the version before it.
    private func save(_ rollout: Rollout, on connection: PostgresConnection) async throws {
        if rollout.version == 1 {
            let active = try await connection.query(
                "SELECT 1 FROM rollouts WHERE app = \(rollout.app) AND active", logger: logger
            ).collect()
            guard active.isEmpty else { throw RolloutConflict(app: rollout.app) }
            try await insert(rollout, on: connection)
        } else {
            let updated = try await connection.query(
                """
                UPDATE rollouts SET active = \(rollout.phase.isActive), version = \(rollout.version), document = \(rollout.storedJSON.serialized())
                WHERE id = \(rollout.id) AND version = \(rollout.version - 1) RETURNING 1
                """, logger: logger
            ).collect()
            guard updated.count == 1 else { throw RolloutConflict(app: rollout.app) }
        }
    }

    private func insert(_ rollout: Rollout, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO rollouts (id, app, active, version, started_at, document)
            VALUES (\(rollout.id), \(rollout.app), \(rollout.phase.isActive), \(rollout.version), \(rollout.startedAt),
                \(rollout.storedJSON.serialized()))
            """, logger: logger)
    }

    /// The columns ``historyEntry(_:)`` reads, in its order.
    private static let historyColumns = "app, number, at, actor, message, kind, scopes, metadata_version"

    public func history(app: String, page: HistoryPage) async throws -> [HistoryEntry] {
        // Newest first through the primary key (or the scope's index), then turned around.
        let before = page.before ?? .max
        let limit = page.limit.map(Int64.init)  // NULL: no limit
        let query: PostgresQuery =
            if let scope = page.scope {
                """
                SELECT \(unescaped: Self.historyColumns.split(separator: ", ").map { "h." + $0 }.joined(separator: ", "))
                FROM history_scopes s JOIN history h ON h.app = s.app AND h.number = s.number
                WHERE s.app = \(app) AND s.scope = \(scope.description) AND s.number < \(before) ORDER BY s.number DESC LIMIT \(limit)
                """
            } else {
                """
                SELECT \(unescaped: Self.historyColumns) FROM history WHERE app = \(app) AND number < \(before)
                ORDER BY number DESC LIMIT \(limit)
                """
            }
        return try await rows(query).reversed().map(Self.historyEntry)
    }

    public func historyBase(app: String, through number: Int64) async throws -> HistoryBase {
        try await transaction { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: self.logger)
            let entries = try await connection.query(
                """
                SELECT \(unescaped: Self.historyColumns) FROM history WHERE app = \(app) AND number IN (
                    SELECT max(number) FROM history_scopes WHERE app = \(app) AND number <= \(number) GROUP BY scope)
                ORDER BY number
                """, logger: self.logger
            ).collect().map(Self.historyEntry)
            let row = try await connection.query(
                """
                SELECT EXISTS (SELECT 1 FROM history WHERE app = \(app) AND number = \(number)),
                    coalesce((SELECT max(number) FROM history WHERE app = \(app)), 0),
                    coalesce((SELECT number FROM history_floor WHERE app = \(app)), 1)
                """, logger: self.logger
            ).collect().first
            guard let (isKept, newest, floor) = try row?.decode((Bool, Int64, Int64).self) else {
                throw StoreCorruption(what: "history of \(app)")
            }
            return HistoryBase(number: number, isKept: isKept, newest: newest, floor: floor, entries: entries)
        }
    }

    public func endConsoleSession(id: String, expiresAt: Int64, now: Int64) async throws {
        try await transaction { connection in
            try await connection.query("DELETE FROM ended_console_sessions WHERE expires_at <= \(now)", logger: self.logger)
            try await connection.query(
                """
                INSERT INTO ended_console_sessions (id, expires_at) VALUES (\(id), \(expiresAt))
                ON CONFLICT (id) DO UPDATE SET expires_at = excluded.expires_at
                """, logger: self.logger)
        }
    }

    public func isConsoleSessionEnded(id: String) async throws -> Bool {
        !(try await rows("SELECT 1 FROM ended_console_sessions WHERE id = \(id)").isEmpty)
    }

    public func pruneHistory(app: String, keeping retention: HistoryRetention, now: Int64) async throws -> HistoryPruning {
        try await transaction { connection in
            let newest =
                try await connection.query("SELECT max(number) FROM history WHERE app = \(app)", logger: self.logger).collect().first
                .flatMap { try $0.decode(Int64?.self) } ?? 0
            var oldEnough: Int64?
            if let age = retention.maximumAge {
                oldEnough = try await connection.query(
                    "SELECT max(number) FROM history WHERE app = \(app) AND at < \(now - age)", logger: self.logger
                ).collect().first.flatMap { try $0.decode(Int64?.self) }
            }
            let floor =
                try await connection.query("SELECT number FROM history_floor WHERE app = \(app)", logger: self.logger).collect().first?
                .decode(Int64.self) ?? 0
            guard let (cut, finished) = retention.cut(newest: newest, newestOlderThanAge: oldEnough, floor: floor) else {
                return HistoryPruning(removed: 0, finished: true)
            }
            // Kept at or before the cut: each scope's newest entry, but none for a deleted device.
            try await connection.query(
                """
                DELETE FROM history_scopes WHERE app = \(app) AND number <= \(cut) AND number NOT IN (
                    SELECT max(number) FROM history_scopes WHERE app = \(app) AND number <= \(cut)
                        AND (scope NOT LIKE 'device:%' OR substr(scope, 8) IN (SELECT id FROM devices))
                    GROUP BY scope)
                """, logger: self.logger)
            let removed = try await connection.query(
                """
                DELETE FROM history WHERE app = \(app) AND number <= \(cut)
                    AND number NOT IN (SELECT number FROM history_scopes WHERE app = \(app) AND number <= \(cut))
                RETURNING 1
                """, logger: self.logger
            ).collect().count
            try await connection.query(
                """
                INSERT INTO history_floor (app, number) VALUES (\(app), \(cut))
                ON CONFLICT (app) DO UPDATE SET number = greatest(history_floor.number, excluded.number)
                """, logger: self.logger)
            return HistoryPruning(removed: removed, finished: finished)
        }
    }

    private static func historyEntry(_ row: PostgresRow) throws -> HistoryEntry {
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

    public func rollouts(app: String) async throws -> [Rollout] {
        try await rows("SELECT document FROM rollouts WHERE app = \(app) ORDER BY started_at DESC, id DESC").map {
            try Rollout(storedText: try $0.decode(String.self))
        }
    }

    public func activeRollout(app: String) async throws -> Rollout? {
        try await rows("SELECT document FROM rollouts WHERE app = \(app) AND active").first.map {
            try Rollout(storedText: try $0.decode(String.self))
        }
    }

    public func activeRollouts() async throws -> [Rollout] {
        try await rows(#"SELECT document FROM rollouts WHERE active ORDER BY app COLLATE "C""#).map {
            try Rollout(storedText: try $0.decode(String.self))
        }
    }

    public func valueLayers(app: String, groups: [String], deviceID: String) async throws -> ValueLayers {
        let wanted = [Scope.app.description, Scope.device(deviceID).description] + groups.map { Scope.group($0).description }
        var layers = ValueLayers()
        // One statement, one snapshot: the values and the active rollout (its row tagged by a
        // scope no value has).
        for row in try await rows(
            #"""
            SELECT scope, "values" FROM scoped_values WHERE app = \#(app) AND scope = ANY(\#(wanted))
            UNION ALL SELECT '#rollout', document FROM rollouts WHERE app = \#(app) AND active
            """#)
        {
            let (scopeText, text) = try row.decode((String, String).self)
            if scopeText == "#rollout" {
                layers.rollout = try Rollout(storedText: text)
                continue
            }
            let values = try StoredText.object(text, what: "values of \(app) at \(scopeText)")
            switch Scope(parameter: scopeText) {
            case .app: layers.app = values
            case .group(let name): layers.groups[name] = values
            case .device: layers.device = values
            case .defaults, nil: throw StoreCorruption(what: "scope \(scopeText) of \(app)")
            }
        }
        return layers
    }

    public func allValues(app: String) async throws -> [Scope: JSONObject] {
        var result: [Scope: JSONObject] = [:]
        for row in try await rows(#"SELECT scope, "values" FROM scoped_values WHERE app = \#(app)"#) {
            let (scopeText, text) = try row.decode((String, String).self)
            guard let scope = Scope(parameter: scopeText) else { throw StoreCorruption(what: "scope \(scopeText) of \(app)") }
            result[scope] = try StoredText.object(text, what: "values of \(app) at \(scopeText)")
        }
        return result
    }

    // MARK: - Devices and enrollment

    public func addDevice(_ device: Device) async throws {
        try await transaction { connection in try await self.insert(device, on: connection) }
    }

    private func insert(_ device: Device, enrolledWith attempt: EnrollmentAttempt? = nil, on connection: PostgresConnection) async throws {
        try await insert(device, enrollmentTokenHash: attempt?.tokenHash, requestID: attempt?.requestID, on: connection)
    }

    private func insert(_ device: Device, enrollmentTokenHash: String?, requestID: String?, on connection: PostgresConnection) async throws
    {
        try await connection.query(
            """
            INSERT INTO devices (id, token_hash, apps, "groups", enrolled_at, last_seen_at, disabled, pending_token_hash,
                rotation_requested, enrollment_token_hash, enrollment_request_id)
            VALUES (\(device.id), \(device.tokenHash), \(StoredText.text(device.apps)), \(StoredText.text(device.groups)),
                \(device.enrolledAt), \(device.lastSeenAt), \(device.disabled), \(device.pendingTokenHash), \(device.rotationRequested),
                \(enrollmentTokenHash), \(requestID))
            """, logger: logger)
    }

    /// The columns ``device(_:)`` reads, in its order.
    private static let deviceColumns = """
        id, token_hash, apps, "groups", enrolled_at, last_seen_at, disabled, pending_token_hash, rotation_requested
        """

    public func device(tokenHash: String) async throws -> Device? {
        try await rows(
            "SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE token_hash = \(tokenHash) OR pending_token_hash = \(tokenHash)"
        )
        .first.map(Self.device)
    }

    public func device(id: String) async throws -> Device? {
        try await rows("SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE id = \(id)").first.map(Self.device)
    }

    public func devices() async throws -> [Device] {
        try await rows("SELECT \(unescaped: Self.deviceColumns) FROM devices ORDER BY id COLLATE \"C\"").map(Self.device)
    }

    public func touch(deviceID: String, at time: Int64) async throws {
        _ = try await touch([DeviceSeen(deviceID: deviceID, time: time)])
    }

    public func touch(_ seen: [DeviceSeen]) async throws -> [Void] {
        let ids = seen.map(\.deviceID)
        let times = seen.map(\.time)
        try await write(
            """
            UPDATE devices SET last_seen_at = seen.time FROM unnest(\(ids)::text[], \(times)::int8[]) AS seen(id, time)
            WHERE devices.id = seen.id
            """)
        return seen.map { _ in () }
    }

    public func updateDevice(id: String, _ change: DeviceChange) async throws -> Device? {
        try await transaction { connection in
            guard
                var device = try await connection.query(
                    "SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE id = \(id) FOR UPDATE", logger: self.logger
                ).collect().first.map(Self.device)
            else { return nil }
            if let apps = change.apps { device.apps = apps }
            if let groups = change.groups { device.groups = groups }
            if let disabled = change.disabled { device.disabled = disabled }
            if let requested = change.rotationRequested { device.rotationRequested = requested }
            try await connection.query(
                """
                UPDATE devices SET apps = \(StoredText.text(device.apps)), "groups" = \(StoredText.text(device.groups)),
                    disabled = \(device.disabled), rotation_requested = \(device.rotationRequested) WHERE id = \(id)
                """, logger: self.logger)
            try await self.notify(.device(id), on: connection)
            return device
        }
    }

    public func deleteDevice(id: String) async throws -> Bool {
        try await transaction { connection in
            try await connection.query("DELETE FROM revisions WHERE device_id = \(id)", logger: self.logger)
            try await connection.query("DELETE FROM status_reports WHERE device_id = \(id)", logger: self.logger)
            try await connection.query("DELETE FROM status_history WHERE device_id = \(id)", logger: self.logger)
            try await connection.query("DELETE FROM scoped_values WHERE scope = \(Scope.device(id).description)", logger: self.logger)
            try await connection.query("DELETE FROM device_info WHERE device_id = \(id)", logger: self.logger)
            try await connection.query(
                "DELETE FROM agent_policies WHERE scope = \(PolicyScope.device(id).description)", logger: self.logger)
            let deleted = try await connection.query("DELETE FROM devices WHERE id = \(id) RETURNING id", logger: self.logger).collect()
            try await self.notify(.device(id), on: connection)
            return !deleted.isEmpty
        }
    }

    // MARK: - Device facts and agent policies

    public func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await rows("SELECT device_id, info, updated_at FROM device_info WHERE device_id = \(id)").first.map(Self.storedInfo)
    }

    public func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        var all: [String: StoredDeviceInfo] = [:]
        for row in try await rows("SELECT device_id, info, updated_at FROM device_info") {
            all[try row.decode((String, String, Int64).self).0] = try Self.storedInfo(row)
        }
        return all
    }

    private static func storedInfo(_ row: PostgresRow) throws -> StoredDeviceInfo {
        let (id, text, updatedAt) = try row.decode((String, String, Int64).self)
        return StoredDeviceInfo(info: try StoredText.object(text, what: "facts of device \(id)"), updatedAt: updatedAt)
    }

    public func updateDeviceInfo(
        id: String, at time: Int64, _ update: @escaping @Sendable (JSONObject) throws -> JSONObject
    ) async throws -> JSONObject? {
        try await transaction { connection in
            // The device's row, locked: two reports of one device apply one after the other.
            guard
                !(try await connection.query("SELECT id FROM devices WHERE id = \(id) FOR UPDATE", logger: self.logger).collect().isEmpty)
            else { return nil }
            let before = try await connection.query(
                "SELECT device_id, info, updated_at FROM device_info WHERE device_id = \(id)", logger: self.logger
            ).collect().first.map(Self.storedInfo)
            let after = try update(before?.info ?? [:])
            guard after != before?.info else { return after }
            let text = JSONValue.object(after).serialized()
            try await connection.query(
                """
                INSERT INTO device_info (device_id, info, updated_at) VALUES (\(id), \(text), \(time))
                ON CONFLICT (device_id) DO UPDATE SET info = excluded.info, updated_at = excluded.updated_at
                """, logger: self.logger)
            return after
        }
    }

    public func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        var policies: [PolicyScope: AgentPolicy] = [:]
        for row in try await rows("SELECT scope, policy FROM agent_policies") {
            let (scope, policy) = try Self.scopedPolicy(row)
            policies[scope] = policy
        }
        return policies
    }

    private static func scopedPolicy(_ row: PostgresRow) throws -> (PolicyScope, AgentPolicy) {
        let (text, policyText) = try row.decode((String, String).self)
        guard let scope = PolicyScope(text), let policy = try? AgentPolicy(json: .object(StoredText.object(policyText, what: text))) else {
            throw StoreCorruption(what: "agent policy at \(text)")
        }
        return (scope, policy)
    }

    public func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        try await transaction { connection in
            try await self.setAgentPolicy(policy, scope: scope, on: connection)
            try await self.notify(.policy(scope), on: connection)
        }
    }

    private func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope, on connection: PostgresConnection) async throws {
        let scopeText = scope.description
        guard !policy.isEmpty else {
            try await connection.query("DELETE FROM agent_policies WHERE scope = \(scopeText)", logger: logger)
            return
        }
        let text = policy.json.serialized()
        try await connection.query(
            """
            INSERT INTO agent_policies (scope, policy) VALUES (\(scopeText), \(text))
            ON CONFLICT (scope) DO UPDATE SET policy = excluded.policy
            """, logger: logger)
    }

    public func setPendingToken(deviceID: String, hash: String) async throws {
        try await transaction { connection in
            try await connection.query("UPDATE devices SET pending_token_hash = \(hash) WHERE id = \(deviceID)", logger: self.logger)
            try await self.notify(.device(deviceID), on: connection)
        }
    }

    public func promotePendingToken(deviceID: String, hash: String) async throws -> Device? {
        try await transaction { connection in
            let promoted = try await connection.query(
                """
                UPDATE devices SET token_hash = pending_token_hash, pending_token_hash = NULL, rotation_requested = false
                WHERE id = \(deviceID) AND pending_token_hash = \(hash) RETURNING id
                """, logger: self.logger
            ).collect()
            if !promoted.isEmpty { try await self.notify(.device(deviceID), on: connection) }
            return try await connection.query(
                "SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE id = \(deviceID)", logger: self.logger
            )
            .collect().first.map(Self.device)
        }
    }

    /// The columns ``enrollmentToken(_:)`` reads, in its order.
    private static let tokenColumns = #"hash, id, expires_at, uses_left, apps, "groups""#

    public func addEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try await transaction { connection in try await self.insert(token, on: connection) }
    }

    private func insert(_ token: EnrollmentTokenRecord, on connection: PostgresConnection) async throws {
        try await connection.query(
            """
            INSERT INTO enrollment_tokens (hash, id, expires_at, uses_left, apps, "groups")
            VALUES (\(token.hash), \(token.id), \(token.expiresAt), \(token.usesLeft), \(StoredText.text(token.apps)),
                \(StoredText.text(token.groups)))
            """, logger: logger)
    }

    public func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await rows("SELECT \(unescaped: Self.tokenColumns) FROM enrollment_tokens WHERE hash = \(hash)").first.map(Self.enrollmentToken)
    }

    public func enrollmentTokens() async throws -> [EnrollmentTokenRecord] {
        try await rows("SELECT \(unescaped: Self.tokenColumns) FROM enrollment_tokens ORDER BY id COLLATE \"C\"").map(Self.enrollmentToken)
    }

    public func deleteEnrollmentToken(id: String) async throws -> Bool {
        try await transaction { connection in
            !(try await connection.query("DELETE FROM enrollment_tokens WHERE id = \(id) RETURNING id", logger: self.logger).collect()
                .isEmpty)
        }
    }

    /// One transaction that locks the token's row (`FOR UPDATE`): enrollments with the same
    /// token, on any instance, take turns, so its uses are spent exactly.
    public func enroll(
        _ attempt: EnrollmentAttempt, newTokenHash: String, makeDevice: @escaping @Sendable (_ apps: [String], _ groups: [String]) -> Device
    ) async throws -> EnrollmentOutcome {
        try await transaction { connection -> EnrollmentOutcome in
            guard
                let token = try await connection.query(
                    "SELECT \(unescaped: Self.tokenColumns) FROM enrollment_tokens WHERE hash = \(attempt.tokenHash) FOR UPDATE",
                    logger: self.logger
                ).collect().first.map(Self.enrollmentToken)
            else { return .unknown }
            // A retry of an enrollment whose answer was lost: the same device, with a new token.
            if let earlier = try await connection.query(
                """
                SELECT \(unescaped: Self.deviceColumns) FROM devices WHERE enrollment_token_hash = \(attempt.tokenHash)
                AND enrollment_request_id = \(attempt.requestID) AND enrolled_at >= \(attempt.now - attempt.retryWindow) AND NOT disabled
                """, logger: self.logger
            ).collect().first.map(Self.device) {
                try await connection.query(
                    "UPDATE devices SET token_hash = \(newTokenHash), pending_token_hash = NULL WHERE id = \(earlier.id)",
                    logger: self.logger
                )
                try await self.notify(.device(earlier.id), on: connection)
                var device = earlier
                device.tokenHash = newTokenHash
                device.pendingTokenHash = nil
                return .enrolled(device)
            }
            guard token.expiresAt > attempt.now else { return .expired }
            guard token.usesLeft > 0 else { return .usedUp }
            try await connection.query(
                "UPDATE enrollment_tokens SET uses_left = uses_left - 1 WHERE hash = \(attempt.tokenHash)", logger: self.logger)
            let device = makeDevice(token.apps, token.groups)
            try await self.insert(device, enrolledWith: attempt, on: connection)
            return .enrolled(device)
        }
    }

    // MARK: - Revisions and status

    public func revision(app: String, deviceID: String) async throws -> RevisionState? {
        try await rows("SELECT revision, fingerprint FROM revisions WHERE app = \(app) AND device_id = \(deviceID)").first.map(
            Self.revisionState)
    }

    public func advanceRevision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState {
        if let current = try await revision(app: app, deviceID: deviceID), current.fingerprint == fingerprint {
            return current  // the common case: nothing changed, no write
        }
        return try await advanceRevisions([RevisionAdvance(app: app, deviceID: deviceID, fingerprint: fingerprint)])[0]
    }

    /// One upsert for the whole batch, which locks the rows it touches in a fixed order (app,
    /// device): two instances advancing the same device together make one revision, a revision
    /// never goes back, and two batches never deadlock. Every row is updated, the unchanged ones
    /// to themselves, so that each answer is the row as it is after any concurrent writer
    /// (a snapshot read could see an older one). A batch naming one device twice goes one
    /// advance at a time, in order.
    public func advanceRevisions(_ advances: [RevisionAdvance]) async throws -> [RevisionState] {
        guard !advances.isEmpty else { return [] }
        let keys = advances.map { RevisionKey(app: $0.app, deviceID: $0.deviceID) }
        guard Set(keys).count == keys.count else { return try await advanceOneByOne(advances) }
        let rows = try await transaction { connection in
            try await connection.query(
                """
                INSERT INTO revisions AS r (app, device_id, revision, fingerprint)
                SELECT app, device_id, 1, fingerprint
                FROM unnest(\(advances.map(\.app))::text[], \(advances.map(\.deviceID))::text[],
                    \(advances.map { Int64(bitPattern: $0.fingerprint) })::int8[]) AS input(app, device_id, fingerprint)
                ORDER BY app, device_id
                ON CONFLICT (app, device_id) DO UPDATE
                    SET revision = CASE WHEN r.fingerprint <> EXCLUDED.fingerprint THEN r.revision + 1 ELSE r.revision END,
                        fingerprint = EXCLUDED.fingerprint
                RETURNING app, device_id, revision, fingerprint
                """, logger: self.logger
            ).collect()
        }
        var states: [RevisionKey: RevisionState] = [:]
        for row in rows {
            let (app, deviceID, revision, fingerprint) = try row.decode((String, String, Int64, Int64).self)
            states[RevisionKey(app: app, deviceID: deviceID)] = RevisionState(
                revision: revision, fingerprint: UInt64(bitPattern: fingerprint))
        }
        return try keys.map { key in
            guard let state = states[key] else {
                throw StoreCorruption(what: "revision of \(key.deviceID) for \(key.app) that was just written")
            }
            return state
        }
    }

    private struct RevisionKey: Hashable {
        let app: String
        let deviceID: String
    }

    /// ``advanceRevisions(_:)`` for a batch that names a device more than once: one upsert per
    /// advance, in order, in one transaction.
    private func advanceOneByOne(_ advances: [RevisionAdvance]) async throws -> [RevisionState] {
        try await transaction { connection in
            var states: [RevisionState] = []
            for advance in advances {
                let row = try await connection.query(
                    """
                    INSERT INTO revisions AS r (app, device_id, revision, fingerprint)
                    VALUES (\(advance.app), \(advance.deviceID), 1, \(Int64(bitPattern: advance.fingerprint)))
                    ON CONFLICT (app, device_id) DO UPDATE
                        SET revision = CASE WHEN r.fingerprint <> EXCLUDED.fingerprint THEN r.revision + 1 ELSE r.revision END,
                            fingerprint = EXCLUDED.fingerprint
                    RETURNING revision, fingerprint
                    """, logger: self.logger
                ).collect().first
                guard let row else { throw StoreCorruption(what: "revision that was just written") }
                states.append(try Self.revisionState(row))
            }
            return states
        }
    }

    public func revisions(app: String) async throws -> [String: RevisionState] {
        var result: [String: RevisionState] = [:]
        for row in try await rows("SELECT device_id, revision, fingerprint FROM revisions WHERE app = \(app)") {
            let (deviceID, revision, fingerprint) = try row.decode((String, Int64, Int64).self)
            result[deviceID] = RevisionState(revision: revision, fingerprint: UInt64(bitPattern: fingerprint))
        }
        return result
    }

    public func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws {
        _ = try await recordStatuses([StatusRecord(report: report, app: app, deviceID: deviceID, time: time)])
    }

    public func recordStatuses(_ records: [StatusRecord]) async throws -> [Void] {
        try await write(Self.upsertStatuses(records))
        return records.map { _ in () }
    }

    /// One statement for a batch of reports: the latest of each device and app (of two in the
    /// batch, the later stays), and each report in its history slot (the same rule per slot).
    private static func upsertStatuses(_ records: [StatusRecord]) -> PostgresQuery {
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
                INSERT INTO status_reports (app, device_id, revision, schema_version, state, message, source, received_at)
                SELECT * FROM unnest(\(kept.map(\.app))::text[], \(kept.map(\.deviceID))::text[], \(kept.map(\.report.revision))::int8[],
                    \(kept.map(\.report.schemaVersion))::int8[], \(kept.map(\.report.state.rawValue))::text[], \(kept.map(\.report.message))::text[],
                    \(kept.map(\.report.source.rawValue))::text[], \(kept.map(\.time))::int8[])
                ON CONFLICT (app, device_id) DO UPDATE SET revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version,
                    state = EXCLUDED.state, message = EXCLUDED.message, source = EXCLUDED.source, received_at = EXCLUDED.received_at
                RETURNING 1)
            INSERT INTO status_history (device_id, app, slot, revision, schema_version, state, message, source, received_at)
            SELECT * FROM unnest(\(history.map(\.deviceID))::text[], \(history.map(\.app))::text[],
                \(history.map { StatusHistory.slot(of: $0.report) })::int8[], \(history.map(\.report.revision))::int8[],
                \(history.map(\.report.schemaVersion))::int8[], \(history.map(\.report.state.rawValue))::text[],
                \(history.map(\.report.message))::text[], \(history.map(\.report.source.rawValue))::text[], \(history.map(\.time))::int8[])
            ON CONFLICT (device_id, app, slot) DO UPDATE SET revision = EXCLUDED.revision, schema_version = EXCLUDED.schema_version,
                state = EXCLUDED.state, message = EXCLUDED.message, source = EXCLUDED.source, received_at = EXCLUDED.received_at
            """
    }

    public func recentStatuses(deviceID: String) async throws -> [StatusRecord] {
        try await rows(
            """
            SELECT \(unescaped: Self.statusColumns) FROM status_history WHERE device_id = \(deviceID)
            ORDER BY received_at DESC, app COLLATE "C", revision DESC, source
            """
        ).map(Self.storedStatus).map { StatusRecord(report: $0.report, app: $0.app, deviceID: deviceID, time: $0.receivedAt) }
    }

    public func statusHistory(app: String) async throws -> [StatusRecord] {
        try await rows("SELECT \(unescaped: Self.statusColumns) FROM status_history WHERE app = \(app)").map(Self.storedStatus).map {
            StatusRecord(report: $0.report, app: app, deviceID: $0.deviceID, time: $0.receivedAt)
        }
    }

    /// The columns ``storedStatus(_:)`` reads, in its order.
    private static let statusColumns = "app, device_id, revision, schema_version, state, message, source, received_at"

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        try await rows("SELECT \(unescaped: Self.statusColumns) FROM status_reports WHERE app = \(app) AND device_id = \(deviceID)")
            .first.map(Self.storedStatus).map { ($0.report, $0.receivedAt) }
    }

    public func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)] {
        var result: [String: (report: StatusReport, receivedAt: Int64)] = [:]
        for row in try await rows("SELECT \(unescaped: Self.statusColumns) FROM status_reports WHERE app = \(app)") {
            let stored = try Self.storedStatus(row)
            result[stored.deviceID] = (stored.report, stored.receivedAt)
        }
        return result
    }

    // MARK: - Moving a fleet

    public func snapshot() async throws -> StoreSnapshot {
        try await transaction { connection in
            // One snapshot of the whole database, as a read-only transaction sees it.
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: self.logger)
            var snapshot = StoreSnapshot()
            snapshot.metadata = try await connection.query(Self.allMetadataQuery, logger: self.logger).collect().map(Self.storedMetadata)
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
                "SELECT \(unescaped: Self.deviceColumns), enrollment_token_hash, enrollment_request_id FROM devices ORDER BY id",
                logger: self.logger
            ).collect() {
                let columns = row.makeRandomAccess()
                snapshot.devices.append(
                    .init(
                        device: try Self.device(row), enrollmentTokenHash: try columns["enrollment_token_hash"].decode(String?.self),
                        enrollmentRequestID: try columns["enrollment_request_id"].decode(String?.self)))
            }
            snapshot.enrollmentTokens = try await connection.query(
                "SELECT \(unescaped: Self.tokenColumns) FROM enrollment_tokens ORDER BY id", logger: self.logger
            ).collect().map(Self.enrollmentToken)
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
                "SELECT \(unescaped: Self.statusColumns) FROM status_reports ORDER BY app, device_id", logger: self.logger
            ).collect() {
                let stored = try Self.storedStatus(row)
                snapshot.reports.append(
                    .init(app: stored.app, deviceID: stored.deviceID, report: stored.report, receivedAt: stored.receivedAt))
            }
            snapshot.history = try await connection.query(
                #"SELECT \#(unescaped: Self.historyColumns) FROM history ORDER BY app COLLATE "C", number"#, logger: self.logger
            ).collect().map(Self.historyEntry)
            for row in try await connection.query("SELECT app, number FROM history_floor", logger: self.logger).collect() {
                let (app, floor) = try row.decode((String, Int64).self)
                snapshot.historyFloors[app] = floor
            }
            snapshot.rollouts = try await connection.query("SELECT document FROM rollouts ORDER BY id", logger: self.logger).collect().map {
                try Rollout(storedText: try $0.decode(String.self))
            }
            for row in try await connection.query("SELECT device_id, info, updated_at FROM device_info", logger: self.logger).collect() {
                snapshot.deviceInfo[try row.decode((String, String, Int64).self).0] = try Self.storedInfo(row)
            }
            for row in try await connection.query("SELECT scope, policy FROM agent_policies", logger: self.logger).collect() {
                let (scope, policy) = try Self.scopedPolicy(row)
                snapshot.policies[scope] = policy
            }
            return snapshot
        }
    }

    public func restore(_ snapshot: StoreSnapshot) async throws {
        try await transaction { connection in
            for (table, what) in [
                ("metadata", "metadata"), ("scoped_values", "values"), ("devices", "devices"), ("enrollment_tokens", "enrollment tokens"),
                ("agent_policies", "agent policies"),
            ] {
                let count =
                    try await connection.query("SELECT count(*) FROM \(unescaped: table)", logger: self.logger).collect()
                    .first.map { try $0.decode(Int64.self) } ?? 0
                if count > 0 { throw StoreNotEmpty(holds: "\(count) \(what)") }
            }
            for metadata in snapshot.metadata {
                try await connection.query(
                    "INSERT INTO metadata (app, version, document) VALUES (\(metadata.app), \(metadata.version), \(metadata.document))",
                    logger: self.logger)
            }
            for entry in snapshot.values {
                let text = JSONValue.object(entry.values).serialized()
                try await connection.query(
                    #"INSERT INTO scoped_values (app, scope, "values") VALUES (\#(entry.app), \#(entry.scope.description), \#(text))"#,
                    logger: self.logger)
            }
            for entry in snapshot.devices {
                try await self.insert(
                    entry.device, enrollmentTokenHash: entry.enrollmentTokenHash, requestID: entry.enrollmentRequestID, on: connection)
            }
            for token in snapshot.enrollmentTokens { try await self.insert(token, on: connection) }
            for entry in snapshot.revisions {
                try await connection.query(
                    """
                    INSERT INTO revisions (app, device_id, revision, fingerprint)
                    VALUES (\(entry.app), \(entry.deviceID), \(entry.state.revision), \(Int64(bitPattern: entry.state.fingerprint)))
                    """, logger: self.logger)
            }
            if !snapshot.reports.isEmpty {
                try await connection.query(
                    Self.upsertStatuses(
                        snapshot.reports.map { StatusRecord(report: $0.report, app: $0.app, deviceID: $0.deviceID, time: $0.receivedAt) }),
                    logger: self.logger)
            }
            for entry in snapshot.history { try await self.insert(entry, on: connection) }
            for (app, floor) in snapshot.historyFloors {
                try await connection.query("INSERT INTO history_floor (app, number) VALUES (\(app), \(floor))", logger: self.logger)
            }
            for rollout in snapshot.rollouts { try await self.insert(rollout, on: connection) }
            for (id, stored) in snapshot.deviceInfo {
                let text = JSONValue.object(stored.info).serialized()
                try await connection.query(
                    "INSERT INTO device_info (device_id, info, updated_at) VALUES (\(id), \(text), \(stored.updatedAt))",
                    logger: self.logger)
            }
            for (scope, policy) in snapshot.policies { try await self.setAgentPolicy(policy, scope: scope, on: connection) }
            try await self.notify(.unknown, on: connection)
        }
    }

    /// The object id of the database (its files are `base/<oid>` in the cluster's data folder).
    public func databaseOID() async throws -> Int64 {
        guard let row = try await rows("SELECT oid::int8 FROM pg_database WHERE datname = current_database()").first else {
            throw StoreCorruption(what: "database's own row in pg_database")
        }
        return try row.decode(Int64.self)
    }

    // MARK: - Changes

    /// Sends `change` to the other instances, on `connection` in its transaction (delivered when
    /// it commits, never when it rolls back).
    private func notify(_ change: StoreChange, on connection: PostgresConnection) async throws {
        // Triggers write every change of a table to the feed; "forget everything" has no row of its own.
        if change == .unknown {
            try await connection.query(#"SELECT fleetset_feed('{"unknown": true}'::json)"#, logger: logger)
        }
        // The hint that makes the other instances read the feed now; the payload is what
        // instances of the release before read instead of the feed (during a rolling upgrade).
        let payload = ChangeMessage(from: instanceID, change: change).payload
        try await connection.query("SELECT pg_notify(\(Self.changeChannel), \(payload))", logger: logger)
    }

    // MARK: - Calls

    /// The rows of one statement, run on a connection from the pool.
    private func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await calls.run("read") { try await self.client.query(query, logger: self.logger).collect() }
    }

    /// One statement that writes (its own transaction).
    private func write(_ query: PostgresQuery) async throws {
        _ = try await calls.run("write") { try await self.client.query(query, logger: self.logger).collect().count }
    }

    /// `body` in one transaction on one connection: committed when it returns, rolled back when
    /// it throws.
    ///
    /// - Throws: what `body` threw (not postgres-nio's wrapper of it), or the error of BEGIN,
    ///   COMMIT or ROLLBACK.
    private func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await calls.run("write") {
                try await self.client.withTransaction(logger: self.logger) { connection in try await body(connection) }
            }
        } catch let error as PostgresTransactionError {
            throw error.closureError ?? error
        }
    }

    // MARK: - Decoding

    private static func device(_ row: PostgresRow) throws -> Device {
        let (id, tokenHash, apps, groups, enrolledAt, lastSeenAt, disabled, pendingTokenHash, rotationRequested) = try row.decode(
            (String, String, String, String, Int64, Int64?, Bool, String?, Bool).self)
        return Device(
            id: id, tokenHash: tokenHash, apps: try StoredText.strings(apps, what: "apps of device \(id)"),
            groups: try StoredText.strings(groups, what: "groups of device \(id)"), enrolledAt: enrolledAt, lastSeenAt: lastSeenAt,
            disabled: disabled, pendingTokenHash: pendingTokenHash, rotationRequested: rotationRequested)
    }

    private static func enrollmentToken(_ row: PostgresRow) throws -> EnrollmentTokenRecord {
        let (hash, id, expiresAt, usesLeft, apps, groups) = try row.decode((String, String, Int64, Int, String, String).self)
        return EnrollmentTokenRecord(
            hash: hash, id: id, expiresAt: expiresAt, usesLeft: usesLeft,
            apps: try StoredText.strings(apps, what: "apps of enrollment token \(id)"),
            groups: try StoredText.strings(groups, what: "groups of enrollment token \(id)"))
    }

    private static func revisionState(_ row: PostgresRow) throws -> RevisionState {
        let (revision, fingerprint) = try row.decode((Int64, Int64).self)
        return RevisionState(revision: revision, fingerprint: UInt64(bitPattern: fingerprint))
    }

    private static func storedStatus(_ row: PostgresRow) throws -> (app: String, deviceID: String, report: StatusReport, receivedAt: Int64)
    {
        let (app, deviceID, revision, schemaVersion, stateText, message, sourceText, receivedAt) = try row.decode(
            (String, String, Int64, Int64, String, String, String, Int64).self)
        guard let state = StatusReport.State(rawValue: stateText), let source = StatusReport.Source(rawValue: sourceText) else {
            throw StoreCorruption(what: "status report of \(deviceID) for \(app)")
        }
        let report = StatusReport(revision: revision, schemaVersion: schemaVersion, state: state, message: message, source: source)
        return (app, deviceID, report, receivedAt)
    }
}

extension PostgresStore {
    /// What went wrong with the database, for a log line or a message: postgres-nio's errors
    /// describe themselves only generically (so that no query text or value leaks), so this
    /// names the kind, the server's message (e.g. `database "fleet" does not exist`) and the
    /// underlying cause (a refused connection, a failed certificate check). No query, no value.
    public static func describe(_ error: any Error) -> String {
        guard let error = error as? PSQLError else { return "\(error)" }
        var parts = ["PostgreSQL: \(error.code)"]
        if let message = error.serverInfo?[.message] { parts.append(message) }
        if let underlying = error.underlying { parts.append("\(underlying)") }
        return parts.joined(separator: ": ")
    }
}

extension PostgresStore {
    /// What other roles of the cluster may do on this database that they should not: `CONNECT`
    /// (then they can send NOTIFY on ``changeChannel``, see advisory locks in `pg_locks` and
    /// take them) or `TEMPORARY` granted to PUBLIC, as a new database has by default. Each
    /// finding is one sentence (empty when there is none), with the statements that take them
    /// back (run as the database's owner or a superuser).
    public func privileges() async throws -> (findings: [String], fix: String) {
        try await Self.privileges { try await self.rows($0) }
    }

    /// ``privileges()`` of the database at `location`, on one connection of its own: nothing is
    /// migrated or written (`fleetset-server check-database`).
    public static func privileges(at location: PostgresLocation, logger: Logger) async throws -> (findings: [String], fix: String) {
        let connection = try await PostgresConnection.connect(configuration: try location.connectionConfiguration(), id: 1, logger: logger)
        do {
            let found = try await privileges { try await connection.query($0, logger: logger).collect() }
            try? await connection.close()
            return found
        } catch {
            try? await connection.close()
            throw error
        }
    }

    private static func privileges(_ rows: (PostgresQuery) async throws -> [PostgresRow]) async throws -> (findings: [String], fix: String)
    {
        guard
            let row = try await rows(
                """
                SELECT current_database(), has_database_privilege('public', current_database(), 'CONNECT'),
                    has_database_privilege('public', current_database(), 'TEMPORARY'), quote_ident(current_database()), quote_ident(current_user)
                """
            ).first
        else { return ([], "") }
        let (database, connect, temporary, quotedDatabase, quotedUser) = try row.decode((String, Bool, Bool, String, String).self)
        var findings: [String] = []
        if connect {
            findings.append(
                "PUBLIC may CONNECT to database \(database): any role of the cluster can connect, send NOTIFY on \(changeChannel) and see and take fleetset's advisory locks"
            )
        }
        if temporary { findings.append("PUBLIC may create TEMPORARY tables in database \(database)") }
        return (
            findings,
            "REVOKE CONNECT, TEMPORARY ON DATABASE \(quotedDatabase) FROM PUBLIC; GRANT CONNECT ON DATABASE \(quotedDatabase) TO \(quotedUser);"
        )
    }
}
