import FleetJSON

/// `POST /v1/admin/enrollment-tokens` request: which apps enrolled devices get (at least one)
/// and which groups they join, how long the token lasts and how many devices may use it.
public struct EnrollmentTokenRequest: Sendable, Hashable {
    /// The allowed lifetimes, in seconds (a minute to a year).
    public static let lifetimes: ClosedRange<Int64> = 60...31_536_000
    /// The allowed numbers of uses.
    public static let useCounts: ClosedRange<Int64> = 1...100_000

    /// `apps` on the wire: the apps enrolled devices may read and write; at least one, at most 256 app ids.
    public var apps: [String]
    /// `groups` on the wire: the groups enrolled devices join, at most 32; empty for none.
    public var groups: [String]
    /// How long the token can be used, in seconds from when it is made (``lifetimes``; a day when absent).
    public var expiresInSeconds: Int64
    /// How many devices may enroll with the token (``useCounts``; one when absent).
    public var uses: Int64

    /// Creates a request; the defaults are one device within a day.
    public init(apps: [String], groups: [String] = [], expiresInSeconds: Int64 = 86_400, uses: Int64 = 1) {
        self.apps = apps
        self.groups = groups
        self.expiresInSeconds = expiresInSeconds
        self.uses = uses
    }

    /// Reads the wire form; unknown members, an empty `apps`, and a lifetime or number of uses out
    /// of range are refused, each at its pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["apps", "groups", "expiresInSeconds", "uses"])
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        guard !apps.isEmpty else {
            throw DocumentError(
                at: JSONPointer.root.appending("apps"), "must name at least one app: a device reads only the apps it is given")
        }
        groups = try reader.names("groups", maximumCount: 32) ?? []
        expiresInSeconds = try reader.integer("expiresInSeconds", in: Self.lifetimes, default: 86_400)
        uses = try reader.integer("uses", in: Self.useCounts, default: 1)
    }

    /// The wire form, every member written (the defaults too).
    public var json: JSONValue {
        [
            "apps": .array(apps.map(JSONValue.string)), "groups": .array(groups.map(JSONValue.string)),
            "expiresInSeconds": .number(.integer(expiresInSeconds)), "uses": .number(.integer(uses)),
        ]
    }
}

/// `POST /v1/admin/enrollment-tokens` response. The token is shown this once; `id` names it
/// afterwards (to list or revoke it).
public struct EnrollmentTokenResponse: Sendable, Hashable {
    /// The token's id (`et-…`): how it is named afterwards, to list or revoke it.
    public var id: String
    /// The enrollment token itself (`fse_…`), shown this once: the server keeps only its hash.
    public var enrollmentToken: String
    /// Seconds since the epoch (RFC 3339 on the wire).
    public var expiresAt: Int64
    /// How many devices may enroll with the token.
    public var uses: Int64
    /// The apps devices enrolled with the token may read and write.
    public var apps: [String]
    /// The groups devices enrolled with the token join.
    public var groups: [String]

    /// Creates a response.
    public init(id: String, enrollmentToken: String, expiresAt: Int64, uses: Int64, apps: [String], groups: [String]) {
        self.id = id
        self.enrollmentToken = enrollmentToken
        self.expiresAt = expiresAt
        self.uses = uses
        self.apps = apps
        self.groups = groups
    }

    /// Reads the wire form; unknown members are refused, and `expiresAt` must be an RFC 3339 UTC timestamp.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["id", "enrollmentToken", "expiresAt", "uses", "apps", "groups"])
        id = try reader.string("id", maximumLength: 128)
        enrollmentToken = try reader.string("enrollmentToken", maximumLength: 512)
        expiresAt = try reader.timestamp("expiresAt")
        uses = try reader.count("uses")
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        groups = try reader.names("groups", maximumCount: 32) ?? []
    }

    /// The wire form, `expiresAt` as an RFC 3339 UTC timestamp.
    public var json: JSONValue {
        [
            "id": .string(id), "enrollmentToken": .string(enrollmentToken), "expiresAt": .string(Timestamp.format(expiresAt)),
            "uses": .number(.integer(uses)), "apps": .array(apps.map(JSONValue.string)), "groups": .array(groups.map(JSONValue.string)),
        ]
    }
}

/// `PUT /v1/admin/apps/{app}/metadata` response.
public struct MetadataPutResult: Sendable, Hashable {
    /// The app id whose metadata was stored.
    public var app: String
    /// The version of the metadata now stored (the document's own `version`).
    public var version: Int64
    /// The version it replaced, `nil` for an app's first metadata.
    public var previousVersion: Int64?

    /// Creates a result.
    public init(app: String, version: Int64, previousVersion: Int64?) {
        self.app = app
        self.version = version
        self.previousVersion = previousVersion
    }

    /// Reads the wire form; unknown members are refused, and `previousVersion` may be `null`.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "version", "previousVersion"])
        app = try reader.string("app", maximumLength: 64)
        version = try reader.count("version")
        previousVersion = try reader.nullableCount("previousVersion")
    }

    /// The wire form, with `previousVersion` `null` for an app's first metadata.
    public var json: JSONValue {
        [
            "app": .string(app), "version": .number(.integer(version)),
            "previousVersion": previousVersion.map { .number(.integer($0)) } ?? .null,
        ]
    }
}

