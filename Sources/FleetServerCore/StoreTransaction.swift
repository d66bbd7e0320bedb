import FleetJSON
import FleetProtocol

/// The row operations of one write transaction: what a database implements so that the
/// transaction scripts (``SettingsStore/enroll(_:newTokenHash:makeDevice:)``,
/// ``SettingsStore/commit(_:)``, …) are written once, in this module, for every store.
///
/// A primitive reads or writes rows and maps them; it decides nothing. The rules (which token
/// use is spent, which history number comes next, whether a rollout version may follow the
/// stored one) are the scripts'. Where the database locks rows (PostgreSQL: `FOR UPDATE`), the
/// rows a script checks before it writes are read locked (a metadata version, a device, an
/// enrollment token), so that two instances checking the same row take turns; the other reads
/// race safely, a second writer failing on a constraint (the history's number, the one active
/// rollout per app) and rolling back. SQLite and the in-memory store run one write transaction
/// at a time anyway.
public protocol StoreTransaction: Sendable {
    // MARK: Metadata and values

    /// The stored version of `app`'s metadata, or `nil`.
    func metadataVersion(app: String) async throws -> Int?
    /// Inserts `metadata`; false, inserting nothing, when the app has metadata already.
    func insertMetadata(_ metadata: StoredMetadata) async throws -> Bool
    /// Replaces the app's stored metadata.
    func updateMetadata(_ metadata: StoredMetadata) async throws
    /// Replaces the values at `scope` (an empty object removes them).
    func setValues(_ values: JSONObject, app: String, scope: Scope) async throws

    // MARK: History

    /// The app's newest history number (0: none).
    func newestHistoryNumber(app: String) async throws -> Int64
    /// The number of the app's newest entry written before `time`, or `nil`.
    func newestHistoryNumber(app: String, writtenBefore time: Int64) async throws -> Int64?
    /// Inserts `entry` (and whatever finds it by scope).
    ///
    /// - Throws: when the app has an entry with its number (a writer raced for it).
    func insertHistory(_ entry: HistoryEntry) async throws
    /// The app's history floor, or `nil` when nothing was ever removed.
    func historyFloor(app: String) async throws -> Int64?
    /// Makes the app's floor `number` unless it is higher already.
    func raiseHistoryFloor(app: String, to number: Int64) async throws
    /// Removes the app's entries numbered `cut` or lower except, for each scope, the newest of
    /// them that wrote it (none kept for a device that no longer exists); returns how many.
    func removeHistory(app: String, through cut: Int64) async throws -> Int

    // MARK: Rollouts

    /// Whether the app has an active (running or paused) rollout.
    func hasActiveRollout(app: String) async throws -> Bool
    /// Inserts a rollout.
    func insertRollout(_ rollout: Rollout) async throws
    /// Replaces the stored rollout with `rollout` when it is stored with `version`; false,
    /// writing nothing, otherwise.
    func replaceRollout(_ rollout: Rollout, storedVersion version: Int64) async throws -> Bool

    // MARK: Devices and enrollment

