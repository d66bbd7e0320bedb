import ArgumentParser
import FleetJSON
import FleetMetadata

/// `fleetset metadata …`: checking and converting metadata documents.
struct MetadataCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "metadata",
        abstract: "Check and convert app metadata documents.",
        subcommands: [MetadataValidateCommand.self, MetadataImportMokiCommand.self]
    )
}

/// `fleetset metadata validate FILE`.
struct MetadataValidateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "validate",
        abstract: "Check a metadata document: app, version, schema, layout, annotations and defaults.",
        discussion: "Prints each problem with the JSON pointer of the bad place; exits with 1 when there is any."
    )

    @Argument(help: "The metadata document (JSON).")
    var file: String

    func run() throws {
        let document = try Inputs.json(file)
        do {
            let metadata = try Metadata(document)
            print(
                "\(file): valid metadata for \(metadata.app), version \(metadata.version), \(metadata.settingKeys.count) settings "
                    + "(\(metadata.writableKeys.count) writable, \(metadata.secretKeys.count) secret)")
        } catch {
            for problem in error.problems { print(TerminalText.escaped("\(file): \(problem)")) }
            throw CLIExit.invalidInput
        }
    }
}

/// `fleetset metadata import-moki FILE`.
struct MetadataImportMokiCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-moki",
        abstract: "Convert a MokiManage SettingsSchema.json into a metadata document and print it.",
        discussion: """
            The app id defaults to the file name up to its first '.', e.g. kiosk for \
            kiosk.SettingsSchema.json. The result is checked as a metadata document (its defaults \
            included) before it is printed.
            """
    )

    @Argument(help: "The MokiManage SettingsSchema.json file.")
    var file: String

    @Option(help: "The app id (default: from the file name).")
    var app: String?

    @Option(name: .customLong("writable"), help: "A top-level setting that devices may change (repeatable).")
    var writableKeys: [String] = []

    var appID: String {
        if let app { return app }
        let name = file.split(separator: "/").last.map(String.init) ?? file
        return String(name.prefix { $0 != "." }).lowercased()
    }

    func validate() throws {
        guard Metadata.isValidAppID(appID) else {
            throw ValidationError("\"\(appID)\" is not an app id (1 to 64 of a-z, 0-9, '.', '_', '-'); give one with --app")
        }
    }

    func run() throws {
        print(TerminalText.serialized(try converted(), .pretty))
    }

    /// The converted metadata document, checked; problems are printed and exit with 1.
    func converted() throws -> JSONValue {
        let source = try Inputs.json(file)
        let document: JSONValue
        do {
            document = try MokiImport.convert(source, app: appID, writable: Set(writableKeys))
            _ = try Metadata(document)
        } catch let error as MokiImport.ImportError {
            for problem in error.problems { print(TerminalText.escaped("\(file): \(problem)")) }
            throw CLIExit.invalidInput
        } catch let error as MetadataError {
            for problem in error.problems { print(TerminalText.escaped("\(file): converted metadata: \(problem)")) }
            throw CLIExit.invalidInput
        }
        return document
    }
}
