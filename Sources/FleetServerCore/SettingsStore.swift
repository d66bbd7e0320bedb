import FleetJSON
import FleetMetadata
import FleetProtocol

/// Where the server keeps its state: SQLite (`FleetStoreSQLite`), PostgreSQL
/// (`FleetStorePostgres`) and memory (``InMemoryStore``) implement it.
///
/// A store implements reads, the three batched writes of the serving path (one statement each
/// where the database allows) and ``write(_:)`` over its ``StoreTransaction`` primitives; every
/// other write is a transaction script written once over those primitives (StoreScripts.swift).
/// Every method is one transaction. Times are seconds since the Unix epoch, passed in by the
/// caller (the server's injected clock), never read here. Secrets are stored only as hashes
/// the caller computed.
public protocol SettingsStore: Sendable {
    /// The stored metadata of `app`, or `nil`.
    func metadata(app: String) async throws -> StoredMetadata?

    /// The stored metadata of every app, by app id in byte order.
    func allMetadata() async throws -> [StoredMetadata]

    /// The values set at `scope` for `app` (empty when none).
    func values(app: String, scope: Scope) async throws -> JSONObject

    /// One page of the app's history, oldest first (see ``HistoryPage``). With a scope, the
    /// entries that wrote it, each whole.
    func history(app: String, page: HistoryPage) async throws -> [HistoryEntry]

    /// What a revert to entry `number` needs (see ``HistoryBase``), in one transaction.
    func historyBase(app: String, through number: Int64) async throws -> HistoryBase

    /// The app's rollouts, newest first (active or not).
    func rollouts(app: String) async throws -> [Rollout]

    /// Every active (running or paused) rollout, by app id.
    func activeRollouts() async throws -> [Rollout]

    /// The app's active rollout, if any (one indexed row: the serving path reads it).
    func activeRollout(app: String) async throws -> Rollout?

    /// The values of the scopes one device sees, with the app's active rollout, read in one
    /// transaction (a rollout completing writes its patch into the values as it ends: a reader
    /// sees both before or both after).
    func valueLayers(app: String, groups: [String], deviceID: String) async throws -> ValueLayers

    /// The values at every scope of `app` (scopes without values are absent).
    func allValues(app: String) async throws -> [Scope: JSONObject]

    /// The device whose token, or pending token, hashes to `tokenHash`, or `nil`.
    func device(tokenHash: String) async throws -> Device?

    /// The device with `id`, or `nil`.
    func device(id: String) async throws -> Device?

    /// ``touch(deviceID:at:)`` for each of `seen`, in one transaction.
    func touch(_ seen: [DeviceSeen]) async throws -> [Void]

    /// The enrollment token with `hash`, or `nil` (a read: enrollment looks the token up before
    /// it asks for the write lock, so unknown tokens never contend for it).
    func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord?

    /// The enrollment tokens, ordered by id.
    func enrollmentTokens() async throws -> [EnrollmentTokenRecord]

    /// The revision last served to a device for an app.
    func revision(app: String, deviceID: String) async throws -> RevisionState?

    /// ``advanceRevision(app:deviceID:fingerprint:)`` for each of `advances`, in order, in
    /// one transaction; returns the states in the same order.
    func advanceRevisions(_ advances: [RevisionAdvance]) async throws -> [RevisionState]

    /// The revision last served to every device for an app, by device id.
    func revisions(app: String) async throws -> [String: RevisionState]

    /// The device's latest status report for the app, with when it arrived.
    func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)?

    /// ``recordStatus(_:app:deviceID:at:)`` for each of `records`, in order, in one transaction.
    func recordStatuses(_ records: [StatusRecord]) async throws -> [Void]

    /// The latest status reports of every device for the app, by device id.
    func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)]

    /// The device's recent status reports for every app, newest first: each app's reports of
    /// its last ``StatusHistory/revisions`` revisions, one per revision and source (a later
    /// report of the same revision and source replaces the earlier).
    func recentStatuses(deviceID: String) async throws -> [StatusRecord]

    /// The recent status reports of every device for the app (see ``recentStatuses(deviceID:)``),
    /// in no particular order. A running rollout's look reads it; no index serves it (one on
    /// the app would cost every status report, the hot path, about a tenth more CPU at 5,000
    /// devices: measured, docs/measured.md, "Safe changes").
    func statusHistory(app: String) async throws -> [StatusRecord]

    /// Every device, ordered by id.
    func devices() async throws -> [Device]

    /// The facts the device reported (``DeviceInfo``) and when they last changed; `nil` before
    /// its first report.
    func deviceInfo(id: String) async throws -> StoredDeviceInfo?

    /// Every device's facts, by device id.
    func allDeviceInfo() async throws -> [String: StoredDeviceInfo]

    /// Every scope's agent policy.
    func agentPolicies() async throws -> [PolicyScope: AgentPolicy]

    /// Everything stored, read in one transaction (for `fleetset-server migrate`).
    func snapshot() async throws -> StoreSnapshot

    /// Every account, by name.
    func accounts() async throws -> [StoredAccount]
    /// The account named `name`, or `nil`.
    func account(name: String) async throws -> StoredAccount?
    /// The API token whose hash is `hash`, or `nil`.
    func apiToken(hash: String) async throws -> StoredAPIToken?
    /// The API tokens of `account` (`nil`: of every account), oldest first.
    func apiTokens(account: String?) async throws -> [StoredAPIToken]
    /// The audit entries `query` asks for, oldest first.
    func auditRecords(_ query: AuditQuery) async throws -> [AuditRecord]

    /// Runs `body` in one write transaction, durable when it returns: committed when `body`
    /// returns, rolled back when it throws (rethrowing what `body` threw). The transaction
    /// scripts (StoreScripts.swift) are its only callers; it runs to its end even when the calling
    /// task is cancelled.
    func write<T: Sendable>(_ body: @escaping @Sendable (any StoreTransaction) async throws -> T) async throws -> T
}

