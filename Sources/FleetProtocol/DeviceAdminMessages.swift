import FleetJSON

/// One device as the admin manages it (`GET /v1/admin/devices`, `GET`/`PATCH
/// /v1/admin/devices/{id}`): the apps it may read and write, its groups, whether it is
/// disabled.
public struct DeviceRecord: Sendable, Hashable {
    /// The device's id (`d-…`).
    public var id: String
    /// The apps the device may read and write.
    public var apps: [String]
    /// The groups the device is in.
    public var groups: [String]
    /// A disabled device's token is refused (401) until it is enabled again.
    public var disabled: Bool
    /// When the device enrolled, in seconds since the epoch (RFC 3339 on the wire).
    public var enrolledAt: Int64
    /// When the device last made a request, in seconds since the epoch (to within a minute); `nil`
    /// when the server has never recorded one.
    public var lastSeenAt: Int64?
    /// The admin asked for a new token; the agent fetches one at its next request.
    public var tokenRotationRequested: Bool
    /// What the device reported of itself (``DeviceInfo``); empty before its first report.
    public var info: JSONObject
    /// When its facts last changed.
    public var infoUpdatedAt: Int64?

    /// Creates a record; without facts, ``info`` is empty and ``infoUpdatedAt`` is `nil`.
    public init(
        id: String, apps: [String], groups: [String], disabled: Bool, enrolledAt: Int64, lastSeenAt: Int64?,
        tokenRotationRequested: Bool, info: JSONObject = [:], infoUpdatedAt: Int64? = nil
    ) {
        self.info = info
        self.infoUpdatedAt = infoUpdatedAt
        self.id = id
        self.apps = apps
        self.groups = groups
        self.disabled = disabled
        self.enrolledAt = enrolledAt
        self.lastSeenAt = lastSeenAt
        self.tokenRotationRequested = tokenRotationRequested
    }

    /// Reads the wire form at `location` (an element of ``DeviceRecordList/devices``, or the whole
    /// answer); unknown members are refused. `disabled`, `tokenRotationRequested`, `info` and
    /// `infoUpdatedAt` may be absent: false, empty, `nil`.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location,
            allowed: ["id", "apps", "groups", "disabled", "enrolledAt", "lastSeenAt", "tokenRotationRequested", "info", "infoUpdatedAt"])
        id = try reader.string("id", maximumLength: 128)
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        groups = try reader.names("groups", maximumCount: 128) ?? []
        disabled = try reader.optionalBool("disabled") ?? false
        enrolledAt = try reader.timestamp("enrolledAt")
        lastSeenAt = try reader.nullableTimestamp("lastSeenAt")
        tokenRotationRequested = try reader.optionalBool("tokenRotationRequested") ?? false
        info = reader.object["info"] == nil ? [:] : try reader.values("info")
        infoUpdatedAt = reader.object["infoUpdatedAt"] == nil ? nil : try reader.nullableTimestamp("infoUpdatedAt")
    }

    /// The wire form, every member written (`null` for a time the server does not have).
    public var json: JSONValue {
        [
            "id": .string(id), "apps": .array(apps.map(JSONValue.string)), "groups": .array(groups.map(JSONValue.string)),
            "disabled": .bool(disabled), "enrolledAt": .string(Timestamp.format(enrolledAt)),
            "lastSeenAt": lastSeenAt.map { .string(Timestamp.format($0)) } ?? .null,
            "tokenRotationRequested": .bool(tokenRotationRequested), "info": .object(info),
            "infoUpdatedAt": infoUpdatedAt.map { .string(Timestamp.format($0)) } ?? .null,
        ]
    }
}

/// `GET /v1/admin/devices`.
public struct DeviceRecordList: Sendable, Hashable {
    /// Every enrolled device, or with `where` those whose facts match.
    public var devices: [DeviceRecord]

    /// Creates a list.
    public init(devices: [DeviceRecord]) {
        self.devices = devices
    }

    /// Reads the wire form; unknown members are refused, each device's at its own pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["devices"])
        devices = try reader.array("devices") { element, location throws(DocumentError) in try DeviceRecord(json: element, at: location) }
    }

    /// The wire form.
    public var json: JSONValue { ["devices": .array(devices.map(\.json))] }
}

