import FleetJSON
import FleetProtocol
import FleetServerCore
import GRDB

extension SQLiteStore {
    /// The schema: one migration per version of ``StoreSchema`` (the one version list of every
    /// store), recorded by its name; never edit a migration that has shipped.
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration(Self.version(1).name) { db in
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
        migrator.registerMigration(Self.version(2).name) { db in
            try db.execute(
                sql: """
                    ALTER TABLE devices ADD COLUMN apps TEXT NOT NULL DEFAULT '[]';
                    ALTER TABLE devices ADD COLUMN disabled INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE devices ADD COLUMN pending_token_hash TEXT;
                    ALTER TABLE devices ADD COLUMN rotation_requested INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE devices ADD COLUMN enrollment_token_hash TEXT;
                    ALTER TABLE devices ADD COLUMN enrollment_request_id TEXT;
                    CREATE UNIQUE INDEX devices_pending_token ON devices (pending_token_hash);
                    CREATE UNIQUE INDEX devices_enrollment_request ON devices (enrollment_token_hash, enrollment_request_id);
                    ALTER TABLE enrollment_tokens ADD COLUMN id TEXT;
                    ALTER TABLE enrollment_tokens ADD COLUMN apps TEXT NOT NULL DEFAULT '[]';
                    UPDATE enrollment_tokens SET id = 'et-' || substr(hash, 1, 16);
                    -- Devices and tokens from before apps were named keep every app stored now.
                    UPDATE devices SET apps = (SELECT coalesce(json_group_array(app), '[]') FROM (SELECT app FROM metadata ORDER BY app));
                    UPDATE enrollment_tokens SET apps = (SELECT coalesce(json_group_array(app), '[]') FROM (SELECT app FROM metadata ORDER BY app));
                    CREATE UNIQUE INDEX enrollment_tokens_id ON enrollment_tokens (id);
                    """)
        }
        migrator.registerMigration(Self.version(3).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE status_history (
                        device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE, app TEXT NOT NULL, slot INTEGER NOT NULL,
                        revision INTEGER NOT NULL, schema_version INTEGER NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
                        source TEXT NOT NULL, received_at INTEGER NOT NULL, PRIMARY KEY (device_id, app, slot));
                    """)
        }
        migrator.registerMigration(Self.version(4).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE history (
                        app TEXT NOT NULL, number INTEGER NOT NULL, at INTEGER NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
                        kind TEXT NOT NULL, scopes TEXT NOT NULL, metadata_version INTEGER, PRIMARY KEY (app, number));
                    CREATE TABLE rollouts (
                        id TEXT PRIMARY KEY, app TEXT NOT NULL, active INTEGER NOT NULL, version INTEGER NOT NULL,
                        started_at INTEGER NOT NULL, document TEXT NOT NULL);
                    CREATE UNIQUE INDEX rollouts_active ON rollouts (app) WHERE active = 1;
                    CREATE INDEX rollouts_app ON rollouts (app, started_at);
                    """)
            // What is stored now becomes each app's first entry, so that a revert can go back to it.
            let now = try Int64.fetchOne(db, sql: "SELECT CAST(strftime('%s', 'now') AS INTEGER)") ?? 0
            for metadata in try SQLiteRows.allMetadata(db) {
                let scopes = try Row.fetchAll(
                    db, sql: #"SELECT scope, "values" FROM scoped_values WHERE app = ? ORDER BY scope"#, arguments: [metadata.app]
                ).map { row -> ChangeRecord.ScopeChange in
                    let scopeText: String = row["scope"]
                    guard let scope = Scope(parameter: scopeText) else {
                        throw StoreCorruption(what: "scope \(scopeText) of \(metadata.app)")
                    }
                    let values = try StoredText.object(row["values"], what: "values of \(metadata.app) at \(scopeText)")
                    return ChangeRecord.ScopeChange(scope: scope, patch: values, after: values)
                }
                // The history row alone: the tables of later migrations (history_scopes) are not there yet.
                try SQLiteRows.insertHistoryRow(
                    HistoryEntry(
                        app: metadata.app, number: 1,
                        change: ChangeRecord(
                            at: now, actor: "server", message: "what was stored when the history began", kind: .initial, scopes: scopes,
                            metadataVersion: metadata.version)), db)
            }
        }
        migrator.registerMigration(Self.version(5).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE device_info (
                        device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE, info TEXT NOT NULL,
                        updated_at INTEGER NOT NULL);
                    CREATE TABLE agent_policies (scope TEXT PRIMARY KEY, policy TEXT NOT NULL);
                    """)
        }
        migrator.registerMigration(Self.version(6).name) {
            db in
            try db.execute(
                sql: """
                    CREATE TABLE history_scopes (
                        app TEXT NOT NULL, scope TEXT NOT NULL, number INTEGER NOT NULL, PRIMARY KEY (app, scope, number));
                    CREATE INDEX history_scopes_number ON history_scopes (app, number);
                    INSERT OR IGNORE INTO history_scopes (app, scope, number)
                        SELECT h.app, json_extract(j.value, '$.scope'), h.number FROM history h, json_each(h.scopes) j;
                    CREATE INDEX history_at ON history (app, at);
                    CREATE TABLE history_floor (app TEXT PRIMARY KEY, number INTEGER NOT NULL);
                    CREATE TABLE ended_console_sessions (id TEXT PRIMARY KEY, expires_at INTEGER NOT NULL);
                    """)
        }
        // The change feed and the write lock's key are PostgreSQL's (no other instance shares a
        // SQLite file), and history_scopes is written with each entry (SQLiteRows.insertHistory).
        migrator.registerMigration(Self.version(7).name) { _ in }
        // An account and an API token are documents (what sign-in adds later needs no
        // migration); the columns beside them are what is looked up and ordered by.
        migrator.registerMigration(Self.version(8).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE accounts (name TEXT PRIMARY KEY, document TEXT NOT NULL);
                    CREATE TABLE api_tokens (
                        id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, account TEXT NOT NULL, created_at INTEGER NOT NULL,
                        document TEXT NOT NULL);
                    CREATE INDEX api_tokens_account ON api_tokens (account, created_at);
                    CREATE TABLE audit_log (
                        sequence INTEGER PRIMARY KEY, at INTEGER NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL,
                        entry TEXT NOT NULL, hash TEXT NOT NULL);
                    CREATE INDEX audit_log_at ON audit_log (at);
                    CREATE INDEX audit_log_actor ON audit_log (actor, sequence);
                    CREATE INDEX audit_log_action ON audit_log (action, sequence);
                    """)
        }
        migrator.registerMigration(Self.version(9).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE one_time_values (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at INTEGER NOT NULL);
                    CREATE INDEX one_time_values_expiry ON one_time_values (expires_at);
                    """)
        }
        // A message's attempts, results and body are its document; the columns are what an
        // instance claims due entries by.
        migrator.registerMigration(Self.version(10).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE webhook_subscriptions (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, document TEXT NOT NULL);
                    CREATE TABLE webhook_outbox (
                        sequence INTEGER PRIMARY KEY, subscription TEXT NOT NULL REFERENCES webhook_subscriptions (id),
                        state TEXT NOT NULL, next_at INTEGER NOT NULL, claimed_until INTEGER, document TEXT NOT NULL);
                    CREATE INDEX webhook_outbox_due ON webhook_outbox (state, next_at);
                    CREATE INDEX webhook_outbox_subscription ON webhook_outbox (subscription, sequence);
                    CREATE TABLE webhook_outbox_counter (id INTEGER PRIMARY KEY CHECK (id = 1), last INTEGER NOT NULL);
                    INSERT INTO webhook_outbox_counter (id, last) VALUES (1, 0);
                    """)
        }
        // A definition is its query as a document; the members are the devices' groups. A
        // report's detail (restored-after-local-edit) beside its state.
        migrator.registerMigration(Self.version(11).name) { db in
            try db.execute(
                sql: """
                    CREATE TABLE group_definitions (name TEXT PRIMARY KEY, document TEXT NOT NULL);
                    ALTER TABLE status_reports ADD COLUMN detail TEXT;
                    ALTER TABLE status_history ADD COLUMN detail TEXT;
                    """)
        }
        precondition(StoreSchema.current.number == 11, "a new StoreSchema version needs its SQLite migration")
        return migrator
    }

    /// The version numbered `number` of the one version list.
    private static func version(_ number: Int) -> StoreSchema.Version { StoreSchema.versions[number - 1] }
}
