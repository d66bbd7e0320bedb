import FleetJSON
import FleetProtocol

/// What several server instances sharing one database need from it beyond ``SettingsStore``:
/// one write at a time across all of them, and word of the changes the others made.
///
/// A store only one process uses (SQLite) needs neither: ``SerialSection`` serialises the
/// writes of its one process, and its ``ChangeNotifier`` hears of every write.
public protocol SharedWriteLock: Sendable {
    /// Runs `body` while no other instance runs a body under the same lock. Released when
    /// `body` returns or throws, and by the database when this instance's connection is lost
    /// (a killed instance never leaves the lock held).
    func withLock<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T
}

/// A change another server instance made to what devices are served, as the store reports it
/// (PostgreSQL: one `NOTIFY` sent in the writing transaction, so it is heard exactly when the
/// change is committed).
public enum StoreChange: Sendable, Hashable {
    /// Values of `app` at `scope` (``Scope/defaults``: the app's metadata).
    case values(app: String, scope: Scope)
    /// The device itself: disabled, deleted, its apps or groups changed, its token rotated.
    case device(String)
    /// The agent policy at a scope.
    case policy(PolicyScope)
    /// Changes may have been missed (the connection that hears them was lost and is back):
    /// forget everything kept in memory and let every long-poll check again.
    case unknown
}

/// Everything a store holds, for moving a fleet from one store to another
/// (`fleetset-server migrate`): read from the source with ``SettingsStore/snapshot()``,
/// written to an empty destination with ``SettingsStore/restore(_:)``.
public struct StoreSnapshot: Sendable, Hashable {
    /// An enrolled device and the enrollment it came from (which makes an enrollment retried
    /// after a lost answer find it).
    public struct EnrolledDevice: Sendable, Hashable {
        public var device: Device
        public var enrollmentTokenHash: String?
        public var enrollmentRequestID: String?

        public init(device: Device, enrollmentTokenHash: String? = nil, enrollmentRequestID: String? = nil) {
            self.device = device
            self.enrollmentTokenHash = enrollmentTokenHash
            self.enrollmentRequestID = enrollmentRequestID
        }
    }

    /// One stored status report.
    public struct Report: Sendable, Hashable {
        public var app: String
        public var deviceID: String
        public var report: StatusReport
        public var receivedAt: Int64

        public init(app: String, deviceID: String, report: StatusReport, receivedAt: Int64) {
            self.app = app
            self.deviceID = deviceID
            self.report = report
            self.receivedAt = receivedAt
        }
    }

    /// One device's revision of one app.
    public struct Revision: Sendable, Hashable {
        public var app: String
        public var deviceID: String
        public var state: RevisionState

        public init(app: String, deviceID: String, state: RevisionState) {
            self.app = app
            self.deviceID = deviceID
            self.state = state
        }
    }

    /// One scope's values of one app.
    public struct Values: Sendable, Hashable {
        public var app: String
        public var scope: Scope
        public var values: JSONObject

        public init(app: String, scope: Scope, values: JSONObject) {
            self.app = app
            self.scope = scope
            self.values = values
        }
    }

    public var metadata: [StoredMetadata] = []
    public var values: [Values] = []
    public var devices: [EnrolledDevice] = []
    public var enrollmentTokens: [EnrollmentTokenRecord] = []
    public var revisions: [Revision] = []
    public var reports: [Report] = []
    public var history: [HistoryEntry] = []
    /// Each app's history floor (see ``HistoryBase/floor``), for the apps whose history was pruned.
    public var historyFloors: [String: Int64] = [:]
    public var rollouts: [Rollout] = []
    /// Facts by device id.
    public var deviceInfo: [String: StoredDeviceInfo] = [:]
    public var policies: [PolicyScope: AgentPolicy] = [:]
    public var accounts: [StoredAccount] = []
    public var apiTokens: [StoredAPIToken] = []
    /// The audit trail, oldest first, exactly as stored (its hashes move with it).
    public var audit: [AuditRecord] = []
    /// Webhook subscriptions, secrets included (a receiver keeps verifying after a move).
    public var webhookSubscriptions: [WebhookSubscription] = []
    /// Their messages, pending, delivered and dead, by sequence (a claim does not move).
    public var outbox: [OutboxEntry] = []
    /// The last outbox sequence handed out (at least the last message's).
    public var outboxSequence: Int64 = 0
    /// The groups defined by a query, by name.
    public var groupDefinitions: [GroupDefinition] = []

    public init() {}

    /// How many of each kind it holds, in a fixed order (what `migrate` compares).
    public var counts: KeyValuePairs<String, Int> {
        [
            "metadata": metadata.count, "values": values.count, "devices": devices.count, "enrollment tokens": enrollmentTokens.count,
            "revisions": revisions.count, "status reports": reports.count, "history entries": history.count, "rollouts": rollouts.count,
            "device facts": deviceInfo.count, "agent policies": policies.count, "accounts": accounts.count, "API tokens": apiTokens.count,
            "audit entries": audit.count, "webhook subscriptions": webhookSubscriptions.count, "webhook messages": outbox.count,
            "group definitions": groupDefinitions.count,
        ]
    }

    /// The same content in a canonical order (stores list rows in their own order).
    public func sorted() -> StoreSnapshot {
        var copy = self
        copy.metadata.sort { $0.app < $1.app }
        copy.values.sort { ($0.app, $0.scope.description) < ($1.app, $1.scope.description) }
        copy.devices.sort { $0.device.id < $1.device.id }
        copy.enrollmentTokens.sort { $0.id < $1.id }
        copy.revisions.sort { ($0.app, $0.deviceID) < ($1.app, $1.deviceID) }
        copy.reports.sort { ($0.app, $0.deviceID) < ($1.app, $1.deviceID) }
        copy.history.sort { ($0.app, $0.number) < ($1.app, $1.number) }
        copy.rollouts.sort { $0.id < $1.id }
        copy.accounts.sort { $0.name < $1.name }
        copy.apiTokens.sort { $0.id < $1.id }
        copy.audit.sort { $0.sequence < $1.sequence }
        copy.webhookSubscriptions.sort { $0.id < $1.id }
        copy.outbox.sort { $0.sequence < $1.sequence }
        copy.groupDefinitions.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        // A claim is an instance's, not the fleet's: it does not move, and a copy has none.
        for index in copy.outbox.indices { copy.outbox[index].claimedUntil = nil }
        return copy
    }
}
