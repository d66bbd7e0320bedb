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

    /// The values of the scopes one device sees, read in one transaction.
    func valueLayers(app: String, groups: [String], deviceID: String) async throws -> ValueLayers

    /// The values at every scope of `app` (scopes without values are absent).
    func allValues(app: String) async throws -> [Scope: JSONObject]

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
    /// and has uses left, and then adds the device that `makeDevice` returns for its groups,
    /// all in one transaction (a device is never added for a token that was not used).
    func enroll(tokenHash: String, now: Int64, makeDevice: @Sendable ([String]) -> Device) async throws -> EnrollmentOutcome

    /// The revision last served to a device for an app.
    func revision(app: String, deviceID: String) async throws -> RevisionState?

    /// Moves the device's revision for the app to ``RevisionState/next(after:fingerprint:)``
    /// of the stored one, atomically (two requests computing the same change never make two
    /// revisions, nor one revision with two contents), and returns it.
    func advanceRevision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState

    /// The revision last served to every device for an app, by device id.
    func revisions(app: String) async throws -> [String: RevisionState]

    /// Keeps `report` as the device's latest for the app.
    func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws

    /// The device's latest status report for the app, with when it arrived.
    func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)?

    /// The latest status reports of every device for the app, by device id.
    func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)]

    /// Every device, ordered by id.
    func devices() async throws -> [Device]
}

/// What a device sees of an app's stored values: the app scope, its groups', its own.
public struct ValueLayers: Sendable, Hashable {
    public var app: JSONObject
    /// By group name; groups without values are absent.
    public var groups: [String: JSONObject]
    public var device: JSONObject

    public init(app: JSONObject = [:], groups: [String: JSONObject] = [:], device: JSONObject = [:]) {
        self.app = app
        self.groups = groups
        self.device = device
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
