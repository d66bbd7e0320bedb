import ArgumentParser
import FleetClient
import FleetJSON
import FleetProtocol

/// `fleetset admin groups …`: groups, and groups defined by what devices report.
struct AdminGroups: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "groups",
        abstract: "List groups; define a group by a query on the devices' facts.",
        discussion: """
            A group defined by a query (define NAME --where FACT=VALUE …) holds every device whose \
            facts meet every condition, as the devices report them: a device whose facts change \
            moves in or out at once, and gets the group's values and policy from then on. \
            Conditions: FACT=VALUE, FACT!=VALUE, FACT~REGEX, FACT!~REGEX (an ECMA-262 regular \
            expression, found anywhere in the fact unless anchored with ^ and $). A device without \
            the fact meets only != and !~. Where several groups set a value, the later group by \
            name wins, whether a query or an admin put the device in it.
            """,
        subcommands: [AdminGroupList.self, AdminGroupShow.self, AdminGroupDefine.self, AdminGroupRemove.self],
        defaultSubcommand: AdminGroupList.self)
}

/// `fleetset admin groups [list]`.
struct AdminGroupList: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "list", abstract: "List every group, its query and its member count.")

    @OptionGroup var server: ServerOptions

    func run() async throws {
        let list = try await server.withClient { try await $0.groups() }
        server.output(list.json) {
            guard !list.groups.isEmpty else { return "no device is in a group and no group is defined by a query" }
            return Table.render(
                [["GROUP", "MEMBERS", "DEFINED BY"]]
                    + list.groups.map { [$0.name, "\($0.members)", AdminGroupShow.origin($0.conditions)] })
        }
    }
}

/// `fleetset admin groups show NAME`.
struct AdminGroupShow: AsyncParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show one group: its query and its members.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The group's name.")
    var name: String

    func run() async throws {
        let group = try await server.withClient { try await $0.group(name: name) }
        server.output(group.json) {
            var lines = [
                "group:   \(group.summary.name)", "members: \(group.summary.members)",
                "defined: \(Self.origin(group.summary.conditions))",
            ]
            if !group.devices.isEmpty { lines.append("") }
            lines += group.devices
            return TerminalText.escaped(lines.joined(separator: "\n"), keepingNewlinesAndTabs: true)
        }
    }

    /// `where machine.arch=aarch64 os.version=12`, or `by hand` for a group without a query.
    static func origin(_ conditions: [DeviceInfoFilter]?) -> String {
        conditions.map { "where " + $0.map(\.description).joined(separator: " ") } ?? "by hand (enrollment tokens, devices set --group)"
    }
}

/// `fleetset admin groups define NAME --where CONDITION…`.
struct AdminGroupDefine: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "define",
        abstract: "Define a group by a query on the devices' facts (or replace its query); its members follow their facts.")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The group's name.")
    var name: String

    @Option(
        name: .customLong("where"),
        help: "A condition every member's facts meet: FACT=VALUE, FACT!=VALUE, FACT~REGEX or FACT!~REGEX (repeatable).")
    var filters: [String] = []

    func validate() throws {
        guard !filters.isEmpty else { throw ValidationError("give at least one --where FACT=VALUE") }
        _ = try Self.conditions(filters)
    }

    func run() async throws {
        let conditions = try Self.conditions(filters)
        let group = try await server.withClient { try await $0.defineGroup(name: name, where: conditions) }
        server.output(group.json) {
            TerminalText.escaped(
                "group \(group.summary.name) is defined \(AdminGroupShow.origin(group.summary.conditions)): \(group.summary.members) device\(group.summary.members == 1 ? "" : "s") in it now"
            )
        }
    }

    /// The conditions `--where` gave, each read or refused saying what is wrong with it.
    static func conditions(_ texts: [String]) throws -> [DeviceInfoFilter] {
        try texts.map { text in
            do {
                return try DeviceInfoFilter(parsing: text)
            } catch {
                throw ValidationError("--where: \(error) (facts: os.version, machine.arch, apps.APP.NAME, …)")
            }
        }
    }
}

/// `fleetset admin groups remove NAME`.
struct AdminGroupRemove: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Remove a group's query: its members leave it (its values and policy stay stored).")

    @OptionGroup var server: ServerOptions

    @Argument(help: "The group's name.")
    var name: String

    func run() async throws {
        try await server.withClient { try await $0.removeGroupDefinition(name: name) }
        server.output(["removed": .string(name)]) { TerminalText.escaped("group \(name) is no longer defined by a query") }
    }
}
