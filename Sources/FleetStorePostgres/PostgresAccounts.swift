import FleetProtocol
import FleetServerCore
import PostgresNIO

/// Accounts, API tokens and the audit trail in PostgreSQL: the SQL once, for the store's reads
/// and its transactions' primitives.
enum PostgresAccountRows {
    static let accountsQuery: PostgresQuery = #"SELECT document FROM accounts ORDER BY name COLLATE "C""#

    static func account(_ row: PostgresRow) throws -> StoredAccount {
        try StoredAccount(storedText: try row.decode(String.self))
    }

    static func apiToken(_ row: PostgresRow) throws -> StoredAPIToken {
        let (hash, document) = try row.decode((String, String).self)
        return try StoredAPIToken(storedText: document, hash: hash)
    }

    static func apiTokensQuery(account: String?) -> PostgresQuery {
        if let account {
            return "SELECT hash, document FROM api_tokens WHERE account = \(account) ORDER BY created_at, id COLLATE \"C\""
        }
        return #"SELECT hash, document FROM api_tokens ORDER BY created_at, id COLLATE "C""#
    }

    static let auditColumns = "sequence, at, actor, action, entry, hash"

    static func auditRecord(_ row: PostgresRow) throws -> AuditRecord {
        let (sequence, at, actor, action, entry, hash) = try row.decode((Int64, Int64, String, String, String, String).self)
        return AuditRecord(sequence: sequence, at: at, actor: actor, action: action, text: entry, hash: hash)
    }

    static func auditQuery(_ query: AuditQuery) -> PostgresQuery {
        // Absent filters compare with NULL: one statement for every combination.
        """
        SELECT \(unescaped: auditColumns) FROM audit_log
        WHERE sequence > \(query.after) AND (\(query.since)::BIGINT IS NULL OR at >= \(query.since))
            AND (\(query.actor)::TEXT IS NULL OR actor = \(query.actor)) AND (\(query.action)::TEXT IS NULL OR action = \(query.action))
        ORDER BY sequence LIMIT \(query.limit)
        """
    }

    static func insertAudit(_ record: AuditRecord) -> PostgresQuery {
        """
        INSERT INTO audit_log (sequence, at, actor, action, entry, hash)
        VALUES (\(record.sequence), \(record.at), \(record.actor), \(record.action), \(record.text), \(record.hash))
        """
    }

    static func insertAPIToken(_ token: StoredAPIToken) -> PostgresQuery {
        """
        INSERT INTO api_tokens (id, hash, account, created_at, document)
        VALUES (\(token.id), \(token.hash), \(token.info.account), \(token.info.createdAt), \(token.storedText))
        """
    }
}

extension PostgresStore {
    public func accounts() async throws -> [StoredAccount] {
        try await rows(PostgresAccountRows.accountsQuery).map(PostgresAccountRows.account)
    }

    public func account(name: String) async throws -> StoredAccount? {
        try await rows("SELECT document FROM accounts WHERE name = \(name)").first.map(PostgresAccountRows.account)
    }

    public func apiToken(hash: String) async throws -> StoredAPIToken? {
        try await rows("SELECT hash, document FROM api_tokens WHERE hash = \(hash)").first.map(PostgresAccountRows.apiToken)
    }

    public func apiTokens(account: String?) async throws -> [StoredAPIToken] {
        try await rows(PostgresAccountRows.apiTokensQuery(account: account)).map(PostgresAccountRows.apiToken)
    }

    public func auditRecords(_ query: AuditQuery) async throws -> [AuditRecord] {
        try await rows(PostgresAccountRows.auditQuery(query)).map(PostgresAccountRows.auditRecord)
    }
}

extension PostgresTransaction {
    private func query(_ query: PostgresQuery) async throws -> [PostgresRow] {
        try await connection.query(query, logger: logger).collect()
    }

    func accounts() async throws -> [StoredAccount] {
        try await query(#"SELECT document FROM accounts ORDER BY name COLLATE "C" FOR UPDATE"#).map(PostgresAccountRows.account)
    }

    func account(name: String) async throws -> StoredAccount? {
        try await query("SELECT document FROM accounts WHERE name = \(name) FOR UPDATE").first.map(PostgresAccountRows.account)
    }

    func insertAccount(_ account: StoredAccount) async throws -> Bool {
        try await !query(
            """
            INSERT INTO accounts (name, document) VALUES (\(account.name), \(account.storedText))
            ON CONFLICT (name) DO NOTHING RETURNING name
            """
        ).isEmpty
    }

    func updateAccount(_ account: StoredAccount) async throws {
        _ = try await query("UPDATE accounts SET document = \(account.storedText) WHERE name = \(account.name)")
    }

    func removeAccount(name: String) async throws -> Bool {
        _ = try await query("DELETE FROM api_tokens WHERE account = \(name)")
        return try await !query("DELETE FROM accounts WHERE name = \(name) RETURNING name").isEmpty
    }

    func apiToken(id: String) async throws -> StoredAPIToken? {
        try await query("SELECT hash, document FROM api_tokens WHERE id = \(id) FOR UPDATE").first.map(PostgresAccountRows.apiToken)
    }

    func insertAPIToken(_ token: StoredAPIToken) async throws {
        _ = try await query(PostgresAccountRows.insertAPIToken(token))
    }

    func updateAPIToken(_ token: StoredAPIToken) async throws {
        _ = try await query("UPDATE api_tokens SET document = \(token.storedText) WHERE id = \(token.id)")
    }

    func lastAuditRecord() async throws -> AuditRecord? {
        try await query("SELECT \(unescaped: PostgresAccountRows.auditColumns) FROM audit_log ORDER BY sequence DESC LIMIT 1 FOR UPDATE")
            .first.map(PostgresAccountRows.auditRecord)
    }

    func insertAuditRecord(_ record: AuditRecord) async throws {
        _ = try await query(PostgresAccountRows.insertAudit(record))
    }

    func insertOneTimeValue(key: String, value: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        _ = try await query("DELETE FROM one_time_values WHERE expires_at <= \(now)")
        return try await !query(
            """
            INSERT INTO one_time_values (key, value, expires_at) VALUES (\(key), \(value), \(expiresAt))
            ON CONFLICT (key) DO NOTHING RETURNING key
            """
        ).isEmpty
    }

    func takeOneTimeValue(key: String, now: Int64) async throws -> String? {
        let taken = try await query("DELETE FROM one_time_values WHERE key = \(key) RETURNING value, expires_at").first
        guard let (value, expiresAt) = try taken?.decode((String, Int64).self), expiresAt > now else { return nil }
        return value
    }
}

extension PostgresAccountRows {
    /// Fills the snapshot's accounts, tokens and audit trail, on the snapshot's connection.
    static func snapshot(into snapshot: inout StoreSnapshot, _ connection: PostgresConnection, logger: Logger) async throws {
        snapshot.accounts = try await connection.query(accountsQuery, logger: logger).collect().map(account)
        snapshot.apiTokens = try await connection.query(#"SELECT hash, document FROM api_tokens ORDER BY id COLLATE "C""#, logger: logger)
            .collect().map(apiToken)
        snapshot.audit = try await connection.query("SELECT \(unescaped: auditColumns) FROM audit_log ORDER BY sequence", logger: logger)
            .collect().map(auditRecord)
    }
}