    /// The device with `id`, or `nil`.
    func device(id: String) async throws -> Device?
    /// The device enrolled with the token hashing to `tokenHash` and the request id `requestID`
    /// at `since` or later, not disabled, or `nil`.
    func device(enrolledWith tokenHash: String, requestID: String, since: Int64) async throws -> Device?
    /// Inserts a device, with the enrollment it came from.
    ///
    /// - Throws: when its id, token hash or enrollment exists.
    func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?) async throws
    /// Writes the device's token hashes, apps, groups, `disabled` and `rotationRequested`.
    func updateDevice(_ device: Device) async throws
    /// Removes the device and everything stored for it; false when there is none.
    func removeDevice(id: String) async throws -> Bool
    /// The enrollment token with `hash`, or `nil`.
    func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord?
    /// Inserts an enrollment token.
    ///
    /// - Throws: when its hash or id exists.
    func insertEnrollmentToken(_ token: EnrollmentTokenRecord) async throws
    /// Writes the uses left of the token with `hash`.
    func setUsesLeft(_ usesLeft: Int, enrollmentToken hash: String) async throws
    /// Removes the enrollment token with `id`; false when there is none.
    func removeEnrollmentToken(id: String) async throws -> Bool

    // MARK: Facts, policies, revisions, reports, console sessions

    /// The device's stored facts, or `nil`.
    func deviceInfo(id: String) async throws -> StoredDeviceInfo?
    /// Replaces the device's facts.
    func setDeviceInfo(_ info: StoredDeviceInfo, id: String) async throws
    /// Replaces the agent policy at `scope` (an empty one removes it).
    func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws
    /// Inserts a device's revision for an app.
    func insertRevision(_ state: RevisionState, app: String, deviceID: String) async throws
    /// Keeps each of `records` as its device's latest report for the app, and in its history slot.
    func recordStatuses(_ records: [StatusRecord]) async throws
    /// How many of `kind` the store holds.
    func count(of kind: StoredKind) async throws -> Int

    // MARK: Accounts, API tokens, the audit trail

    /// Every account (read in the write lock: a check of the owners that remain sees them all).
    func accounts() async throws -> [StoredAccount]
    /// The account named `name`, or `nil`.
    func account(name: String) async throws -> StoredAccount?
    /// Inserts an account; false, inserting nothing, when one with its name exists.
    func insertAccount(_ account: StoredAccount) async throws -> Bool
    /// Replaces the stored account of the same name.
    func updateAccount(_ account: StoredAccount) async throws
    /// Removes the account and its API tokens; false when there is none.
    func removeAccount(name: String) async throws -> Bool
    /// The API token with `id`, or `nil`.
    func apiToken(id: String) async throws -> StoredAPIToken?
    /// Inserts an API token.
    ///
    /// - Throws: when its id or hash exists.
    func insertAPIToken(_ token: StoredAPIToken) async throws
    /// Replaces the stored API token with the same id (its listing; the hash never changes).
    func updateAPIToken(_ token: StoredAPIToken) async throws
    /// The audit trail's newest entry, or `nil` (read in the write lock: the next entry follows it).
    func lastAuditRecord() async throws -> AuditRecord?
    /// Appends an entry to the audit trail.
    ///
    /// - Throws: when an entry with its sequence exists.
    func insertAuditRecord(_ record: AuditRecord) async throws
    /// Keeps `value` under `key` until `expiresAt` (forgetting every value expired at `now`);
    /// false, keeping nothing, when `key` is kept already.
    func insertOneTimeValue(key: String, value: String, expiresAt: Int64, now: Int64) async throws -> Bool
    /// Removes the value under `key` and returns it, when it has not expired at `now`.
    func takeOneTimeValue(key: String, now: Int64) async throws -> String?

    // MARK: Webhooks

    /// Every webhook subscription, oldest first.
    func webhookSubscriptions() async throws -> [WebhookSubscription]
    /// Inserts a subscription.
    ///
    /// - Throws: when its id exists.
    func insertWebhookSubscription(_ subscription: WebhookSubscription) async throws
    /// Replaces the stored subscription with the same id.
    func updateWebhookSubscription(_ subscription: WebhookSubscription) async throws
    /// Removes the subscription and its outbox entries; false when there is none.
    func removeWebhookSubscription(id: String) async throws -> Bool
    /// `count` new outbox sequences, increasing, never handed out before (not even for entries
    /// since removed: a receiver may have seen their `msg_` ids), whatever other transactions
    /// take at the same time (PostgreSQL: a sequence).
    func nextOutboxSequences(_ count: Int) async throws -> [Int64]
    /// Makes every sequence handed out from now on greater than `sequence` (a restore).
    func raiseOutboxSequence(above sequence: Int64) async throws
    /// Inserts an outbox entry.
    ///
    /// - Throws: when an entry with its sequence exists.
    func insertOutboxEntry(_ entry: OutboxEntry) async throws
    /// Up to `limit` pending entries due at `now` and not claimed by another instance, oldest
    /// first (PostgreSQL: locked, skipping those another transaction holds).
    func dueOutboxEntries(now: Int64, limit: Int) async throws -> [OutboxEntry]
    /// The entry numbered `sequence`, or `nil`.
    func outboxEntry(sequence: Int64) async throws -> OutboxEntry?
    /// Writes the entry's state, next attempt, claim and document.
    func updateOutboxEntry(_ entry: OutboxEntry) async throws
    /// Up to `limit` entries, newest first, of one subscription (`nil`: every one) in one of `states`.
    func outboxEntries(subscription: String?, states: Set<OutboxEntry.State>, limit: Int) async throws -> [OutboxEntry]
    /// How many entries of one subscription (`nil`: of all) are in each state.
    func outboxCounts(subscription: String?) async throws -> [OutboxEntry.State: Int]
    /// Removes delivered entries last tried before `time`; returns how many.
    func removeDeliveredOutboxEntries(before time: Int64) async throws -> Int

    // MARK: Groups defined by a query

    /// Every group defined by a query, by name.
    func groupDefinitions() async throws -> [GroupDefinition]
    /// Inserts the definition, or replaces the one with its name.
    func setGroupDefinition(_ definition: GroupDefinition) async throws
    /// Removes the definition named `name`; false when there is none.
    func removeGroupDefinition(name: String) async throws -> Bool
    /// Every device, by id, each read locked (PostgreSQL: `FOR UPDATE`, in id order): a change
    /// of a query takes turns with every report of facts.
    func lockedDevices() async throws -> [Device]
    /// Every device's facts, by device id.
    func allDeviceInfo() async throws -> [String: StoredDeviceInfo]

    // MARK: Changes

    /// Tells the other server instances on the same database of `change`, delivered when this
    /// transaction commits and never when it rolls back (a no-op where no other instance can be).
    func announce(_ change: StoreChange) async throws
}

/// What a store that a fleet is restored into must not hold yet (see ``SettingsStore/restore(_:)``).
public enum StoredKind: String, Sendable, CaseIterable {
    case metadata
    case values
    case devices
    case enrollmentTokens = "enrollment tokens"
    case agentPolicies = "agent policies"
    case accounts
    case apiTokens = "API tokens"
    case auditEntries = "audit entries"
    case webhookSubscriptions = "webhook subscriptions"
    case groupDefinitions = "group definitions"

    /// The table every database keeps them in.
    public var table: String {
        switch self {
        case .metadata: "metadata"
        case .values: "scoped_values"
        case .devices: "devices"
        case .enrollmentTokens: "enrollment_tokens"
        case .agentPolicies: "agent_policies"
        case .accounts: "accounts"
        case .apiTokens: "api_tokens"
        case .auditEntries: "audit_log"
        case .webhookSubscriptions: "webhook_subscriptions"
        case .groupDefinitions: "group_definitions"
        }
    }
}

/// The enrollment a device came from: the token presented and the agent's request id, which
/// make a retry after a lost answer find it.
public struct DeviceEnrollment: Sendable, Hashable {
    public var tokenHash: String?
    public var requestID: String?

    public init(tokenHash: String?, requestID: String?) {
        self.tokenHash = tokenHash
        self.requestID = requestID
    }
}