/// `PATCH /v1/admin/devices/{id}`: what to change; absent members stay as they are.
public struct DeviceUpdate: Sendable, Hashable {
    /// The apps the device may read and write, replacing its list.
    public var apps: [String]?
    /// Its groups, replacing its list.
    public var groups: [String]?
    /// Disable (its token is refused at once, waiting long-polls included) or enable it.
    public var disabled: Bool?
    /// Ask the agent to fetch a new token at its next request.
    public var rotateToken: Bool?

    /// Creates an update; a member left `nil` is not changed.
    public init(apps: [String]? = nil, groups: [String]? = nil, disabled: Bool? = nil, rotateToken: Bool? = nil) {
        self.apps = apps
        self.groups = groups
        self.disabled = disabled
        self.rotateToken = rotateToken
    }

    /// Reads the wire form; unknown members are refused, and so is `"rotateToken": false` (a
    /// requested rotation ends only when the agent rotates).
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["apps", "groups", "disabled", "rotateToken"])
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64)
        groups = try reader.names("groups", maximumCount: 32)
        disabled = try reader.optionalBool("disabled")
        rotateToken = try reader.optionalBool("rotateToken")
        if rotateToken == false {
            throw DocumentError(
                at: JSONPointer.root.appending("rotateToken"), "can only be true (a requested rotation ends when the agent rotates)")
        }
    }

    /// The wire form, with only the members to change.
    public var json: JSONValue {
        var object = JSONObject()
        if let apps { object["apps"] = .array(apps.map(JSONValue.string)) }
        if let groups { object["groups"] = .array(groups.map(JSONValue.string)) }
        if let disabled { object["disabled"] = .bool(disabled) }
        if let rotateToken { object["rotateToken"] = .bool(rotateToken) }
        return .object(object)
    }
}

/// One enrollment token that can still be used (`GET /v1/admin/enrollment-tokens`); the token
/// itself is never shown again, only its id.
public struct EnrollmentTokenInfo: Sendable, Hashable {
    /// The token's id (`et-…`), which names it to revoke it.
    public var id: String
    /// The apps devices enrolled with the token may read and write.
    public var apps: [String]
    /// The groups devices enrolled with the token join.
    public var groups: [String]
    /// How many more devices may enroll with the token.
    public var usesLeft: Int64
    /// When the token expires, in seconds since the epoch (RFC 3339 on the wire).
    public var expiresAt: Int64

    /// Creates a token's entry.
    public init(id: String, apps: [String], groups: [String], usesLeft: Int64, expiresAt: Int64) {
        self.id = id
        self.apps = apps
        self.groups = groups
        self.usesLeft = usesLeft
        self.expiresAt = expiresAt
    }

    /// Reads the wire form at `location` (an element of ``EnrollmentTokenList/tokens``); unknown
    /// members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["id", "apps", "groups", "usesLeft", "expiresAt"])
        id = try reader.string("id", maximumLength: 128)
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        groups = try reader.names("groups", maximumCount: 32) ?? []
        usesLeft = try reader.count("usesLeft")
        expiresAt = try reader.timestamp("expiresAt")
    }

    /// The wire form, `expiresAt` as an RFC 3339 UTC timestamp.
    public var json: JSONValue {
        [
            "id": .string(id), "apps": .array(apps.map(JSONValue.string)), "groups": .array(groups.map(JSONValue.string)),
            "usesLeft": .number(.integer(usesLeft)), "expiresAt": .string(Timestamp.format(expiresAt)),
        ]
    }
}

/// `GET /v1/admin/enrollment-tokens`.
public struct EnrollmentTokenList: Sendable, Hashable {
    /// The enrollment tokens that can still be used: not expired, not used up, not revoked.
    public var tokens: [EnrollmentTokenInfo]

    /// Creates a list.
    public init(tokens: [EnrollmentTokenInfo]) {
        self.tokens = tokens
    }

    /// Reads the wire form; unknown members are refused, each token's at its own pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["tokens"])
        tokens = try reader.array("tokens") { element, location throws(DocumentError) in
            try EnrollmentTokenInfo(json: element, at: location)
        }
    }

    /// The wire form.
    public var json: JSONValue { ["tokens": .array(tokens.map(\.json))] }
}
