import Logging
import PostgresNIO

/// The PostgreSQL schema, one migration per change; never edit a migration that has shipped.
///
/// ``apply(on:logger:)`` runs in one transaction that first takes a transaction-scoped advisory
/// lock: instances starting together wait for each other, and the second finds the migrations
/// applied by the first. A migration that fails rolls back whole (PostgreSQL's DDL is
/// transactional), leaving the database as it was.
enum PostgresMigrations {
    /// The advisory lock key of migrations (distinct from ``PostgresWriteLock/key``).
    static let lockKey: Int64 = 0x666c_6565_7473_0001

    static let all: [(name: String, sql: String)] = [
        (
            "v1: metadata, values, devices, enrollment tokens, revisions, status",
            #"""
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
            """#
        ),
        (
            "v2: recent status reports",
            #"""
            CREATE TABLE status_history (
                device_id TEXT NOT NULL REFERENCES devices(id) ON DELETE CASCADE, app TEXT NOT NULL, slot BIGINT NOT NULL,
                revision BIGINT NOT NULL, schema_version BIGINT NOT NULL, state TEXT NOT NULL, message TEXT NOT NULL,
                source TEXT NOT NULL, received_at BIGINT NOT NULL, PRIMARY KEY (device_id, app, slot));
            """#
        ),
        (
            "v3: history of writes, rollouts",
            #"""
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
            """#
        ),
        (
            "v4: device facts, agent policies",
            #"""
            CREATE TABLE device_info (
                device_id TEXT PRIMARY KEY REFERENCES devices(id) ON DELETE CASCADE, info TEXT NOT NULL, updated_at BIGINT NOT NULL);
            CREATE TABLE agent_policies (scope TEXT PRIMARY KEY, policy TEXT NOT NULL);
            """#
        ),
    ]

    /// Applies the migrations not applied yet; returns the names of those it applied.
    @discardableResult
    static func apply(on client: PostgresClient, logger: Logger) async throws -> [String] {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(lockKey))", logger: logger)
            try await connection.query(
                "CREATE TABLE IF NOT EXISTS fleetset_migrations (name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
                logger: logger)
            var done = Set<String>()
            for row in try await connection.query("SELECT name FROM fleetset_migrations", logger: logger).collect() {
                done.insert(try row.decode(String.self))
            }
            var applied: [String] = []
            for migration in all where !done.contains(migration.name) {
                // One statement at a time: the extended protocol takes one per query.
                for statement in migration.sql.split(separator: ";\n") where !statement.allSatisfy(\.isWhitespace) {
                    try await connection.query(PostgresQuery(unsafeSQL: String(statement)), logger: logger)
                }
                try await connection.query("INSERT INTO fleetset_migrations (name) VALUES (\(migration.name))", logger: logger)
                applied.append(migration.name)
            }
            return applied
        }
    }
}
