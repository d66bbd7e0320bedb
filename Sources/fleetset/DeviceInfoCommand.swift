import ArgumentParser
import FleetDeviceFiles
import FleetIO
import FleetJSON
import FleetProtocol
import FleetSettings

/// `fleetset device-info [show|set|unset]`: the device's facts, and an app's own.
struct DeviceInfoCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-info",
        abstract: "Show the device's facts as the server has them, or set an app's own facts.",
        discussion: """
            The agent reports the device's facts (OS, kernel, architecture, hostname, agent \
            version, a hash of the machine id, boot time, free space) when it enrolls and when \
            one changes. An app adds its own under apps.<app>.<name> with set; every admin sees \
            them, so never put a secret in one.
            """,
        subcommands: [DeviceInfoShow.self, DeviceInfoSet.self, DeviceInfoUnset.self],
        defaultSubcommand: DeviceInfoShow.self)
}

/// `fleetset device-info show [--json]`.
struct DeviceInfoShow: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "show", abstract: "Show the facts the server has taken from this device.")

    @OptionGroup var device: DeviceOptions

    @Flag(help: "Print the facts as JSON.")
    var json = false

    func run() throws {
        let configuration = try device.configuration()
        let path = configuration.layout.deviceInfoFile
        let kept: JSONObject
        do {
            guard let bytes = try FileSystem.readFileIfPresent(path, maximumSize: 1 << 20) else {
                StandardError.write("fleetset device-info: the agent has not reported the device's facts yet (no \(path))")
                throw CLIExit.invalidInput
            }
            guard case .object(let object) = try JSONParser.parse(bytes), case .object(let info)? = object["info"] else {
                StandardError.write("fleetset device-info: \(path) is not what the agent writes")
                throw CLIExit.invalidInput
            }
            kept = info
        } catch let error as FileError {
            StandardError.write("fleetset device-info: \(error)")
            throw CLIExit.usageOrIO
        } catch let error as JSONParseError {
            StandardError.write("fleetset device-info: \(path): \(error)")
            throw CLIExit.invalidInput
        }
        if json {
            print(TerminalText.serialized(.object(kept), .pretty))
            return
        }
        print(Table.render([["FACT", "VALUE"]] + DeviceInfo.facts(kept).map { [$0.name, $0.value] }))
    }
}

/// `fleetset device-info set [--app A] NAME=VALUE…`.
struct DeviceInfoSet: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set", abstract: "Set the app's own facts (NAME=VALUE; names of A-Z a-z 0-9 _ -, values up to 256 characters).")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "NAME=VALUE, e.g. version=2.3.1.")
    var facts: [String] = []

    func validate() throws {
        guard !facts.isEmpty else { throw ValidationError("give at least one NAME=VALUE") }
        for fact in facts where !fact.contains("=") { throw ValidationError("\"\(fact)\" is not NAME=VALUE") }
    }

    func run() throws {
        var values: [String: String?] = [:]
        for fact in facts {
            let equals = fact.firstIndex(of: "=")!
            values[String(fact[..<equals])] = String(fact[fact.index(after: equals)...])
        }
        try DeviceInfoSet.leave(values, device)
    }

    /// Leaves the facts request in the app's inbox; the agent reports them.
    static func leave(_ values: [String: String?], _ device: DeviceOptions) throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        do {
            try device.fleetApp(app, configuration).setDeviceInfo(values)
        } catch {
            StandardError.write("fleetset device-info: \(error)")
            if case .refused = error { throw CLIExit.invalidInput }
            throw CLIExit.usageOrIO
        }
        print("facts of \(app.id) handed to the agent: \(values.keys.sorted().joined(separator: ", "))")
    }
}

/// `fleetset device-info unset [--app A] NAME…`.
struct DeviceInfoUnset: ParsableCommand {
    static let configuration = CommandConfiguration(commandName: "unset", abstract: "Remove some of the app's own facts.")

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The names of the facts to remove.")
    var names: [String] = []

    func validate() throws {
        guard !names.isEmpty else { throw ValidationError("give at least one fact name") }
    }

    func run() throws {
        try DeviceInfoSet.leave(Dictionary(names.map { ($0, String?.none) }, uniquingKeysWith: { first, _ in first }), device)
    }
}
