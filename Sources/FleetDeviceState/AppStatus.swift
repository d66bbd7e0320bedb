import FleetJSON
import FleetProtocol

/// `apps/<app>/status.json`: what the agent last did for an app, for `fleetset status`,
/// monitoring scripts and the agent itself after a restart.
///
/// ```json
/// {"app": "kiosk", "revision": 41, "schemaVersion": 3, "state": "error", "latestRevision": 42,
///  "lastSync": "2026-11-23T10:00:00Z", "lastError": "revision 42: /volume: must be <= 10 (got 11)",
///  "pendingReports": 0, "pendingChanges": 1, "awaitingAck": null, "ackDeadline": null, "updatedAt": "2026-11-23T10:00:01Z"}
/// ```
///
/// - `revision`, `schemaVersion`: what `settings.json` holds, once its outcome (hook, report)
///   is settled. After a crash between writing `settings.json` and this file, the two differ,
///   and the agent runs the hook and reports again.
/// - `state`: the outcome of `latestRevision`, the newest revision the server offered:
///   `applied`, `error`, `unsupported`, or `none` before the first.
/// - `lastSync`: when the server last answered; `lastError`: the last failure (network, server,
///   validation, hook), `null` after a success.
/// - `pendingChanges`: the device's own changes not yet in `settings.json` (`changes.json`).
/// - `awaitingAck`, `ackDeadline`: with `expectAck`, the revision the app has not acknowledged
///   yet, and when the agent reports it `unsupported` if the app stays silent.
/// - `waitingRevision`, `waitingReason`: a revision checked and not applied yet, and why (outside
///   the app's apply windows, or the app holds its update lock); `null` when none waits.
public struct AppStatus: Sendable, Hashable {
    /// The outcome of the latest revision.
    public enum State: String, Sendable, CaseIterable {
        case none, applied, error, unsupported
    }

    public var app: String
    public var revision: Int64?
    public var schemaVersion: Int64?
    public var state: State
    public var latestRevision: Int64?
    /// Seconds since the epoch.
    public var lastSync: Int64?
    public var lastError: String?
    public var pendingReports: Int
    public var pendingChanges: Int
    public var awaitingAck: Int64?
    /// Seconds since the epoch.
    public var ackDeadline: Int64?
    /// A revision checked and waiting to be applied.
    public var waitingRevision: Int64?
    /// Why it waits.
    public var waitingReason: String?
    /// Seconds since the epoch.
    public var updatedAt: Int64

    public init(
        app: String, revision: Int64? = nil, schemaVersion: Int64? = nil, state: State = .none, latestRevision: Int64? = nil,
        lastSync: Int64? = nil, lastError: String? = nil, pendingReports: Int = 0, pendingChanges: Int = 0, awaitingAck: Int64? = nil,
        ackDeadline: Int64? = nil, waitingRevision: Int64? = nil, waitingReason: String? = nil, updatedAt: Int64 = 0
    ) {
        self.app = app
        self.revision = revision
        self.schemaVersion = schemaVersion
        self.state = state
        self.latestRevision = latestRevision
        self.lastSync = lastSync
        self.lastError = lastError
        self.pendingReports = pendingReports
        self.pendingChanges = pendingChanges
        self.awaitingAck = awaitingAck
        self.ackDeadline = ackDeadline
        self.waitingRevision = waitingRevision
        self.waitingReason = waitingReason
        self.updatedAt = updatedAt
    }

    static let members: Set<String> = [
        "app", "revision", "schemaVersion", "state", "latestRevision", "lastSync", "lastError", "pendingReports", "pendingChanges",
        "awaitingAck", "ackDeadline", "waitingRevision", "waitingReason", "updatedAt",
    ]

    /// Reads the file form.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: Self.members)
        app = try reader.string("app", maximumLength: 64)
        revision = try reader.nullableCount("revision")
        schemaVersion = try reader.nullableCount("schemaVersion")
        state = try reader.oneOf("state", State.self)
        latestRevision = try reader.nullableCount("latestRevision")
        lastSync = try reader.nullableTimestamp("lastSync")
        lastError = reader.object["lastError"] == .null ? nil : try reader.optionalString("lastError", maximumLength: 1 << 16)
        pendingReports = Int(try reader.count("pendingReports"))
        // Members added in 0.6: absent from files an older agent wrote.
        pendingChanges = reader.object["pendingChanges"] == nil ? 0 : Int(try reader.count("pendingChanges"))
        awaitingAck = try reader.nullableCount("awaitingAck")
        ackDeadline = try reader.nullableTimestamp("ackDeadline")
        // Members added in 0.9.
        waitingRevision = try reader.nullableCount("waitingRevision")
        waitingReason = reader.object["waitingReason"] == .null ? nil : try reader.optionalString("waitingReason", maximumLength: 4096)
        updatedAt = try reader.timestamp("updatedAt")
    }

    /// The file form.
    public var json: JSONValue {
        func optional(_ value: Int64?) -> JSONValue { value.map { .number(.integer($0)) } ?? .null }
        return [
            "app": .string(app), "revision": optional(revision), "schemaVersion": optional(schemaVersion), "state": .string(state.rawValue),
            "latestRevision": optional(latestRevision), "lastSync": lastSync.map { .string(Timestamp.format($0)) } ?? .null,
            "lastError": lastError.map(JSONValue.string) ?? .null, "pendingReports": .number(.integer(Int64(pendingReports))),
            "pendingChanges": .number(.integer(Int64(pendingChanges))), "awaitingAck": optional(awaitingAck),
            "ackDeadline": ackDeadline.map { .string(Timestamp.format($0)) } ?? .null, "waitingRevision": optional(waitingRevision),
            "waitingReason": waitingReason.map(JSONValue.string) ?? .null, "updatedAt": .string(Timestamp.format(updatedAt)),
        ]
    }

}
