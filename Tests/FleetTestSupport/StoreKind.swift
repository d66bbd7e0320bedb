/// The stores the server's tests run against: each such test runs once with SQLite and once
/// with PostgreSQL (a database of its own in the test process's ``PostgresCluster``).
public enum StoreKind: String, CaseIterable, Sendable {
    case sqlite
    case postgres
}
