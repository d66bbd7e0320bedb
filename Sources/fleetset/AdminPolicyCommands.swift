import ArgumentParser
import FleetClient
import FleetJSON
import FleetProtocol

/// `fleetset admin policy …`: what the server asks of devices' agents.
struct AdminPolicy: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy",
        abstract: "Set the agents' log level, polling and report detail per app, group or device.",
        discussion: """
            Keys: logLevel (trace … critical), pollInterval, longPollWait, jitter (seconds), \
            statusReports (full or brief). For one device and app, each key comes from the device, \
            then its groups (in name order, a later one winning), then the app. A key the device's \
            configuration file sets is pinned there and wins; fleetset status shows where each came from.
            """,
        subcommands: [AdminPolicyList.self, AdminPolicyShow.self, AdminPolicySet.self, AdminPolicyUnset.self],
        defaultSubcommand: AdminPolicyList.self)
}

/// `fleetset admin policy [list]`.
struct AdminPolicyList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List every scope's policy.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let list = try await server.withClient { try await $0.policies() }
        server.output(list.json) {
            list.policies.isEmpty
                ? "no agent policy is set"
                : Table.render([["SCOPE", "POLICY"]] + list.policies.map { [$0.scope.description, $0.policy.summary] })
        }
    }
}

/// `fleetset admin policy show DEVICE`.
struct AdminPolicyShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show", abstract: "Show what the server asks of one device's agent, app by app, and where each key was set.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The device id.")
    var device: String

    func run() async throws {
        let policy = try await server.withClient { try await $0.devicePolicy(id: device) }
        server.output(policy.json) {
            var rows = [["APP", "KEY", "VALUE", "FROM"]]
            for app in policy.apps.keys.sorted() {
                let resolved = policy.apps[app]!
                for key in AgentPolicy.Key.allCases {
                    guard let value = resolved.policy[key] else { continue }
                    rows.append([app, key.rawValue, value.stringValue ?? value.serialized(), resolved.sources[key]?.description ?? "-"])
                }
            }
            return rows.count == 1 ? TerminalText.escaped("no agent policy reaches \(device)") : Table.render(rows)
        }
    }
}

/// The scope a policy command names: exactly one of `--app`, `--group`, `--device`.
struct PolicyScopeOptions: ParsableArguments {
    @Option(help: "Every device given this app.")
    var app: String?

    @Option(help: "Every device in this group.")
    var group: String?

    @Option(help: "One device.")
    var device: String?

    func validate() throws {
        guard [app, group, device].compactMap(\.self).count == 1 else {
            throw ValidationError("name the scope with exactly one of --app, --group, --device")
        }
    }

    var scope: PolicyScope {
        if let app { return .app(app) }
        if let group { return .group(group) }
        return .device(device ?? "")
    }

    /// Sends `patch` to the scope's policy and prints the policy it leaves.
    func apply(_ patch: JSONObject, through server: ServerOptions) async throws {
        let scope = self.scope
        let policy = try await server.withClient { try await $0.patchPolicy(scope: scope, patch) }
        server.output(policy.json) { TerminalText.escaped("\(scope): \(policy.isEmpty ? "no policy" : policy.summary)") }
    }
}

/// `fleetset admin policy set --app A|--group G|--device D KEY=VALUE…`.
struct AdminPolicySet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set policy keys at one scope, e.g. logLevel=debug pollInterval=120.")

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: PolicyScopeOptions

    @Argument(help: "KEY=VALUE: logLevel, pollInterval, longPollWait, jitter (seconds), statusReports (full, brief).")
    var assignments: [String] = []

    func validate() throws {
        guard !assignments.isEmpty else { throw ValidationError("give at least one KEY=VALUE") }
        _ = try patch()
    }

    /// The merge patch: numbers for the seconds, text for the rest.
    func patch() throws -> JSONObject {
        var patch = JSONObject()
        for assignment in assignments {
            guard let equals = assignment.firstIndex(of: "="), let key = AgentPolicy.Key(rawValue: String(assignment[..<equals])) else {
                throw ValidationError(
                    "\"\(assignment)\" is not KEY=VALUE with a key of \(AgentPolicy.Key.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            let text = String(assignment[assignment.index(after: equals)...])
            switch key {
            case .logLevel, .statusReports:
                patch[key.rawValue] = .string(text)
            case .pollInterval, .longPollWait, .jitter:
                guard let seconds = Int64(text) else { throw ValidationError("\(key.rawValue) is whole seconds, not \"\(text)\"") }
                patch[key.rawValue] = .number(.integer(seconds))
            }
        }
        return patch
    }

    func run() async throws {
        let patch = try patch()
        try await target.apply(patch, through: server)
    }
}

/// `fleetset admin policy unset --app A|--group G|--device D KEY…`.
struct AdminPolicyUnset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unset", abstract: "Remove policy keys at one scope.")

    @OptionGroup var server: ServerOptions
    @OptionGroup var target: PolicyScopeOptions

    @Argument(help: "The keys to remove.")
    var keys: [String] = []

    func validate() throws {
        guard !keys.isEmpty else { throw ValidationError("give at least one key") }
        for key in keys where AgentPolicy.Key(rawValue: key) == nil {
            throw ValidationError("\"\(key)\" is not a policy key (\(AgentPolicy.Key.allCases.map(\.rawValue).joined(separator: ", ")))")
        }
    }

    func run() async throws {
        var patch = JSONObject()
        for key in keys { patch[key] = .null }
        try await target.apply(patch, through: server)
    }
}
