import FleetJSON

/// An account's API token as listed (`GET /v1/admin/tokens`): never the token itself.
public struct APITokenInfo: Sendable, Hashable {
    /// The token's id (`at-…`), which revokes it.
    public var id: String
    /// What it is for (`ci-deploy`).
    public var name: String
    /// The account it acts as.
    public var account: String
    public var createdAt: Int64
    /// After this it is refused.
    public var expiresAt: Int64
    /// When it was last used, to within a minute; `nil` before its first use.
    public var lastUsedAt: Int64?
    /// The client address it was last used from.
    public var lastUsedFrom: String?
    /// A revoked token is refused; it stays listed as long as an expired one (30 days after its expiry).
    public var revoked: Bool

    public init(
        id: String, name: String, account: String, createdAt: Int64, expiresAt: Int64, lastUsedAt: Int64? = nil,
        lastUsedFrom: String? = nil, revoked: Bool = false
    ) {
        self.id = id
        self.name = name
        self.account = account
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.lastUsedAt = lastUsedAt
        self.lastUsedFrom = lastUsedFrom
        self.revoked = revoked
    }

    /// Whether `name` may name a token: 1 to 64 characters, no control characters.
    public static func isValidName(_ name: String) -> Bool {
        (1...64).contains(name.unicodeScalars.count) && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// Reads the wire form at `location`; unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location,
            allowed: ["id", "name", "account", "createdAt", "expiresAt", "lastUsedAt", "lastUsedFrom", "revoked"])
        id = try reader.string("id", maximumLength: 64)
        name = try reader.string("name", maximumLength: 64)
        account = try reader.string("account", maximumLength: 64)
        createdAt = try reader.timestamp("createdAt")
        expiresAt = try reader.timestamp("expiresAt")
        lastUsedAt = try reader.nullableTimestamp("lastUsedAt")
        lastUsedFrom = reader.object["lastUsedFrom"] == .null ? nil : try reader.optionalString("lastUsedFrom", maximumLength: 64)
        revoked = try reader.optionalBool("revoked") ?? false
    }

    /// The wire form, every member written (`null` for what is not known).
    public var json: JSONValue {
        [
            "id": .string(id), "name": .string(name), "account": .string(account), "createdAt": .string(Timestamp.format(createdAt)),
            "expiresAt": .string(Timestamp.format(expiresAt)), "lastUsedAt": lastUsedAt.map { .string(Timestamp.format($0)) } ?? .null,
            "lastUsedFrom": lastUsedFrom.map(JSONValue.string) ?? .null, "revoked": .bool(revoked),
        ]
    }
}

/// `GET /v1/admin/tokens`.
public struct APITokenList: Sendable, Hashable {
    public var tokens: [APITokenInfo]

    public init(tokens: [APITokenInfo]) { self.tokens = tokens }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["tokens"])
        tokens = try reader.array("tokens") { element, location throws(DocumentError) in try APITokenInfo(json: element, at: location) }
    }

    public var json: JSONValue { ["tokens": .array(tokens.map(\.json))] }
}

/// `POST /v1/admin/tokens`: a new API token for the caller (or, for an owner, another account).
public struct APITokenRequest: Sendable, Hashable {
    /// The longest a token may live: 400 days (a token that never expires is one nobody rotates).
    public static let longestLifetime: Int64 = 400 * 86_400
    /// How long a token lives when the request does not say: 90 days.
    public static let defaultLifetime: Int64 = 90 * 86_400

    public var name: String
    /// Seconds from now until it expires (1 to ``longestLifetime``).
    public var expiresIn: Int64
    /// The account it acts as (`nil`: the caller's own).
    public var account: String?

    public init(name: String, expiresIn: Int64 = APITokenRequest.defaultLifetime, account: String? = nil) {
        self.name = name
        self.expiresIn = expiresIn
        self.account = account
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["name", "expiresIn", "account"])
        name = try reader.string("name", maximumLength: 64)
        guard APITokenInfo.isValidName(name) else {
            throw DocumentError(at: JSONPointer.root.appending("name"), "must be 1 to 64 characters without control characters")
        }
        expiresIn = try reader.integer("expiresIn", in: 60...Self.longestLifetime, default: Self.defaultLifetime)
        account = try reader.optionalString("account", maximumLength: 64)
    }

    public var json: JSONValue {
        var object: JSONObject = ["name": .string(name), "expiresIn": .number(.integer(expiresIn))]
        if let account { object["account"] = .string(account) }
        return .object(object)
    }
}

/// The answer to `POST /v1/admin/tokens`: the token, shown this once (the server keeps only its hash).
public struct CreatedAPIToken: Sendable, Hashable {
    public var info: APITokenInfo
    /// `fsk_…`.
    public var token: String

    public init(info: APITokenInfo, token: String) {
        self.info = info
        self.token = token
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        guard case .object(var object) = json else { throw DocumentError(at: .root, "must be an object") }
        guard case .string(let token)? = object["token"] else {
            throw DocumentError(at: JSONPointer.root.appending("token"), "must be a string")
        }
        object["token"] = nil
        self.token = token
        info = try APITokenInfo(json: .object(object))
    }

    public var json: JSONValue {
        guard case .object(var object) = info.json else { return info.json }
        object["token"] = .string(token)
        return .object(object)
    }
}