/// A device's facts as stored: what it reported and when they last changed.
public struct StoredDeviceInfo: Sendable, Hashable {
    public var info: JSONObject
    public var updatedAt: Int64

    public init(info: JSONObject, updatedAt: Int64) {
        self.info = info
        self.updatedAt = updatedAt
    }
}

/// ``SettingsStore/restore(_:)`` found a store that already holds a fleet.
public struct StoreNotEmpty: Error, Sendable, CustomStringConvertible {
    /// What it holds, e.g. "3 devices".
    public let holds: String

    public init(holds: String) { self.holds = holds }

    public var description: String { "the destination store is not empty (it holds \(holds)); restore only into a new database" }
}

extension SettingsStore {
    /// Replaces the values at `scope` (an empty object removes the row), recorded in the history
    /// as the store's own write (for tests and tools; the service records who wrote).
    public func setValues(_ values: JSONObject, app: String, scope: Scope) async throws {
        let before = try await self.values(app: app, scope: scope)
        let change = ChangeRecord.ScopeChange(scope: scope, patch: SettingsValues.patch(from: before, to: values), after: values)
        _ = try await commit(
            AppWrite(app: app, values: [scope: values], change: ChangeRecord(at: 0, actor: "server", kind: .values, scopes: [change])))
    }

    /// ``replaceMetadata(_:expectedVersion:recording:)``, recorded as the store's own write.
    public func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?) async throws -> Bool {
        try await replaceMetadata(
            metadata, expectedVersion: expectedVersion,
            recording: ChangeRecord(at: 0, actor: "server", kind: .metadata, metadataVersion: metadata.version))
    }
}

/// One device's revision to move for values with a new fingerprint (see
/// ``SettingsStore/advanceRevisions(_:)``).
public struct RevisionAdvance: Sendable, Hashable {
    public var app: String
    public var deviceID: String
    public var fingerprint: UInt64

    public init(app: String, deviceID: String, fingerprint: UInt64) {
        self.app = app
        self.deviceID = deviceID
        self.fingerprint = fingerprint
    }
}

/// How much of each device's report history the stores keep: a ring of slots per device and
/// app, indexed by revision and source, so that keeping it costs one upsert per report and never
/// a read or a delete.
public enum StatusHistory {
    /// Revisions kept per device and app.
    public static let revisions: Int64 = 5

    /// The slot of a report: 0 to `2 × revisions - 1`.
    public static func slot(of report: StatusReport) -> Int64 {
        ((report.revision % revisions + revisions) % revisions) * 2 + (report.source == .agent ? 0 : 1)
    }
}

/// One status report to keep (see ``SettingsStore/recordStatuses(_:)``).
public struct StatusRecord: Sendable, Hashable {
    public var report: StatusReport
    public var app: String
    public var deviceID: String
    /// When it arrived, seconds since the epoch.
    public var time: Int64

    public init(report: StatusReport, app: String, deviceID: String, time: Int64) {
        self.report = report
        self.app = app
        self.deviceID = deviceID
        self.time = time
    }
}

/// That a device was seen (see ``SettingsStore/touch(_:)``).
public struct DeviceSeen: Sendable, Hashable {
    public var deviceID: String
    /// Seconds since the epoch.
    public var time: Int64

    public init(deviceID: String, time: Int64) {
        self.deviceID = deviceID
        self.time = time
    }
}

/// What a device sees of an app's stored values: the app scope, its groups', its own, and
/// the app's active rollout (which may stage a patch over one of them).
public struct ValueLayers: Sendable, Hashable {
    public var app: JSONObject
    /// By group name; groups without values are absent.
    public var groups: [String: JSONObject]
    public var device: JSONObject
    /// The app's active rollout, when read with the values (``SettingsStore/valueLayers(app:groups:deviceID:)``).
    public var rollout: Rollout?

    public init(app: JSONObject = [:], groups: [String: JSONObject] = [:], device: JSONObject = [:], rollout: Rollout? = nil) {
        self.app = app
        self.groups = groups
        self.device = device
        self.rollout = rollout
    }

    /// The layers `device` gets: with the rollout's patch when it admitted the device.
    public func served(to device: Device) -> ValueLayers {
        rollout?.layers(self, for: device) ?? self
    }
}

