import FleetJSON

/// What an account may do on the admin API: each admin operation needs one right (the server's
/// permission table, `AdminOperation`, says which), and each ``Role`` has a fixed set of them.
/// A request without the right is refused with 403 and the code ``ErrorCode/needs(_:)`` names it.
public enum AdminRight: String, Sendable, Hashable, CaseIterable, Comparable {
    /// Read apps, metadata, values (secrets masked), devices, rollouts, explanations, policies.
    case read
    /// Read the history of value and metadata changes.
    case readHistory = "read-history"
    /// Read the audit trail.
    case readAudit = "read-audit"
    /// Scrape `/metrics`.
    case readMetrics = "read-metrics"
    /// Store an app's metadata.
    case writeMetadata = "write-metadata"
    /// Change values at a scope (key paths included) and revert.
    case writeValues = "write-values"
    /// Start a staged rollout.
    case startRollouts = "start-rollouts"
    /// Resume or abort a running rollout.
    case steerRollouts = "steer-rollouts"
    /// Disable or enable a device, ask it to rotate its token.
    case operateDevices = "operate-devices"
    /// Change a device's apps and groups, delete it.
    case manageDevices = "manage-devices"
    /// Make, list and revoke enrollment tokens.
    case manageEnrollment = "manage-enrollment"
    /// Change agent policies.
    case writePolicies = "write-policies"
    /// Manage accounts, and other accounts' API tokens.
    case manageAccounts = "manage-accounts"
    /// Make, list and revoke one's own API tokens.
    case ownTokens = "own-tokens"
    /// Subscribe URLs to events (webhooks), see their messages, redeliver, rotate their secrets.
    case manageWebhooks = "manage-webhooks"

    public static func < (left: AdminRight, right: AdminRight) -> Bool {
        allCases.firstIndex(of: left)! < allCases.firstIndex(of: right)!
    }
}

/// What an account is for, and so which rights it has.
public enum Role: String, Sendable, Hashable, CaseIterable {
    /// Everything, accounts included.
    case owner
    /// Everything except accounts.
    case admin
    /// An app's settings: metadata, values, key paths, rollouts, revert; only the apps (and,
    /// when given, groups) of its scope.
    case editor
    /// Steering without changing settings: rollouts resumed and aborted, devices disabled and
    /// enabled, token rotations asked for.
    case `operator`
    /// Reads what its scope covers.
    case viewer
    /// The history and the audit trail only.
    case auditor

    /// The rights of the role.
    public var rights: Set<AdminRight> {
        switch self {
        case .owner: Set(AdminRight.allCases)
        case .admin: Set(AdminRight.allCases).subtracting([.manageAccounts])
        case .editor: [.read, .readHistory, .writeMetadata, .writeValues, .startRollouts, .steerRollouts, .ownTokens]
        case .operator: [.read, .readHistory, .readMetrics, .steerRollouts, .operateDevices, .ownTokens]
        case .viewer: [.read, .readHistory, .readMetrics, .ownTokens]
        case .auditor: [.readHistory, .readAudit, .ownTokens]
        }
    }

    /// Whether an account of this role may be limited to apps and groups (``AccountScope``).
    /// Owners, admins and auditors see the whole fleet.
    public var isScoped: Bool { self == .editor || self == .operator || self == .viewer }
}

/// A person signs in; a service (a CI job, a scraper, a reseller's integration) uses API tokens.
public enum AccountKind: String, Sendable, Hashable, CaseIterable {
    case person
    case service
}

/// The part of the fleet an editor, operator or viewer may act on: apps and, optionally,
/// groups. An empty list is no limit; an editor must name its apps.
public struct AccountScope: Sendable, Hashable {
    /// The apps (empty: every app).
    public var apps: [String]
    /// The groups (empty: every group). With groups, values may be written only at those groups'
    /// scopes and at their devices'; what reaches every device of an app (its metadata, its
    /// app-scope values, its rollouts) needs an account without groups.
    public var groups: [String]

    /// Creates a scope.
    public init(apps: [String] = [], groups: [String] = []) {
        self.apps = apps
        self.groups = groups
    }

    /// No limit.
    public static let everything = AccountScope()

