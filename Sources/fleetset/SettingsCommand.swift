import ArgumentParser
import FleetJSON
import FleetMetadata

/// `fleetset settings …`: checking settings documents.
struct SettingsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "settings",
        abstract: "Check settings documents against metadata.",
        subcommands: [SettingsValidateCommand.self]
    )
}

/// `fleetset settings validate --metadata FILE SETTINGS_FILE`.
struct SettingsValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Validate a settings document against an app's metadata.",
        discussion: """
            SETTINGS_FILE is a settings document as the agent writes it ({"app", "schemaVersion", \
            "revision", "values"}) or a bare values object. Prints one line per error, with the \
            JSON pointer of the value; values of x-secret settings are never printed. Exits with 1 \
            when the settings are invalid.
            """
    )

    @Option(help: "The app's metadata document.")
    var metadata: String

    @Argument(help: "The settings document or values object.")
    var settingsFile: String

    func run() throws {
        let metadataDocument = try Inputs.json(metadata)
        let appMetadata: Metadata
        do {
            appMetadata = try Metadata(metadataDocument)
        } catch {
            for problem in error.problems { print(TerminalText.escaped("\(metadata): \(problem)")) }
            throw CLIExit.invalidInput
        }
        let document = try Inputs.json(settingsFile)
        var values = document
        if case .object(let object) = document, case .object? = object["values"], object["app"] != nil || object["revision"] != nil {
            if case .string(let app)? = object["app"], app != appMetadata.app {
                print(
                    TerminalText.escaped("\(settingsFile): /app: the settings are for \"\(app)\", the metadata for \"\(appMetadata.app)\""))
                throw CLIExit.invalidInput
            }
            values = object["values"] ?? .null
        }
        let errors = appMetadata.validate(values: values)
        guard errors.isEmpty else {
            for error in errors { print(TerminalText.escaped("\(settingsFile): \(error)")) }
            throw CLIExit.invalidInput
        }
        print("\(settingsFile): valid for \(appMetadata.app), version \(appMetadata.version)")
    }
}
