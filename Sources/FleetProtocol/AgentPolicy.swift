import FleetJSON

/// What the server asks of devices' agents, set by an admin at one scope
/// (``PolicyScope``): every member optional, an absent one left to a wider scope, then to the
/// agent's own configuration.
///
/// `{"logLevel": "debug", "pollInterval": 120, "longPollWait": 25, "jitter": 10, "statusReports": "brief"}`.
public struct AgentPolicy: Sendable, Hashable {
    /// The members, in the order they are shown.
    public enum Key: String, Sendable, CaseIterable {
        /// One per member of the wire form, its raw value the member's name.
        case logLevel, pollInterval, longPollWait, jitter, statusReports
    }

    /// How much a status report says.
    public enum ReportDetail: String, Sendable, CaseIterable {
        /// Every problem and the hook's output (the default).
        case full
        /// The first problem only, at most ``AgentPolicy/briefMessageLength`` characters: for
        /// large fleets where what matters is which devices fail, not each one's every detail.
        case brief
    }

    /// The levels `logLevel` accepts, most verbose first (the agent configuration's levels).
    public static let logLevels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
    /// The seconds `pollInterval` accepts.
    public static let pollIntervalRange: ClosedRange<Int64> = 5...86_400
    /// The seconds `longPollWait` accepts (0 turns long-polls off).
    public static let longPollWaitRange: ClosedRange<Int64> = 0...300
    /// The seconds `jitter` accepts.
    public static let jitterRange: ClosedRange<Int64> = 0...3_600
    /// The longest message of a ``ReportDetail/brief`` report.
    public static let briefMessageLength = 200

    /// The agent's log level, one of ``logLevels``.
    public var logLevel: String?
    /// Seconds between polls when long-polls are not possible.
    public var pollInterval: Int64?
    /// Seconds the server holds a long-poll; 0 polls on the timer only.
    public var longPollWait: Int64?
    /// Seconds: the most random delay added to a poll and before a hook.
    public var jitter: Int64?
    /// How much the agent's status reports say: every problem, or only the first.
    public var statusReports: ReportDetail?

    /// Creates a policy; a member left `nil` is not set, and so is left to a wider scope or the agent.
    public init(
        logLevel: String? = nil, pollInterval: Int64? = nil, longPollWait: Int64? = nil, jitter: Int64? = nil,
        statusReports: ReportDetail? = nil
    ) {
        self.logLevel = logLevel
        self.pollInterval = pollInterval
        self.longPollWait = longPollWait
        self.jitter = jitter
        self.statusReports = statusReports
    }

    /// Reads the wire form; unknown members and values out of range are refused, each at its
    /// pointer.
    ///
    /// - Parameter ignoringUnknownKeys: leave out members this version does not know (an agent
    ///   reading a newer server's policy) instead of refusing them.
    public init(json: JSONValue, at location: JSONPointer = .root, ignoringUnknownKeys: Bool = false) throws(DocumentError) {
        self.init()
        let known = Set(Key.allCases.map(\.rawValue))
        let present = Set(json.objectValue.map { Array($0.keys) } ?? [])
        let reader = try ObjectReader(json, at: location, allowed: ignoringUnknownKeys ? known.union(present) : known)
        for key in Key.allCases {
            guard let value = reader.object[key.rawValue] else { continue }
            try set(key, to: value, at: location.appending(key.rawValue))
        }
    }