/// The values set at one scope: `GET`/`PATCH /v1/admin/apps/{app}/values?scope=…`.
/// Settings marked `x-secret` are masked.
public struct ScopedValues: Sendable, Hashable {
    /// The app id.
    public var app: String
    /// `app`, `group:NAME` or `device:ID`.
    public var scope: String
    /// The values set at ``scope`` (not the effective settings), by setting name; a secret reads
    /// `"********"`. At device scope, members named by a JSON pointer (`/playlist/0/content`) are
    /// the device's key-path values.
    public var values: JSONObject

    /// Creates the values of one scope.
    public init(app: String, scope: String, values: JSONObject) {
        self.app = app
        self.scope = scope
        self.values = values
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "scope", "values"])
        app = try reader.string("app", maximumLength: 64)
        scope = try reader.string("scope", maximumLength: 256)
        values = try reader.values("values")
    }

    /// The wire form.
    public var json: JSONValue { ["app": .string(app), "scope": .string(scope), "values": .object(values)] }
}

/// The latest status report of a device, with when it arrived.
public struct DeviceStatus: Sendable, Hashable {
    /// The report as the device sent it.
    public var report: StatusReport
    /// Seconds since the epoch.
    public var receivedAt: Int64

    /// Creates a status from a report and when it arrived.
    public init(report: StatusReport, receivedAt: Int64) {
        self.report = report
        self.receivedAt = receivedAt
    }

    /// Reads the wire form at `location`: the report's members with `receivedAt` (an RFC 3339 UTC
    /// timestamp) beside them. The message is taken as stored, control characters included: reports
    /// kept from before the server refused them are escaped when shown.
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        guard case .object(var object) = json else { throw DocumentError(at: location, "must be an object") }
        let received = object["receivedAt"]
        object["receivedAt"] = nil
        guard case .string(let text)? = received, let seconds = Timestamp.parse(text) else {
            throw DocumentError(at: location.appending("receivedAt"), "must be an RFC 3339 UTC timestamp")
        }
        // A server may hold reports from before it refused control characters; they are escaped when shown.
        report = try StatusReport(json: .object(object), at: location, acceptingAnyMessage: true)
        receivedAt = seconds
    }

    /// The wire form: the report's members and `receivedAt` in one object.
    public var json: JSONValue {
        guard case .object(var object) = report.json else { return report.json }
        object["receivedAt"] = .string(Timestamp.format(receivedAt))
        return .object(object)
    }
}

/// One device in `GET /v1/admin/apps/{app}/devices`.
public struct DeviceSummary: Sendable, Hashable {
    /// The device's id (`d-…`).
    public var id: String
    /// The groups the device is in.
    public var groups: [String]
    /// When the device enrolled, in seconds since the epoch (RFC 3339 on the wire).
    public var enrolledAt: Int64
    /// When the device last made a request, in seconds since the epoch (to within a minute); `nil`
    /// when the server has never recorded one.
    public var lastSeenAt: Int64?
    /// The revision of the app's settings last served to the device.
    public var servedRevision: Int64?
    /// Its latest status report for the app.
    public var status: DeviceStatus?

    /// Creates a summary.
    public init(id: String, groups: [String], enrolledAt: Int64, lastSeenAt: Int64?, servedRevision: Int64?, status: DeviceStatus?) {
        self.id = id
        self.groups = groups
        self.enrolledAt = enrolledAt
        self.lastSeenAt = lastSeenAt
        self.servedRevision = servedRevision
        self.status = status
    }

    /// Reads the wire form at `location` (an element of ``DeviceList/devices``); unknown members
    /// are refused, and `lastSeenAt`, `servedRevision` and `status` may be `null`.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location, allowed: ["id", "groups", "enrolledAt", "lastSeenAt", "servedRevision", "status"])
        id = try reader.string("id", maximumLength: 128)
        groups = try reader.names("groups", maximumCount: 1024) ?? []
        enrolledAt = try reader.timestamp("enrolledAt")
        lastSeenAt = try reader.nullableTimestamp("lastSeenAt")
        servedRevision = try reader.nullableCount("servedRevision")
        if let status = reader.object["status"], status != .null {
            self.status = try DeviceStatus(json: status, at: location.appending("status"))
        } else {
            self.status = nil
        }
    }

    /// The wire form; `lastSeenAt`, `servedRevision` and `status` are `null` when the server has none.
    public var json: JSONValue {
        [
            "id": .string(id), "groups": .array(groups.map(JSONValue.string)), "enrolledAt": .string(Timestamp.format(enrolledAt)),
            "lastSeenAt": lastSeenAt.map { .string(Timestamp.format($0)) } ?? .null,
            "servedRevision": servedRevision.map { .number(.integer($0)) } ?? .null, "status": status?.json ?? .null,
        ]
    }
}

