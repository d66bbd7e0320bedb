import Logging
import PostgresNIO

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
