import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset get [--app ID] KEY [--json]`.
struct GetCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "get",
        abstract: "Print one setting's value from the device's settings file.",
        discussion: """
            KEY is a key path: a setting's name, or a slash-separated path into it \
            (playlist/0/content; ~1 stands for a / inside a name, ~0 for a ~; a leading / is \
            allowed, as in a JSON pointer). A string \
            prints as it is (to a terminal, its control characters but line breaks and tabs as \
            escapes such as \\e), anything else as JSON; --json prints JSON always. The values of \
            settings marked x-secret are never printed (apps read them from settings.json or with \
            FleetSettings). Exit status: 0 printed; 1 no such setting, a secret, or no settings yet; \
            2 usage or an unreadable configuration.
            """)

    @OptionGroup var device: DeviceOptions

    @Argument(help: "The setting's name, or a key path into it (playlist/0/content).")
    var key: String

    @Flag(help: "Print the value as JSON (strings quoted).")
    var json = false

    func run() throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        let (settings, metadata) = try device.settings(of: app, in: configuration)
        guard let pointer = JSONPointer(keyPath: key) else {
            StandardError.write("fleetset get: \(KeyPath.Malformed(text: key))")
            throw CLIExit.usageOrIO
        }
        guard !pointer.isRoot, let value = JSONValue.object(settings.values)[pointer: pointer] else {
            let known = settings.values.keys.joined(separator: ", ")
            StandardError.write("fleetset get: \(app.id) has no setting \(pointer.displayText) (settings: \(known))")
            throw CLIExit.invalidInput
        }
        let masked = JSONValue.object(metadata.masked(settings.values))[pointer: pointer]
        if masked != value {
            let what = masked == SettingsValues.mask ? "is a secret" : "holds a secret"
            StandardError.write(
                "fleetset get: \(app.id) \(pointer.tokens.count == 1 ? key : pointer.displayText) \(what) (x-secret); its value is never printed. Apps read it from settings.json or with FleetSettings."
            )
            throw CLIExit.invalidInput
        }
        if case .string(let text) = value, !json {
            // A script gets the value as it is; a person at a terminal never gets its escape sequences.
            print(isatty(STDOUT_FILENO) == 1 ? TerminalText.escaped(text, keepingNewlinesAndTabs: true) : text)
        } else {
            print(TerminalText.serialized(value, json ? .pretty : []))
        }
    }
}