/// `GET /v1/admin/apps/{app}/devices`.
public struct DeviceList: Sendable, Hashable {
    /// The app id.
    public var app: String
    /// The devices given the app.
    public var devices: [DeviceSummary]

    /// Creates a list.
    public init(app: String, devices: [DeviceSummary]) {
        self.app = app
        self.devices = devices
    }

    /// Reads the wire form; unknown members are refused, each device's at its own pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "devices"])
        app = try reader.string("app", maximumLength: 64)
        devices = try reader.array("devices") { element, location throws(DocumentError) in try DeviceSummary(json: element, at: location) }
    }

    /// The wire form.
    public var json: JSONValue { ["app": .string(app), "devices": .array(devices.map(\.json))] }
}

/// `GET /v1/admin/apps/{app}/devices/{id}/explain`: a device's effective values and the scope
/// that set each (`defaults`, `app`, `group:NAME`, `device:ID`). Secrets are masked.
public struct Explanation: Sendable, Hashable {
    /// The app id.
    public var app: String
    /// The device's id (`d-…`).
    public var device: String
    /// The metadata version the values were validated against.
    public var schemaVersion: Int64
    /// The revision of the app's settings last served to the device; `nil` before its first fetch.
    public var servedRevision: Int64?
    /// The device's effective values, by setting name; a secret reads `"********"`.
    public var values: JSONObject
    /// For each key of ``values``, the scope that set it: `defaults` (the metadata), `app`,
    /// `group:NAME` or `device:ID`. A member named by a JSON pointer (`/playlist/0/content`) is one of
    /// the device's key-path values; its source is the device, or says why the value no longer fits.
    public var sources: [String: String]
    /// The device's facts (``DeviceInfo``).
    public var deviceInfo: JSONObject
    /// What the server asks of the device's agent for this app, and where each key was set.
    public var policy: DevicePolicy.AppPolicy

    /// Creates an explanation; without facts or a policy, both are empty.
    public init(
        app: String, device: String, schemaVersion: Int64, servedRevision: Int64?, values: JSONObject, sources: [String: String],
        deviceInfo: JSONObject = [:], policy: DevicePolicy.AppPolicy = DevicePolicy.AppPolicy()
    ) {
        self.deviceInfo = deviceInfo
        self.policy = policy
        self.app = app
        self.device = device
        self.schemaVersion = schemaVersion
        self.servedRevision = servedRevision
        self.values = values
        self.sources = sources
    }

    /// Reads the wire form; unknown members are refused. `deviceInfo` and `policy` may be absent, and are then empty.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(
            json, allowed: ["app", "device", "schemaVersion", "servedRevision", "values", "sources", "deviceInfo", "policy"])
        app = try reader.string("app", maximumLength: 64)
        device = try reader.string("device", maximumLength: 128)
        schemaVersion = try reader.count("schemaVersion")
        servedRevision = try reader.nullableCount("servedRevision")
        values = try reader.values("values")
        var sources: [String: String] = [:]
        for (key, value) in try reader.values("sources") {
            guard case .string(let scope) = value else {
                throw DocumentError(at: JSONPointer.root.appending("sources").appending(key), "must be a string")
            }
            sources[key] = scope
        }
        self.sources = sources
        deviceInfo = reader.object["deviceInfo"] == nil ? [:] : try reader.values("deviceInfo")
        policy =
            try reader.object["policy"].map { value throws(DocumentError) in
                try DevicePolicy.AppPolicy(json: value, at: JSONPointer.root.appending("policy"))
            } ?? DevicePolicy.AppPolicy()
    }

    /// One row per setting, each followed by the device's key-path values inside it (a member
    /// of ``sources`` named by a JSON pointer, `/playlist/0/content`), shown as a key path
    /// (`playlist/0/content`) with the value there. A key-path value the setting no longer has a
    /// place for is shown with its source, which says why (and no value).
    public var rows: [(key: String, value: JSONValue?, source: String)] {
        var rows: [(key: String, value: JSONValue?, source: String)] = []
        let keyPaths = sources.keys.filter { $0.hasPrefix("/") }.compactMap { name in JSONPointer(name).map { (name, $0) } }
            .sorted { $0.0 < $1.0 }
        for (key, value) in values {
            rows.append((key, value, sources[key] ?? "-"))
            for (name, path) in keyPaths where path.tokens.first == key {
                rows.append((path.keyPath, JSONValue.object(values)[pointer: path], sources[name] ?? "-"))
            }
        }
        return rows
    }

    /// The wire form, `sources` in key order.
    public var json: JSONValue {
        var sourceObject = JSONObject()
        for key in sources.keys.sorted() { sourceObject[key] = .string(sources[key] ?? "") }
        return [
            "app": .string(app), "device": .string(device), "schemaVersion": .number(.integer(schemaVersion)),
            "servedRevision": servedRevision.map { .number(.integer($0)) } ?? .null, "values": .object(values),
            "sources": .object(sourceObject), "deviceInfo": .object(deviceInfo),
            "policy": policy.json,
        ]
    }
}
