import FleetJSON
import FleetProtocol

/// Where the server keeps its state. SQLite implements it (`FleetStoreSQLite`); a PostgreSQL
/// implementation follows the same contract.
///
/// Every method is one transaction. Times are seconds since the Unix epoch, passed in by the
/// caller (the server's injected clock), never read here. Secrets are stored only as hashes
/// the caller computed.
public protocol SettingsStore: Sendable {
    /// The stored metadata of `app`, or `nil`.
    func metadata(app: String) async throws -> StoredMetadata?

    /// Stores metadata when the stored version is `expectedVersion` (`nil`: none stored yet).
    /// Returns false, storing nothing, when another writer got there first.
    func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?) async throws -> Bool

    /// The values set at `scope` for `app` (empty when none).
    func values(app: String, scope: Scope) async throws -> JSONObject

    /// Replaces the values at `scope` (an empty object removes the row).
    func setValues(_ values: JSONObject, app: String, scope: Scope) async throws

    /// Adds a device. Throws when the id or the token hash exists.
    func addDevice(_ device: Device) async throws

    /// The device whose token hashes to `tokenHash`, or `nil`.
    func device(tokenHash: String) async throws -> Device?

    /// The device with `id`, or `nil`.
    func device(id: String) async throws -> Device?

    /// Records that the device was seen.
    func touch(deviceID: String, at time: Int64) async throws

    /// Adds an enrollment token (by hash).
    func addEnrollmentToken(_ token: EnrollmentTokenRecord) async throws

    /// Uses one use of the enrollment token with `hash` if it exists, has not expired at `now`
    /// and has uses left; returns its groups, or `nil` when it cannot be used.
    func consumeEnrollmentToken(hash: String, now: Int64) async throws -> [String]?

    /// The revision last served to a device for an app.
    func revision(app: String, deviceID: String) async throws -> RevisionState?

    /// Stores the revision served to a device for an app.
    func setRevision(_ state: RevisionState, app: String, deviceID: String) async throws

    /// Keeps `report` as the device's latest for the app.
    func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws

    /// The device's latest status report for the app, with when it arrived.
    func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)?

    /// Every device, ordered by id.
    func devices() async throws -> [Device]
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
    /// The groups it belongs to.
    public var groups: [String]
    public var enrolledAt: Int64
    public var lastSeenAt: Int64?

    public init(id: String, tokenHash: String, groups: [String], enrolledAt: Int64, lastSeenAt: Int64? = nil) {
        self.id = id
        self.tokenHash = tokenHash
        self.groups = groups
        self.enrolledAt = enrolledAt
        self.lastSeenAt = lastSeenAt
    }
}

/// An enrollment token as stored: its hash, expiry, uses left and the groups devices join.
public struct EnrollmentTokenRecord: Sendable, Hashable {
    public var hash: String
    public var expiresAt: Int64
    public var usesLeft: Int
    public var groups: [String]

    public init(hash: String, expiresAt: Int64, usesLeft: Int, groups: [String]) {
        self.hash = hash
        self.expiresAt = expiresAt
        self.usesLeft = usesLeft
        self.groups = groups
    }
}