    /// Whether the scope limits nothing.
    public var isEverything: Bool { apps.isEmpty && groups.isEmpty }

    /// Whether the scope covers `app`.
    public func covers(app: String) -> Bool { apps.isEmpty || apps.contains(app) }

    /// Whether a device with these apps and groups is in the scope: one of its apps and (with
    /// groups) one of its groups.
    public func covers(deviceApps: [String], groups deviceGroups: [String]) -> Bool {
        (apps.isEmpty || deviceApps.contains(where: apps.contains)) && (groups.isEmpty || deviceGroups.contains(where: groups.contains))
    }

    /// Whether the scope covers a group's values.
    public func covers(group: String) -> Bool { groups.isEmpty || groups.contains(group) }

    /// Reads the wire form at `location`; unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["apps", "groups"])
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        groups = try reader.names("groups", maximumCount: 32) ?? []
    }

    /// The wire form.
    public var json: JSONValue { ["apps": .array(apps.map(JSONValue.string)), "groups": .array(groups.map(JSONValue.string))] }

    /// `apps kiosk, signage; groups lobby`, or `everything`.
    public var summary: String {
        if isEverything { return "everything" }
        var parts: [String] = []
        if !apps.isEmpty { parts.append("apps " + apps.joined(separator: ", ")) }
        if !groups.isEmpty { parts.append("groups " + groups.joined(separator: ", ")) }
        return parts.joined(separator: "; ")
    }
}

/// An account as the admin API shows it (`GET /v1/admin/accounts`): never a password or a
/// second factor's secret.
public struct Account: Sendable, Hashable {
    /// The account's name: what the history and the audit trail say it did (`alice`, `ci-deploy`).
    public var name: String
    /// A name for people (`Alice Martin`).
    public var displayName: String
    /// The longest display name, in characters.
    public static let displayNameLength = 128
    public var kind: AccountKind
    public var role: Role
    public var scope: AccountScope
    /// A disabled account's tokens and sessions are refused.
    public var disabled: Bool
    /// Seconds since the epoch (RFC 3339 on the wire).
    public var createdAt: Int64
    public var updatedAt: Int64
    /// Whether it has a password (a person signs in with it).
    public var hasPassword: Bool = false
    /// Whether signing in also takes a code from its authenticator.
    public var hasTwoFactor: Bool = false

    /// Creates an account.
    public init(
        name: String, displayName: String, kind: AccountKind, role: Role, scope: AccountScope = .everything, disabled: Bool = false,
        createdAt: Int64, updatedAt: Int64
    ) {
        self.name = name
        self.displayName = displayName
        self.kind = kind
        self.role = role
        self.scope = scope
        self.disabled = disabled
        self.createdAt = createdAt
        self.updatedAt = updatedAt
    }

    /// Whether `name` may name an account: 1 to 64 of `a-z`, `0-9`, `.`, `_`, `-`, starting with
    /// a letter or digit (it appears in logs, the history and URLs as it is).
    public static func isValidName(_ name: String) -> Bool {
        let bytes = Array(name.utf8)
        guard (1...64).contains(bytes.count), let first = bytes.first, isLowerAlphanumeric(first) else { return false }
        return bytes.allSatisfy { isLowerAlphanumeric($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "_") || $0 == UInt8(ascii: "-") }
    }

    private static func isLowerAlphanumeric(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    /// Reads the wire form at `location`; unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location,
            allowed: ["name", "displayName", "kind", "role", "scope", "disabled", "createdAt", "updatedAt", "hasPassword", "hasTwoFactor"])
        name = try reader.string("name", maximumLength: 64)
        displayName = try reader.string("displayName", maximumLength: Self.displayNameLength)
        kind = try reader.oneOf("kind", AccountKind.self)
        role = try reader.oneOf("role", Role.self)
        scope =
            reader.object["scope"] == nil ? .everything : try AccountScope(json: reader.object["scope"]!, at: location.appending("scope"))
        disabled = try reader.optionalBool("disabled") ?? false
        createdAt = try reader.timestamp("createdAt")
        updatedAt = try reader.timestamp("updatedAt")
        hasPassword = try reader.optionalBool("hasPassword") ?? false
        hasTwoFactor = try reader.optionalBool("hasTwoFactor") ?? false
    }

    /// The wire form.
    public var json: JSONValue {
        [
            "name": .string(name), "displayName": .string(displayName), "kind": .string(kind.rawValue), "role": .string(role.rawValue),
            "scope": scope.json, "disabled": .bool(disabled), "createdAt": .string(Timestamp.format(createdAt)),
            "updatedAt": .string(Timestamp.format(updatedAt)), "hasPassword": .bool(hasPassword), "hasTwoFactor": .bool(hasTwoFactor),
        ]
    }
}

