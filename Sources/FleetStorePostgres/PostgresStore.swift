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
    public static var migrationNames: [String] { StoreSchema.versions.map(\.name) }

    public func allMetadata() async throws -> [StoredMetadata] {
        try await rows(PostgresRows.allMetadataQuery).map(PostgresRows.storedMetadata)
    }

    // MARK: - Values

    public func values(app: String, scope: Scope) async throws -> JSONObject {
        guard let row = try await rows(#"SELECT "values" FROM scoped_values WHERE app = \#(app) AND scope = \#(scope.description)"#).first
        else { return [:] }
        return try StoredText.object(try row.decode(String.self), what: "values of \(app) at \(scope)")
    }

    public func history(app: String, page: HistoryPage) async throws -> [HistoryEntry] {
        // Newest first through the primary key (or the scope's index), then turned around.
        let before = page.before ?? .max
        let limit = page.limit.map(Int64.init)  // NULL: no limit
        let query: PostgresQuery =
            if let scope = page.scope {
                """
                SELECT \(unescaped: PostgresRows.historyColumns.split(separator: ", ").map { "h." + $0 }.joined(separator: ", "))
                FROM history_scopes s JOIN history h ON h.app = s.app AND h.number = s.number
                WHERE s.app = \(app) AND s.scope = \(scope.description) AND s.number < \(before) ORDER BY s.number DESC LIMIT \(limit)
                """
            } else {
                """
                SELECT \(unescaped: PostgresRows.historyColumns) FROM history WHERE app = \(app) AND number < \(before)
                ORDER BY number DESC LIMIT \(limit)
                """
            }
        return try await rows(query).reversed().map(PostgresRows.historyEntry)
    }

    public func historyBase(app: String, through number: Int64) async throws -> HistoryBase {
        try await transaction { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: self.logger)
            let entries = try await connection.query(
                """
                SELECT \(unescaped: PostgresRows.historyColumns) FROM history WHERE app = \(app) AND number IN (
                    SELECT max(number) FROM history_scopes WHERE app = \(app) AND number <= \(number) GROUP BY scope)
                ORDER BY number
                """, logger: self.logger
            ).collect().map(PostgresRows.historyEntry)
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

    public func device(tokenHash: String) async throws -> Device? {
        try await rows(
            "SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices WHERE token_hash = \(tokenHash) OR pending_token_hash = \(tokenHash)"
        )
        .first.map(PostgresRows.device)
    }

    public func device(id: String) async throws -> Device? {
        try await rows("SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices WHERE id = \(id)").first.map(PostgresRows.device)
    }

    public func devices() async throws -> [Device] {
        try await rows("SELECT \(unescaped: PostgresRows.deviceColumns) FROM devices ORDER BY id COLLATE \"C\"").map(PostgresRows.device)
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

    // MARK: - Device facts and agent policies

    public func deviceInfo(id: String) async throws -> StoredDeviceInfo? {
        try await rows("SELECT device_id, info, updated_at FROM device_info WHERE device_id = \(id)").first.map(PostgresRows.storedInfo)
    }

    public func allDeviceInfo() async throws -> [String: StoredDeviceInfo] {
        try PostgresRows.deviceInfoByID(try await rows("SELECT device_id, info, updated_at FROM device_info"))
    }

    public func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        var policies: [PolicyScope: AgentPolicy] = [:]
        for row in try await rows("SELECT scope, policy FROM agent_policies") {
            let (scope, policy) = try PostgresRows.scopedPolicy(row)
            policies[scope] = policy
        }
        return policies
    }

    public func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? {
        try await rows("SELECT \(unescaped: PostgresRows.tokenColumns) FROM enrollment_tokens WHERE hash = \(hash)").first.map(
            PostgresRows.enrollmentToken)
    }

    public func enrollmentTokens() async throws -> [EnrollmentTokenRecord] {
        try await rows("SELECT \(unescaped: PostgresRows.tokenColumns) FROM enrollment_tokens ORDER BY id COLLATE \"C\"").map(
            PostgresRows.enrollmentToken)
    }

    // MARK: - Revisions and status

    public func revision(app: String, deviceID: String) async throws -> RevisionState? {
        try await rows("SELECT revision, fingerprint FROM revisions WHERE app = \(app) AND device_id = \(deviceID)").first.map(
            PostgresRows.revisionState)
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
                states.append(try PostgresRows.revisionState(row))
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

    public func recordStatuses(_ records: [StatusRecord]) async throws -> [Void] {
        try await write(PostgresRows.upsertStatuses(records))
        return records.map { _ in () }
    }

    public func recentStatuses(deviceID: String) async throws -> [StatusRecord] {
        try await rows(
            """
            SELECT \(unescaped: PostgresRows.statusColumns) FROM status_history WHERE device_id = \(deviceID)
            ORDER BY received_at DESC, app COLLATE "C", revision DESC, source
            """
        ).map(PostgresRows.storedStatus).map { StatusRecord(report: $0.report, app: $0.app, deviceID: deviceID, time: $0.receivedAt) }
    }

    public func statusHistory(app: String) async throws -> [StatusRecord] {
        try await rows("SELECT \(unescaped: PostgresRows.statusColumns) FROM status_history WHERE app = \(app)").map(
            PostgresRows.storedStatus
        ).map {
            StatusRecord(report: $0.report, app: app, deviceID: $0.deviceID, time: $0.receivedAt)
        }
    }

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        try await rows("SELECT \(unescaped: PostgresRows.statusColumns) FROM status_reports WHERE app = \(app) AND device_id = \(deviceID)")
            .first.map(PostgresRows.storedStatus).map { ($0.report, $0.receivedAt) }
    }

    public func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)] {
        var result: [String: (report: StatusReport, receivedAt: Int64)] = [:]
        for row in try await rows("SELECT \(unescaped: PostgresRows.statusColumns) FROM status_reports WHERE app = \(app)") {
            let stored = try PostgresRows.storedStatus(row)
            result[stored.deviceID] = (stored.report, stored.receivedAt)
        }
        return result
    }

    /// The object id of the database (its files are `base/<oid>` in the cluster's data folder).
    public func databaseOID() async throws -> Int64 {
        guard let row = try await rows("SELECT oid::int8 FROM pg_database WHERE datname = current_database()").first else {
            throw StoreCorruption(what: "database's own row in pg_database")
        }
        return try row.decode(Int64.self)
    }

    // MARK: - Calls

    /// The rows of one statement, run on a connection from the pool.
    func rows(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await calls.run("read") { try await self.client.query(query, logger: self.logger).collect() }
    }

    /// One statement that writes (its own transaction).
    private func write(_ query: PostgresQuery) async throws {
        _ = try await calls.run("write") { try await self.client.query(query, logger: self.logger).collect().count }
    }

    /// Runs a transaction script on one connection (see ``PostgresTransaction``). Not cancelled
    /// with the caller: postgres-nio ends a transaction it began either way, but a script cut
    /// short by a cancelled request would roll back a write whose checks already passed.
    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreTransaction) async throws -> T) async throws -> T {
        let logger = logger
        let instanceID = instanceID
        return try await Task {
            try await self.transaction { connection in
                try await body(PostgresTransaction(connection: connection, logger: logger, instanceID: instanceID))
            }
        }.value
    }

    /// `body` in one transaction on one connection: committed when it returns, rolled back when
    /// it throws.
    ///
    /// - Throws: what `body` threw (not postgres-nio's wrapper of it), or the error of BEGIN,
    ///   COMMIT or ROLLBACK.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection) async throws -> T) async throws -> T {
        do {
            return try await calls.run("write") {
                try await self.client.withTransaction(logger: self.logger) { connection in try await body(connection) }
            }
        } catch let error as PostgresTransactionError {
            throw error.closureError ?? error
        }
    }
}
