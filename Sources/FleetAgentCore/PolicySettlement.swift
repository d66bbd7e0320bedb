import FleetJSON
import FleetProtocol

/// Where one key of the agent's policy came from.
public enum PolicySource: Sendable, Hashable, CustomStringConvertible {
    /// The device's owner set it in the configuration file: it wins over the server.
    case pinned
    /// The server's policy at this scope.
    case server(PolicyScope)
    /// Neither set it: the agent's default.
    case defaulted

    public var description: String {
        switch self {
        case .pinned: "pinned in the configuration file"
        case .server(let scope): "server (\(scope))"
        case .defaulted: "default"
        }
    }
}

/// The agent's policy as settled from the server's (``DevicePolicy``) and the configuration
/// file's: for each key, a value the file sets (a pin) wins, then the server's, then the
/// default. Polling and reporting are per app (``PollTuning``); the log level is the agent's,
/// the most verbose any of its apps' policies asks for.
public struct SettledPolicy: Sendable, Hashable {
    /// One key's value as shown, and where it came from.
    public struct Entry: Sendable, Hashable {
        public var value: JSONValue
        public var source: PolicySource

        public init(value: JSONValue, source: PolicySource) {
            self.value = value
            self.source = source
        }
    }

    public var logLevel: Entry
    /// Each app's keys other than the log level.
    public var apps: [String: [AgentPolicy.Key: Entry]]

    /// Settles the policy of `apps`.
    ///
    /// - Parameters:
    ///   - local: the configuration file's polling and reporting (defaults filled in).
    ///   - localLogLevel: the configuration file's log level (or the default).
    ///   - pinned: the keys the file sets itself.
    ///   - server: what the server asks.
    public static func settle(
        local: PollTuning, localLogLevel: String, pinned: Set<AgentPolicy.Key>, server: DevicePolicy, apps: [String]
    ) -> SettledPolicy {
        func localValue(_ key: AgentPolicy.Key) -> JSONValue {
            switch key {
            case .logLevel: .string(localLogLevel)
            case .pollInterval: seconds(local.pollInterval)
            case .longPollWait: .number(.integer(Int64(local.longPollWait)))
            case .jitter: seconds(local.jitter)
            case .statusReports: .string(local.reportDetail.rawValue)
            }
        }
        func entry(_ key: AgentPolicy.Key, _ serverPolicy: DevicePolicy.AppPolicy?) -> Entry {
            if !pinned.contains(key), let value = serverPolicy?.policy[key], let scope = serverPolicy?.sources[key] {
                return Entry(value: value, source: .server(scope))
            }
            return Entry(value: localValue(key), source: pinned.contains(key) ? .pinned : .defaulted)
        }
        var byApp: [String: [AgentPolicy.Key: Entry]] = [:]
        for app in apps {
            var entries: [AgentPolicy.Key: Entry] = [:]
            for key in AgentPolicy.Key.allCases where key != .logLevel { entries[key] = entry(key, server.apps[app]) }
            byApp[app] = entries
        }
        var logLevel = entry(.logLevel, nil)
        if !pinned.contains(.logLevel) {
            let asked = apps.compactMap { app in
                server.apps[app].flatMap { policy in
                    policy.policy.logLevel.flatMap { level in policy.sources[.logLevel].map { (level, $0) } }
                }
            }
            if let verbose = asked.min(by: { Self.rank($0.0) < Self.rank($1.0) }) {
                logLevel = Entry(value: .string(verbose.0), source: .server(verbose.1))
            }
        }
        return SettledPolicy(logLevel: logLevel, apps: byApp)
    }

    private static func rank(_ level: String) -> Int { AgentPolicy.logLevels.firstIndex(of: level) ?? .max }

    /// A duration as a JSON number of seconds (whole when it is whole).
    static func seconds(_ duration: Duration) -> JSONValue {
        let (whole, attoseconds) = duration.components
        if attoseconds == 0 { return .number(.integer(whole)) }
        return .number(.double(Double(whole) + Double(attoseconds) / 1e18))
    }

    /// The log level's name.
    public var logLevelName: String { logLevel.value.stringValue ?? "info" }

    /// How `app` polls and reports.
    public func tuning(for app: String) -> PollTuning? {
        guard let entries = apps[app] else { return nil }
        func seconds(_ key: AgentPolicy.Key) -> Duration {
            .milliseconds(Int64(((entries[key]?.value.numberValue?.doubleValue ?? 0) * 1000).rounded()))
        }
        let detail = entries[.statusReports]?.value.stringValue.flatMap(AgentPolicy.ReportDetail.init(rawValue:)) ?? .full
        return PollTuning(
            longPollWait: Int(entries[.longPollWait]?.value.numberValue?.int64Value ?? 0), pollInterval: seconds(.pollInterval),
            jitter: seconds(.jitter), reportDetail: detail)
    }

    /// The form `policy.json` keeps (and `fleetset status` shows).
    public var json: JSONValue {
        func entryJSON(_ entry: Entry) -> JSONValue { ["value": entry.value, "source": .string(entry.source.description)] }
        var appsObject = JSONObject()
        for (app, entries) in apps {
            var object = JSONObject()
            for key in AgentPolicy.Key.allCases { object[key.rawValue] = entries[key].map(entryJSON) }
            appsObject[app] = .object(object)
        }
        return ["logLevel": entryJSON(logLevel), "apps": .object(appsObject)]
    }
}