/// `GET /v1/admin/accounts`.
public struct AccountList: Sendable, Hashable {
    public var accounts: [Account]

    public init(accounts: [Account]) { self.accounts = accounts }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["accounts"])
        accounts = try reader.array("accounts") { element, location throws(DocumentError) in try Account(json: element, at: location) }
    }

    public var json: JSONValue { ["accounts": .array(accounts.map(\.json))] }
}

/// `POST /v1/admin/accounts` (every member but `displayName` and `scope` required) and
/// `PATCH /v1/admin/accounts/{name}` (a merge patch: absent members stay; `name` and `kind` cannot change).
public struct AccountRequest: Sendable, Hashable {
    public var name: String?
    public var displayName: String?
    public var kind: AccountKind?
    public var role: Role?
    public var scope: AccountScope?
    public var disabled: Bool?

    /// Creates a request; a member left `nil` is not given.
    public init(
        name: String? = nil, displayName: String? = nil, kind: AccountKind? = nil, role: Role? = nil, scope: AccountScope? = nil,
        disabled: Bool? = nil
    ) {
        self.name = name
        self.displayName = displayName
        self.kind = kind
        self.role = role
        self.scope = scope
        self.disabled = disabled
    }

    /// Reads the wire form; unknown members are refused, and so is a `name` that ``Account/isValidName(_:)`` refuses.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["name", "displayName", "kind", "role", "scope", "disabled"])
        name = try reader.optionalString("name", maximumLength: 64)
        if let name, !Account.isValidName(name) {
            throw DocumentError(
                at: JSONPointer.root.appending("name"), "must be 1 to 64 of a-z, 0-9, '.', '_' and '-', starting with a letter or digit")
        }
        displayName = try reader.optionalString("displayName", maximumLength: 128)
        kind = reader.object["kind"] == nil ? nil : try reader.oneOf("kind", AccountKind.self)
        role = reader.object["role"] == nil ? nil : try reader.oneOf("role", Role.self)
        scope = try reader.object["scope"].map { value throws(DocumentError) in
            try AccountScope(json: value, at: JSONPointer.root.appending("scope"))
        }
        disabled = try reader.optionalBool("disabled")
    }

    /// The wire form, the given members only.
    public var json: JSONValue {
        var object: JSONObject = [:]
        if let name { object["name"] = .string(name) }
        if let displayName { object["displayName"] = .string(displayName) }
        if let kind { object["kind"] = .string(kind.rawValue) }
        if let role { object["role"] = .string(role.rawValue) }
        if let scope { object["scope"] = scope.json }
        if let disabled { object["disabled"] = .bool(disabled) }
        return .object(object)
    }
}

/// `GET /v1/admin/whoami`: the caller's account and the rights its role gives it.
public struct CallerInfo: Sendable, Hashable {
    public var account: Account
    public var rights: [AdminRight]
    /// Which credential the request used: `token at-…`, `admin token file`, `session cs-…`.
    public var credential: String

    public init(account: Account, rights: [AdminRight], credential: String) {
        self.account = account
        self.rights = rights
        self.credential = credential
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["account", "rights", "credential"])
        account = try Account(json: reader.object["account"] ?? .null, at: JSONPointer.root.appending("account"))
        // A right a newer server has and this build does not know is left out.
        rights = (try reader.names("rights", maximumCount: 64) ?? []).compactMap(AdminRight.init(rawValue:))
        credential = try reader.string("credential", maximumLength: 256)
    }

    public var json: JSONValue {
        ["account": account.json, "rights": .array(rights.map { .string($0.rawValue) }), "credential": .string(credential)]
    }
}
