import ArgumentParser
import FleetClient
import FleetJSON
import FleetProtocol

/// `fleetset admin devices …`: list devices, show one, change its apps and groups, disable,
/// enable or delete it, or ask it for a new token.
struct AdminDevices: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "devices",
        abstract: "List and manage devices: their apps and groups, disabling, deleting, token rotation.",
        subcommands: [AdminDeviceList.self, AdminDeviceShow.self, AdminDeviceSet.self, AdminDeviceDelete.self],
        defaultSubcommand: AdminDeviceList.self)
}

/// `fleetset admin devices [list] [--app A]`.
struct AdminDeviceList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list",
        abstract: "List devices. With --app: the app's devices, last seen, the revision served and the latest status report.")

    @OptionGroup var server: ServerOptions

    @Option(help: "Only this app's devices, with their status for it.")
    var app: String?

    @Option(
        name: .customLong("where"),
        help:
            "Only devices whose fact matches: FACT=VALUE, FACT!=VALUE, FACT~REGEX or FACT!~REGEX, e.g. os.version=12 (repeatable; all must match)."
    )
    var filters: [String] = []

    func validate() throws {
        _ = try AdminGroupDefine.conditions(filters)
        if app != nil, !filters.isEmpty { throw ValidationError("--where lists every device; leave out --app") }
    }

    func run() async throws {
        guard let app else {
            let list = try await server.withClient { try await $0.allDevices(where: filters.compactMap(DeviceInfoFilter.init)) }
            server.output(list.json) {
                var rows = [["DEVICE", "APPS", "GROUPS", "STATE", "LAST SEEN", "SYSTEM"]]
                for device in list.devices { rows.append(Self.row(device) + [DeviceInfo.summary(device.info)]) }
                return Table.render(rows)
            }
            return
        }
        let list = try await server.withClient { try await $0.devices(app: app) }
        server.output(list.json) {
            var rows = [["DEVICE", "GROUPS", "LAST SEEN", "SERVED", "STATUS"]]
            for device in list.devices {
                let status = device.status.map { status in
                    let report = status.report
                    let message = report.message.isEmpty ? "" : ": " + report.message
                    let detail = report.detail.map { " (\($0.rawValue))" } ?? ""
                    return
                        "\(report.state.rawValue)\(detail) r\(report.revision) by \(report.source.rawValue) at \(Timestamp.format(status.receivedAt))\(message)"
                }
                rows.append([
                    device.id, device.groups.isEmpty ? "-" : device.groups.joined(separator: ","),
                    device.lastSeenAt.map(Timestamp.format) ?? "never", device.servedRevision.map { "r\($0)" } ?? "-",
                    status ?? "no report",
                ])
            }
            return Table.render(rows)
        }
    }

    static func row(_ device: DeviceRecord) -> [String] {
        var state = device.disabled ? "disabled" : "enabled"
        if device.tokenRotationRequested { state += ", token rotation requested" }
        return [
            device.id, device.apps.isEmpty ? "-" : device.apps.joined(separator: ","),
            device.groups.isEmpty ? "-" : device.groups.joined(separator: ","), state, device.lastSeenAt.map(Timestamp.format) ?? "never",
        ]
    }
}

/// `fleetset admin devices show ID`.
struct AdminDeviceShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one device: apps, groups, state.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The device id.")
    var device: String

    func run() async throws {
        let record = try await server.withClient { try await $0.device(id: device) }
        server.output(record.json) {
            let facts = DeviceInfo.facts(record.info)
            let updated = record.infoUpdatedAt.map { " (reported \(Timestamp.format($0)))" } ?? ""
            return Table.render([["DEVICE", "APPS", "GROUPS", "STATE", "LAST SEEN"], AdminDeviceList.row(record)]) + "\n\n"
                + (facts.isEmpty
                    ? "no facts reported yet"
                    : "Facts\(updated)\n" + Table.render([["FACT", "VALUE"]] + facts.map { [$0.name, $0.value] }))
        }
    }
}