/// The result of presenting an enrollment token.
public enum EnrollmentOutcome: Sendable, Hashable {
    /// The token was used and the device added.
    case enrolled(Device)
    /// No token has this hash.
    case unknown
    /// The token's time is up.
    case expired
    /// The token has no uses left.
    case usedUp
}

/// A metadata document as stored: its version and exact text (the ETag is derived from it).
public struct StoredMetadata: Sendable, Hashable {
    public var app: String
    public var version: Int
    /// The document's JSON text, as served.
    public var document: String

    public init(app: String, version: Int, document: String) {
        self.app = app
        self.version = version
        self.document = document
    }
}

/// An enrolled device.
public struct Device: Sendable, Hashable {
    public var id: String
    /// The hash of its token (the token itself is never stored).
    public var tokenHash: String
    /// The apps whose settings it may read and write; any other app does not exist for it.
    public var apps: [String]
    /// The groups it belongs to.
    public var groups: [String]
    public var enrolledAt: Int64
    public var lastSeenAt: Int64?
    /// A disabled device's token is refused.
    public var disabled: Bool
    /// The hash of a token handed out by a rotation and not used yet. Until its first use the
    /// old token keeps working too, so that a rotation whose answer was lost locks nobody out.
    public var pendingTokenHash: String?
    /// The admin asked for a new token; the device is told so in its answers.
    public var rotationRequested: Bool

    public init(
        id: String, tokenHash: String, apps: [String], groups: [String], enrolledAt: Int64, lastSeenAt: Int64? = nil,
        disabled: Bool = false, pendingTokenHash: String? = nil, rotationRequested: Bool = false
    ) {
        self.id = id
        self.tokenHash = tokenHash
        self.apps = apps
        self.groups = groups
        self.enrolledAt = enrolledAt
        self.lastSeenAt = lastSeenAt
        self.disabled = disabled
        self.pendingTokenHash = pendingTokenHash
        self.rotationRequested = rotationRequested
    }

    /// Whether the device may read and write `app`'s settings.
    public func has(app: String) -> Bool { apps.contains(app) }
}

/// What an admin changes of a device; `nil` members stay as they are.
public struct DeviceChange: Sendable, Hashable {
    public var apps: [String]?
    public var groups: [String]?
    public var disabled: Bool?
    public var rotationRequested: Bool?

    public init(apps: [String]? = nil, groups: [String]? = nil, disabled: Bool? = nil, rotationRequested: Bool? = nil) {
        self.apps = apps
        self.groups = groups
        self.disabled = disabled
        self.rotationRequested = rotationRequested
    }
}

/// An enrollment token as stored: its hash, id, expiry, uses left, and the apps and groups
/// devices get.
public struct EnrollmentTokenRecord: Sendable, Hashable {
    public var hash: String
    /// Names the token to admins (the token itself is shown only once).
    public var id: String
    public var expiresAt: Int64
    public var usesLeft: Int
    public var apps: [String]
    public var groups: [String]

    public init(hash: String, id: String, expiresAt: Int64, usesLeft: Int, apps: [String], groups: [String]) {
        self.hash = hash
        self.id = id
        self.expiresAt = expiresAt
        self.usesLeft = usesLeft
        self.apps = apps
        self.groups = groups
    }
}

/// One enrollment attempt as the store sees it: the token presented and the agent's request
/// id, which makes a retry after a lost answer find the device it made.
public struct EnrollmentAttempt: Sendable, Hashable {
    public var tokenHash: String
    public var requestID: String
    public var now: Int64
    /// How long after an enrollment a retry with the same request id gets the same device.
    public var retryWindow: Int64

    public init(tokenHash: String, requestID: String, now: Int64, retryWindow: Int64) {
        self.tokenHash = tokenHash
        self.requestID = requestID
        self.now = now
        self.retryWindow = retryWindow
    }
}

/// A row the store wrote cannot be read back: the database was changed outside fleetset.
public struct StoreCorruption: Error, Sendable, CustomStringConvertible {
    /// Which stored item.
    public let what: String

    public init(what: String) { self.what = what }

    public var description: String { "the stored \(what) cannot be read; the database was changed outside fleetset" }
}

/// How stores keep lists and objects in text columns: as JSON.
public enum StoredText {
    /// A list of names as JSON text.
    public static func text(_ strings: [String]) -> String {
        JSONValue.array(strings.map(JSONValue.string)).serialized()
    }

    /// The list of names in `text`.
    ///
    /// - Throws: ``StoreCorruption`` naming `what` when it is not a JSON array of strings.
    public static func strings(_ text: String, what: String) throws -> [String] {
        guard case .array(let elements)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        return try elements.map { element in
            guard case .string(let value) = element else { throw StoreCorruption(what: what) }
            return value
        }
    }

    /// The object in `text`.
    ///
    /// - Throws: ``StoreCorruption`` naming `what` when it is not a JSON object.
    public static func object(_ text: String, what: String) throws -> JSONObject {
        guard case .object(let object)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        return object
    }
}

extension SettingsStore {
    /// The app's whole history, oldest first.
    public func history(app: String) async throws -> [HistoryEntry] {
        try await history(app: app, page: .all)
    }
}
