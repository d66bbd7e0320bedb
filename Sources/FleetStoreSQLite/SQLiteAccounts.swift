import FleetProtocol
import FleetServerCore
import GRDB

/// Accounts, API tokens and the audit trail in SQLite: the SQL once, for the store's reads and
/// its transactions' primitives.
enum SQLiteAccountRows {
    static func accounts(_ db: Database) throws -> [StoredAccount] {
        try String.fetchAll(db, sql: "SELECT document FROM accounts ORDER BY name").map(StoredAccount.init(storedText:))
    }

    static func account(name: String, _ db: Database) throws -> StoredAccount? {
        try String.fetchOne(db, sql: "SELECT document FROM accounts WHERE name = ?", arguments: [name]).map(StoredAccount.init(storedText:))
    }

    static func insertAccount(_ account: StoredAccount, _ db: Database) throws -> Bool {
        try db.execute(
            sql: "INSERT INTO accounts (name, document) VALUES (?, ?) ON CONFLICT (name) DO NOTHING",
            arguments: [account.name, account.storedText])
        return db.changesCount == 1
    }

    static func apiToken(_ row: Row) throws -> StoredAPIToken {
        try StoredAPIToken(storedText: row["document"], hash: row["hash"])
    }

    static func apiTokens(account: String?, _ db: Database) throws -> [StoredAPIToken] {
        let rows =
            if let account {
                try Row.fetchAll(
                    db, sql: "SELECT hash, document FROM api_tokens WHERE account = ? ORDER BY created_at, id", arguments: [account])
            } else {
                try Row.fetchAll(db, sql: "SELECT hash, document FROM api_tokens ORDER BY created_at, id")
            }
        return try rows.map(apiToken)
    }

    static func insertAPIToken(_ token: StoredAPIToken, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO api_tokens (id, hash, account, created_at, document) VALUES (?, ?, ?, ?, ?)",
            arguments: [token.id, token.hash, token.info.account, token.info.createdAt, token.storedText])
    }

    static func auditRecord(_ row: Row) -> AuditRecord {
        AuditRecord(
            sequence: row["sequence"], at: row["at"], actor: row["actor"], action: row["action"], text: row["entry"], hash: row["hash"])
    }

    static func auditRecords(_ query: AuditQuery, _ db: Database) throws -> [AuditRecord] {
        var conditions = ["sequence > ?"]
        var arguments: StatementArguments = [query.after]
        if let since = query.since {
            conditions.append("at >= ?")
            arguments += [since]
        }
        if let actor = query.actor {
            conditions.append("actor = ?")
            arguments += [actor]
        }
        if let action = query.action {
            conditions.append("action = ?")
            arguments += [action]
        }
        arguments += [query.limit]
        return try Row.fetchAll(
            db,
            sql: "SELECT * FROM audit_log WHERE \(conditions.joined(separator: " AND ")) ORDER BY sequence LIMIT ?",
            arguments: arguments
        ).map(auditRecord)
    }

    static func insertAuditRecord(_ record: AuditRecord, _ db: Database) throws {
        try db.execute(
            sql: "INSERT INTO audit_log (sequence, at, actor, action, entry, hash) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [record.sequence, record.at, record.actor, record.action, record.text, record.hash])
    }

    /// Fills the snapshot's accounts, tokens and audit trail.
    static func snapshot(into snapshot: inout StoreSnapshot, _ db: Database) throws {
        snapshot.accounts = try accounts(db)
        snapshot.apiTokens = try Row.fetchAll(db, sql: "SELECT hash, document FROM api_tokens ORDER BY id").map(apiToken)
        snapshot.audit = try Row.fetchAll(db, sql: "SELECT * FROM audit_log ORDER BY sequence").map(auditRecord)
    }
}

extension SQLiteStore {
    public func accounts() async throws -> [StoredAccount] {
        try await read { db in try SQLiteAccountRows.accounts(db) }
    }

    public func account(name: String) async throws -> StoredAccount? {
        try await read { db in try SQLiteAccountRows.account(name: name, db) }
    }

    public func apiToken(hash: String) async throws -> StoredAPIToken? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT hash, document FROM api_tokens WHERE hash = ?", arguments: [hash]).map(
                SQLiteAccountRows.apiToken)
        }
    }

    public func apiTokens(account: String?) async throws -> [StoredAPIToken] {
        try await read { db in try SQLiteAccountRows.apiTokens(account: account, db) }
    }

    public func auditRecords(_ query: AuditQuery) async throws -> [AuditRecord] {
        try await read { db in try SQLiteAccountRows.auditRecords(query, db) }
    }
}

extension SQLiteTransaction {
    func accounts() async throws -> [StoredAccount] {
        try await pool.writeWithoutTransaction { db in try SQLiteAccountRows.accounts(db) }
    }

    func account(name: String) async throws -> StoredAccount? {
        try await pool.writeWithoutTransaction { db in try SQLiteAccountRows.account(name: name, db) }
    }

    func insertAccount(_ account: StoredAccount) async throws -> Bool {
        try await pool.writeWithoutTransaction { db in try SQLiteAccountRows.insertAccount(account, db) }
    }

    func updateAccount(_ account: StoredAccount) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE accounts SET document = ? WHERE name = ?", arguments: [account.storedText, account.name])
        }
    }

    func removeAccount(name: String) async throws -> Bool {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "DELETE FROM api_tokens WHERE account = ?", arguments: [name])
            try db.execute(sql: "DELETE FROM accounts WHERE name = ?", arguments: [name])
            return db.changesCount == 1
        }
    }

    func apiToken(id: String) async throws -> StoredAPIToken? {
        try await pool.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "SELECT hash, document FROM api_tokens WHERE id = ?", arguments: [id]).map(SQLiteAccountRows.apiToken)
        }
    }

    func insertAPIToken(_ token: StoredAPIToken) async throws {
        try await pool.writeWithoutTransaction { db in try SQLiteAccountRows.insertAPIToken(token, db) }
    }

    func updateAPIToken(_ token: StoredAPIToken) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE api_tokens SET document = ? WHERE id = ?", arguments: [token.storedText, token.id])
        }
    }

    func lastAuditRecord() async throws -> AuditRecord? {
        try await pool.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "SELECT * FROM audit_log ORDER BY sequence DESC LIMIT 1").map(SQLiteAccountRows.auditRecord)
        }
    }

    func insertAuditRecord(_ record: AuditRecord) async throws {
        try await pool.writeWithoutTransaction { db in try SQLiteAccountRows.insertAuditRecord(record, db) }
    }

    func insertOneTimeValue(key: String, value: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "DELETE FROM one_time_values WHERE expires_at <= ?", arguments: [now])
            try db.execute(
                sql: "INSERT INTO one_time_values (key, value, expires_at) VALUES (?, ?, ?) ON CONFLICT (key) DO NOTHING",
                arguments: [key, value, expiresAt])
            return db.changesCount == 1
        }
    }

    func takeOneTimeValue(key: String, now: Int64) async throws -> String? {
        try await pool.writeWithoutTransaction { db in
            let kept = try Row.fetchOne(db, sql: "SELECT value, expires_at FROM one_time_values WHERE key = ?", arguments: [key])
            try db.execute(sql: "DELETE FROM one_time_values WHERE key = ?", arguments: [key])
            guard let kept, (kept["expires_at"] as Int64) > now else { return nil }
            return kept["value"] as String
        }
    }
}