/// `fleetset admin devices set ID [--app A]… [--group G]… [--no-groups] [--disable|--enable] [--rotate-token]`.
struct AdminDeviceSet: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change a device: its apps or groups (each list replaced), disable or enable it, or ask it for a new token.",
        discussion: """
            A disabled device's token is refused at once, its waiting long-polls included (401). \
            Taking an app away answers its requests for that app as for an app that does not \
            exist. --rotate-token asks the agent to fetch a new token at its next request; the \
            old one keeps working until the new one is first used.
            """)

    @OptionGroup var server: ServerOptions

    @Argument(help: "The device id.")
    var device: String

    @Option(name: .customLong("app"), help: "An app the device may read and write (repeatable; replaces its list).")
    var apps: [String] = []

    @Option(name: .customLong("group"), help: "A group of the device (repeatable; replaces its list).")
    var groups: [String] = []

    @Flag(help: "Take the device out of every group.")
    var noGroups = false

    @Flag(help: "Disable the device: its token is refused until it is enabled again.")
    var disable = false

    @Flag(help: "Enable a disabled device.")
    var enable = false

    @Flag(help: "Ask the device's agent to fetch a new token.")
    var rotateToken = false

    func validate() throws {
        guard !(disable && enable) else { throw ValidationError("--disable and --enable exclude each other") }
        guard !(noGroups && !groups.isEmpty) else { throw ValidationError("--no-groups and --group exclude each other") }
        guard !apps.isEmpty || !groups.isEmpty || noGroups || disable || enable || rotateToken else {
            throw ValidationError("say what to change: --app, --group, --no-groups, --disable, --enable or --rotate-token")
        }
    }

    func run() async throws {
        let update = DeviceUpdate(
            apps: apps.isEmpty ? nil : apps, groups: noGroups ? [] : (groups.isEmpty ? nil : groups),
            disabled: disable ? true : (enable ? false : nil), rotateToken: rotateToken ? true : nil)
        let record = try await server.withClient { try await $0.updateDevice(id: device, update) }
        server.output(record.json) { Table.render([["DEVICE", "APPS", "GROUPS", "STATE", "LAST SEEN"], AdminDeviceList.row(record)]) }
    }
}

/// `fleetset admin devices delete ID`.
struct AdminDeviceDelete: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Delete a device: its token stops working at once; its device-scope values and reports go.",
        discussion: """
            To bring the device back, give it a new enrollment token and remove its identity.json \
            (see docs/operators/agent.md, "Re-enrolling a revoked device").
            """)

    @OptionGroup var server: ServerOptions

    @Argument(help: "The device id.")
    var device: String

    func run() async throws {
        try await server.withClient { try await $0.deleteDevice(id: device) }
        server.output(["deleted": .string(device)]) { TerminalText.escaped("deleted \(device)") }
    }
}

/// `fleetset admin enrollment-tokens [list]`, `… revoke ID`.
struct AdminEnrollmentTokens: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "enrollment-tokens", abstract: "List the enrollment tokens that can still be used, or revoke one.",
        subcommands: [AdminEnrollmentTokenList.self, AdminEnrollmentTokenRevoke.self], defaultSubcommand: AdminEnrollmentTokenList.self)
}

/// `fleetset admin enrollment-tokens list`.
struct AdminEnrollmentTokenList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List usable enrollment tokens by id.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let list = try await server.withClient { try await $0.enrollmentTokens() }
        server.output(list.json) {
            var rows = [["TOKEN", "APPS", "GROUPS", "USES LEFT", "EXPIRES"]]
            for token in list.tokens {
                rows.append([
                    token.id, token.apps.joined(separator: ","), token.groups.isEmpty ? "-" : token.groups.joined(separator: ","),
                    String(token.usesLeft), Timestamp.format(token.expiresAt),
                ])
            }
            return Table.render(rows)
        }
    }
}

/// `fleetset admin enrollment-tokens revoke ID`.
struct AdminEnrollmentTokenRevoke: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Revoke an enrollment token: no device can enroll with it any more.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The token's id (et-…), as enrollment-token and enrollment-tokens list show it.")
    var id: String

    func run() async throws {
        try await server.withClient { try await $0.revokeEnrollmentToken(id: id) }
        server.output(["revoked": .string(id)]) { TerminalText.escaped("revoked \(id)") }
    }
}
