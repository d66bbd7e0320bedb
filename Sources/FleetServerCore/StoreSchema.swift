/// The stores' schema versions: one list, one sequence, for every database. A store
/// implements each version as its DDL (a version may need nothing on one of them, e.g. the
/// change feed's triggers on SQLite, where no other instance listens); a database records the
/// versions it has by ``Version/name``. Never edit a version that has shipped: add one.
public enum StoreSchema {
    /// One schema version.
    public struct Version: Sendable, Hashable {
        /// 1, 2, 3, … in the order they apply.
        public let number: Int
        /// What it adds.
        public let title: String

        /// How a database records that it has this version: `v<number>: <title>`.
        public var name: String { "v\(number): \(title)" }
    }

    /// Every version, in order.
    public static let versions: [Version] = [
        "metadata, values, devices, tokens, revisions, status",
        "devices confined to apps, disabled, token rotation, idempotent enrollment; token ids",
        "recent status reports",
        "history of writes, rollouts",
        "device facts, agent policies",
        "history paged and pruned (the scopes each entry wrote, each app's floor); ended console sessions",
        "the change feed as a table, the write lock's key of this database, the history's scopes indexed by a trigger",
        "accounts, API tokens, the audit trail",
        "one-time values (single sign-on's attempts, tokens taken once)",
        "webhook subscriptions and the outbox of their messages",
        "groups defined by a query on the devices' facts; a status report's detail",
    ].enumerated().map { Version(number: $0.offset + 1, title: $0.element) }

    /// The newest version.
    public static var current: Version { versions[versions.count - 1] }
}
