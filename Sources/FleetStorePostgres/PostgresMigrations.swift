import FleetServerCore
import Logging
import PostgresNIO

/// The PostgreSQL schema: the DDL of each version of ``StoreSchema`` (the one version list of
/// every store); never edit a migration that has shipped.
///
/// ``apply(on:logger:)`` runs in one transaction that first takes a transaction-scoped advisory
/// lock: instances starting together wait for each other, and the second finds the migrations
/// applied by the first. A migration that fails rolls back whole (PostgreSQL's DDL is
/// transactional), leaving the database as it was.
enum PostgresMigrations {
    /// The advisory lock key of migrations (distinct from ``PostgresWriteLock/key``).
    static let lockKey: Int64 = 0x666c_6565_7473_0001

    /// Each version's statements, by ``StoreSchema/Version/number``.
    static let statements: [Int: String] = [
        1: #"""
        CREATE TABLE metadata (app TEXT PRIMARY KEY, version INTEGER NOT NULL, document TEXT NOT NULL);
        CREATE TABLE scoped_values (app TEXT NOT NULL, scope TEXT NOT NULL, "values" TEXT NOT NULL, PRIMARY KEY (app, scope));
        CREATE INDEX scoped_values_scope ON scoped_values (scope);
        CREATE TABLE devices (
            id TEXT PRIMARY KEY, token_hash TEXT NOT NULL UNIQUE, apps TEXT NOT NULL, "groups" TEXT NOT NULL,
            enrolled_at BIGINT NOT NULL, last_seen_at BIGINT, disabled BOOLEAN NOT NULL DEFAULT false,
            pending_token_hash TEXT UNIQUE, rotation_requested BOOLEAN NOT NULL DEFAULT false,
            enrollment_token_hash TEXT, enrollment_request_id TEXT,
            UNIQUE (enrollment_token_hash, enrollment_request_id));
        CREATE TABLE enrollment_tokens (
            hash TEXT PRIMARY KEY, id TEXT NOT NULL UNIQUE, expires_at BIGINT NOT NULL, uses_left INTEGER NOT NULL,
            apps TEXT NOT NULL, "groups" TEXT NOT NULL);
        CREATE TABLE revisions (
            app TEXT NOT NULL, device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            revision BIGINT NOT NULL, fingerprint BIGINT NOT NULL, PRIMARY KEY (app, device_id));
        CREATE INDEX revisions_device ON revisions (device_id);
        CREATE TABLE status_reports (
            app TEXT NOT NULL, device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
            revision BIGINT NOT NULL, schema_version BIGINT NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
            source TEXT NOT NULL, received_at BIGINT NOT NULL, PRIMARY KEY (app, device_id));
        CREATE INDEX status_reports_device ON status_reports (device_id);
        """#,
        // Version 2 (devices confined to apps, token rotation, idempotent enrollment, token ids) is
        // in version 1's tables: PostgreSQL support began after it.
        2: "",
        3: #"""
        CREATE TABLE status_history (
            device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE, app TEXT NOT NULL, slot BIGINT NOT NULL,
            revision BIGINT NOT NULL, schema_version BIGINT NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
            source TEXT NOT NULL, received_at BIGINT NOT NULL, PRIMARY KEY (device_id, app, slot));
        """#,
        4: #"""
        CREATE TABLE history (
            app TEXT NOT NULL, number BIGINT NOT NULL, at BIGINT NOT NULL, actor TEXT NOT NULL, message TEXT NOT NULL,
            kind TEXT NOT NULL, scopes TEXT NOT NULL, metadata_version BIGINT, PRIMARY KEY (app, number));
        CREATE TABLE rollouts (
            id TEXT PRIMARY KEY, app TEXT NOT NULL, active BOOLEAN NOT NULL, version BIGINT NOT NULL,
            started_at BIGINT NOT NULL, document TEXT NOT NULL);
        CREATE UNIQUE INDEX rollouts_active ON rollouts (app) WHERE active;
        CREATE INDEX rollouts_app ON rollouts (app, started_at);
        -- What is stored now becomes each app's first entry, so that a revert can go back to it.
        INSERT INTO history (app, number, at, actor, message, kind, scopes, metadata_version)
        SELECT m.app, 1, extract(epoch FROM now())::bigint, 'server', 'what was stored when the history began', 'initial',
            coalesce((SELECT json_agg(json_build_object('scope', v.scope, 'patch', v."values"::json, 'after', v."values"::json)
                ORDER BY v.scope) FROM scoped_values v WHERE v.app = m.app), '[]'::json)::text,
            m.version
        FROM metadata m;
        """#,
        5: #"""
        CREATE TABLE device_info (
            device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE, info TEXT NOT NULL, updated_at BIGINT NOT NULL);
        CREATE TABLE agent_policies (scope TEXT PRIMARY KEY, policy TEXT NOT NULL);
        """#,
        6: #"""
        CREATE TABLE history_scopes (app TEXT NOT NULL, scope TEXT NOT NULL, number BIGINT NOT NULL, PRIMARY KEY (app, scope, number));
        CREATE INDEX history_scopes_number ON history_scopes (app, number);
        INSERT INTO history_scopes (app, scope, number)
            SELECT DISTINCT h.app, j->>'scope', h.number FROM history h, json_array_elements(h.scopes::json) j;
        CREATE INDEX history_at ON history (app, at);
        CREATE TABLE history_floor (app TEXT PRIMARY KEY, number BIGINT NOT NULL);
        CREATE TABLE ended_console_sessions (id TEXT PRIMARY KEY, expires_at BIGINT NOT NULL);
        """#,
        // One row per change, written by triggers in the writing transaction (whichever
        // release of fleetset-server wrote it): instances read the rows after the last they
        // saw, and take a NOTIFY on the channel only as a hint to do so. `origin` is the
        // writing connection's application_name, which names the instance. The key is drawn
        // here, under the migration lock, so instances starting together agree on it. The
        // history's scopes are indexed by a trigger too, so that entries an instance of the
        // release before writes during a rolling upgrade are paged, reverted to and kept.
        // (Statements are split at ";" before a line break: the function bodies keep theirs on one line.)
        7: #"""
        CREATE TABLE change_feed (id BIGSERIAL PRIMARY KEY, origin TEXT NOT NULL, change TEXT NOT NULL, at BIGINT NOT NULL);
        CREATE TABLE fleetset_keys (name TEXT PRIMARY KEY, value BIGINT NOT NULL);
        INSERT INTO fleetset_keys (name, value) VALUES ('write-lock', 1 + floor(random() * 9.0e18)::bigint);
        CREATE FUNCTION fleetset_index_history() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN INSERT INTO history_scopes (app, scope, number) SELECT DISTINCT NEW.app, j->>'scope', NEW.number FROM json_array_elements(NEW.scopes::json) j ON CONFLICT DO NOTHING; RETURN NULL; END $f$;
        CREATE TRIGGER history_scopes AFTER INSERT ON history FOR EACH ROW EXECUTE FUNCTION fleetset_index_history();
        CREATE FUNCTION fleetset_feed(change json) RETURNS void LANGUAGE sql AS $f$ INSERT INTO change_feed (origin, change, at) VALUES (current_setting('application_name'), change::text, extract(epoch FROM now())::bigint) $f$;
        CREATE FUNCTION fleetset_feed_values() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN IF TG_OP = 'DELETE' THEN PERFORM fleetset_feed(json_build_object('app', OLD.app, 'scope', OLD.scope)); ELSE PERFORM fleetset_feed(json_build_object('app', NEW.app, 'scope', NEW.scope)); END IF; RETURN NULL; END $f$;
        CREATE FUNCTION fleetset_feed_metadata() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN PERFORM fleetset_feed(json_build_object('app', NEW.app, 'scope', 'defaults')); RETURN NULL; END $f$;
        CREATE FUNCTION fleetset_feed_rollouts() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN PERFORM fleetset_feed(json_build_object('app', NEW.app, 'scope', 'app')); RETURN NULL; END $f$;
        CREATE FUNCTION fleetset_feed_devices() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN IF TG_OP = 'DELETE' THEN PERFORM fleetset_feed(json_build_object('device', OLD.id)); ELSE PERFORM fleetset_feed(json_build_object('device', NEW.id)); END IF; RETURN NULL; END $f$;
        CREATE FUNCTION fleetset_feed_policies() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN IF TG_OP = 'DELETE' THEN PERFORM fleetset_feed(json_build_object('policy', OLD.scope)); ELSE PERFORM fleetset_feed(json_build_object('policy', NEW.scope)); END IF; RETURN NULL; END $f$;
        CREATE TRIGGER change_feed AFTER INSERT OR UPDATE OR DELETE ON scoped_values FOR EACH ROW EXECUTE FUNCTION fleetset_feed_values();
        CREATE TRIGGER change_feed AFTER INSERT OR UPDATE ON metadata FOR EACH ROW EXECUTE FUNCTION fleetset_feed_metadata();
        CREATE TRIGGER change_feed AFTER INSERT OR UPDATE ON rollouts FOR EACH ROW EXECUTE FUNCTION fleetset_feed_rollouts();
        CREATE TRIGGER change_feed AFTER UPDATE OF token_hash, pending_token_hash, apps, "groups", disabled, rotation_requested OR DELETE ON devices FOR EACH ROW EXECUTE FUNCTION fleetset_feed_devices();
        CREATE TRIGGER change_feed AFTER INSERT OR UPDATE OR DELETE ON agent_policies FOR EACH ROW EXECUTE FUNCTION fleetset_feed_policies();
        """#,
        // An account and an API token are documents (what sign-in adds later needs no
        // migration); the columns beside them are what is looked up and ordered by.
        8: #"""
        CREATE TABLE accounts (name TEXT PRIMARY KEY, document TEXT NOT NULL);
        CREATE TABLE api_tokens (
            id TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, account TEXT NOT NULL, created_at BIGINT NOT NULL, document TEXT NOT NULL);
        CREATE INDEX api_tokens_account ON api_tokens (account, created_at);
        CREATE TABLE audit_log (
            sequence BIGINT PRIMARY KEY, at BIGINT NOT NULL, actor TEXT NOT NULL, action TEXT NOT NULL, entry TEXT NOT NULL,
            hash TEXT NOT NULL);
        CREATE INDEX audit_log_at ON audit_log (at);
        CREATE INDEX audit_log_actor ON audit_log (actor, sequence);
        CREATE INDEX audit_log_action ON audit_log (action, sequence);
        """#,
        9: #"""
        CREATE TABLE one_time_values (key TEXT PRIMARY KEY, value TEXT NOT NULL, expires_at BIGINT NOT NULL);
        CREATE INDEX one_time_values_expiry ON one_time_values (expires_at);
        """#,
        // A message's attempts, results and body are its document; the columns are what an
        // instance claims due entries by.
        10: #"""
        CREATE TABLE webhook_subscriptions (id TEXT PRIMARY KEY, created_at BIGINT NOT NULL, document TEXT NOT NULL);
        CREATE TABLE webhook_outbox (
            sequence BIGINT PRIMARY KEY, subscription TEXT NOT NULL REFERENCES webhook_subscriptions (id), state TEXT NOT NULL,
            next_at BIGINT NOT NULL, claimed_until BIGINT, document TEXT NOT NULL);
        CREATE INDEX webhook_outbox_due ON webhook_outbox (state, next_at);
        CREATE INDEX webhook_outbox_subscription ON webhook_outbox (subscription, sequence);
        CREATE SEQUENCE webhook_outbox_sequence;
        """#,
        // A definition is its query as a document; the members are the devices' groups. A
        // report's detail (restored-after-local-edit) beside its state.
        11: #"""
        CREATE TABLE group_definitions (name TEXT PRIMARY KEY, document TEXT NOT NULL);
        ALTER TABLE status_reports ADD COLUMN detail TEXT;
        ALTER TABLE status_history ADD COLUMN detail TEXT;
        """#,
    ]

    /// The names the releases before the one version list recorded, with the versions of
    /// ``StoreSchema`` each stands for: a database they migrated has those versions.
    static let namesBefore: [String: [Int]] = [
        "v1: metadata, values, devices, enrollment tokens, revisions, status": [1, 2],
        "v2: recent status reports": [3],
        "v3: history of writes, rollouts": [4],
        "v4: device facts, agent policies": [5],
        "v5: history paged and pruned (the scopes each entry wrote, each app's floor); ended console sessions": [6],
        "v6: the change feed as a table, the write lock's key of this database, the history's scopes indexed by a trigger": [7],
    ]

    /// The versions a database has, from the names in its `fleetset_migrations`.
    static func versions(recorded names: some Sequence<String>) -> Set<Int> {
        let byName = Dictionary(uniqueKeysWithValues: StoreSchema.versions.map { ($0.name, $0.number) })
        return names.reduce(into: Set<Int>()) { versions, name in
            if let number = byName[name] { versions.insert(number) }
            versions.formUnion(namesBefore[name] ?? [])
        }
    }

    /// Applies the versions the database does not have yet; returns the names of those it applied.
    @discardableResult
    static func apply(on client: PostgresClient, logger: Logger) async throws -> [String] {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS fleetset_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                logger: logger)
            var recorded: [String] = []
            for row in try await connection.query("SELECT name FROM fleetset_migrations", logger: logger).collect() {
                recorded.append(try row.decode(String.self))
            }
            let done = versions(recorded: recorded)
            var applied: [String] = []
            for version in StoreSchema.versions where !done.contains(version.number) {
                // One statement at a time: the extended protocol takes one per query.
                for statement in (statements[version.number] ?? "").split(separator: ";\n") where !statement.allSatisfy(\.isWhitespace) {
                    try await connection.query(PostgresQuery(unsafeSQL: String(statement)), logger: logger)
                }
                try await connection.query("INSERT INTO fleetset_migrations (name) VALUES (\(version.name))", logger: logger)
                applied.append(version.name)
            }
            return applied
        }
    }
}