    /// Sets `key` from a JSON value (`null` unsets it).
    ///
    /// - Throws: when the value is not one `key` accepts, at `location`.
    public mutating func set(_ key: Key, to value: JSONValue, at location: JSONPointer) throws(DocumentError) {
        if value == .null {
            unset(key)
            return
        }
        func seconds(_ range: ClosedRange<Int64>) throws(DocumentError) -> Int64 {
            guard case .number(let number) = value, number.isInteger, let seconds = number.int64Value, range.contains(seconds) else {
                throw DocumentError(at: location, "must be whole seconds from \(range.lowerBound) to \(range.upperBound)")
            }
            return seconds
        }
        switch key {
        case .logLevel:
            guard case .string(let level) = value, Self.logLevels.contains(level) else {
                throw DocumentError(at: location, "must be one of \(Self.logLevels.joined(separator: ", "))")
            }
            logLevel = level
        case .pollInterval: pollInterval = try seconds(Self.pollIntervalRange)
        case .longPollWait: longPollWait = try seconds(Self.longPollWaitRange)
        case .jitter: jitter = try seconds(Self.jitterRange)
        case .statusReports:
            guard case .string(let text) = value, let detail = ReportDetail(rawValue: text) else {
                throw DocumentError(at: location, "must be one of \(ReportDetail.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            statusReports = detail
        }
    }

    /// Removes `key`.
    public mutating func unset(_ key: Key) {
        switch key {
        case .logLevel: logLevel = nil
        case .pollInterval: pollInterval = nil
        case .longPollWait: longPollWait = nil
        case .jitter: jitter = nil
        case .statusReports: statusReports = nil
        }
    }

    /// The value of `key`, `nil` when unset.
    public subscript(key: Key) -> JSONValue? {
        switch key {
        case .logLevel: logLevel.map(JSONValue.string)
        case .pollInterval: pollInterval.map { .number(.integer($0)) }
        case .longPollWait: longPollWait.map { .number(.integer($0)) }
        case .jitter: jitter.map { .number(.integer($0)) }
        case .statusReports: statusReports.map { .string($0.rawValue) }
        }
    }

    /// Whether no member is set.
    public var isEmpty: Bool { Key.allCases.allSatisfy { self[$0] == nil } }

    /// The wire form: only the members set.
    public var json: JSONValue {
        var object = JSONObject()
        for key in Key.allCases { object[key.rawValue] = self[key] }
        return .object(object)
    }

    /// `logLevel=debug, pollInterval=120s`: the members set, for lists.
    public var summary: String {
        Key.allCases.compactMap { key in
            self[key].map { value in
                let text = value.stringValue ?? value.serialized()
                return key == .logLevel || key == .statusReports ? "\(key.rawValue)=\(text)" : "\(key.rawValue)=\(text)s"
            }
        }.joined(separator: ", ")
    }
}

/// Where an ``AgentPolicy`` is set: every device given an app (`app:kiosk`), every device in a
/// group (`group:lobby`), or one device (`device:d-…`). For one device and app, each key comes
/// from the most specific scope that sets it: the device, then its groups (in name order, a
/// later group winning, as with settings values), then the app.
public enum PolicyScope: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// `app:NAME`: every device given the app.
    case app(String)
    /// `group:NAME`: every device in the group.
    case group(String)
    /// `device:ID`: the one device.
    case device(String)

    /// Reads `app:NAME`, `group:NAME` or `device:ID`; names follow the one rule of every scope
    /// (``Scope/isValidName(_:)``: 1 to 128 characters, no control characters).
    public init?(_ text: String) {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        let name = String(text[text.index(after: colon)...])
        guard Scope.isValidName(name) else { return nil }
        switch text[..<colon] {
        case "app": self = .app(name)
        case "group": self = .group(name)
        case "device": self = .device(name)
        default: return nil
        }
    }

    /// `app:NAME`, `group:NAME` or `device:ID`: the form ``init(_:)`` reads and the wire carries.
    public var description: String {
        switch self {
        case .app(let name): "app:\(name)"
        case .group(let name): "group:\(name)"
        case .device(let id): "device:\(id)"
        }
    }

    /// Orders scopes by their text (``description``), as lists show them.
    public static func < (lhs: PolicyScope, rhs: PolicyScope) -> Bool { lhs.description < rhs.description }
}

/// `GET /v1/admin/policies`: every scope's policy.
public struct PolicyList: Sendable, Hashable {
    /// Each scope that has a policy, with that policy.
    public var policies: [(scope: PolicyScope, policy: AgentPolicy)]

    /// Creates a list.
    public init(policies: [(scope: PolicyScope, policy: AgentPolicy)]) {
        self.policies = policies
    }

    /// Reads the wire form; unknown members, a malformed scope and a policy value out of range are
    /// refused, each at its pointer.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["policies"])
        policies = try reader.array("policies") { element, location throws(DocumentError) in
            let entry = try ObjectReader(element, at: location, allowed: ["scope", "policy"])
            let text = try entry.string("scope", maximumLength: 200)
            guard let scope = PolicyScope(text) else {
                throw DocumentError(at: location.appending("scope"), "must be app:NAME, group:NAME or device:ID")
            }
            return (scope, try AgentPolicy(json: entry.object["policy"] ?? .null, at: location.appending("policy")))
        }
    }

    /// The wire form: `{"policies": [{"scope": "group:lobby", "policy": {…}}]}`.
    public var json: JSONValue {
        ["policies": .array(policies.map { ["scope": .string($0.scope.description), "policy": $0.policy.json] })]
    }

    /// Whether both lists hold the same scopes with the same policies, in the same order.
    public static func == (lhs: PolicyList, rhs: PolicyList) -> Bool {
        lhs.policies.map(\.scope) == rhs.policies.map(\.scope) && lhs.policies.map(\.policy) == rhs.policies.map(\.policy)
    }

    /// Hashes the scopes and policies in order, as ``==(_:_:)`` compares them.
    public func hash(into hasher: inout Hasher) {
        for (scope, policy) in policies {
            hasher.combine(scope)
            hasher.combine(policy)
        }
    }
}

/// What the server asks of one device's agent (`GET /v1/device/policy`, and in `explain`): for
/// each of its apps, the policy that applies and the scope each key came from. Its ``tag`` is
/// the `Fleetset-Policy` header of every settings answer, so the agent fetches it again only
/// when it changed.
public struct DevicePolicy: Sendable, Hashable {
    /// One app's policy on the device.
    public struct AppPolicy: Sendable, Hashable {
        /// The policy that applies: each key from the most specific scope that sets it.
        public var policy: AgentPolicy
        /// The scope each key set in ``policy`` came from.
        public var sources: [AgentPolicy.Key: PolicyScope]

        /// Creates an app's policy; the defaults are an empty policy with no sources.
        public init(policy: AgentPolicy = AgentPolicy(), sources: [AgentPolicy.Key: PolicyScope] = [:]) {
            self.policy = policy
            self.sources = sources
        }

        /// Reads `{"policy": {…}, "sources": {"logLevel": "group:lobby"}}`; with
        /// `ignoringUnknownKeys`, keys this version does not know are left out.
        public init(json: JSONValue, at location: JSONPointer, ignoringUnknownKeys: Bool = false) throws(DocumentError) {
            let entry = try ObjectReader(json, at: location, allowed: ["policy", "sources"])
            policy = try AgentPolicy(
                json: entry.object["policy"] ?? .null, at: location.appending("policy"), ignoringUnknownKeys: ignoringUnknownKeys)
            sources = [:]
            for (keyText, scopeValue) in try entry.values("sources") {
                if ignoringUnknownKeys, AgentPolicy.Key(rawValue: keyText) == nil { continue }
                guard let key = AgentPolicy.Key(rawValue: keyText), case .string(let text) = scopeValue, let scope = PolicyScope(text)
                else {
                    throw DocumentError(at: location.appending("sources").appending(keyText), "must name a policy key and its scope")
                }
                sources[key] = scope
            }
        }

        /// The wire form: `{"policy": {…}, "sources": {"logLevel": "group:lobby"}}`.
        public var json: JSONValue {
            var object = JSONObject()
            for (key, scope) in sources { object[key.rawValue] = .string(scope.description) }
            return ["policy": policy.json, "sources": .object(object)]
        }
    }

    /// By app id, the policy that applies to it on the device; apps without one are absent.
    public var apps: [String: AppPolicy]

    /// Creates a device's policy; the default is no policy for any app.
    public init(apps: [String: AppPolicy] = [:]) {
        self.apps = apps
    }

    /// The effective policy of each of `apps` on a device in `groups` with id `deviceID`, from
    /// every scope's policy.
    public static func resolve(
        apps: [String], groups: [String], deviceID: String, policies: [PolicyScope: AgentPolicy]
    ) -> DevicePolicy {
        var result = DevicePolicy()
        for app in apps {
            // Widest first: each narrower scope overrides what it sets.
            let sortedGroups = groups.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            let scopes = [PolicyScope.app(app)] + sortedGroups.map(PolicyScope.group) + [.device(deviceID)]
            var resolved = AppPolicy()
            for scope in scopes {
                guard let policy = policies[scope] else { continue }
                for key in AgentPolicy.Key.allCases {
                    guard let value = policy[key] else { continue }
                    try? resolved.policy.set(key, to: value, at: .root)
                    resolved.sources[key] = scope
                }
            }
            if !resolved.policy.isEmpty { result.apps[app] = resolved }
        }
        return result
    }

    /// Reads the wire form; with `ignoringUnknownKeys` (an agent reading a newer server's
    /// policy), policy keys this version does not know are left out.
    public init(json: JSONValue, ignoringUnknownKeys: Bool = false) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["apps"])
        var apps: [String: AppPolicy] = [:]
        for (app, value) in try reader.values("apps") {
            apps[app] = try AppPolicy(
                json: value, at: JSONPointer.root.appending("apps").appending(app), ignoringUnknownKeys: ignoringUnknownKeys)
        }
        self.apps = apps
    }

    /// The wire form: `{"apps": {"kiosk": {"policy": {…}, "sources": {…}}}}`; its text with sorted
    /// keys is what ``tag`` hashes.
    public var json: JSONValue {
        var object = JSONObject()
        for (app, resolved) in apps { object[app] = resolved.json }
        return ["apps": .object(object)]
    }

    /// Names this policy: 16 hex digits of FNV-1a over its canonical text, `0` for no policy.
    public var tag: String {
        guard !apps.isEmpty else { return "0" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in json.serialized(.sortedKeys).utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let digits = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
