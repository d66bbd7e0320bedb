import ArgumentParser
import FleetJSON
import FleetSchema
import FleetSchemaFiles

/// `fleetset schema …`: working with JSON Schemas.
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Work with JSON Schema 2020-12 schemas.",
        subcommands: [SchemaTestCommand.self]
    )
}

/// `fleetset schema test FILE…`: runs test files in the JSON-Schema-Test-Suite format.
struct SchemaTestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run schema test files and report which tests fail.",
        discussion: """
            Each FILE is a JSON array of {"description", "schema", "tests": [{"description", \
            "data", "valid"}]}, the format of the official JSON-Schema-Test-Suite. One line is \
            printed per failing test, and the last line is "N passed, M failed, K skipped" \
            (skipped: the schema asks for something fleetset does not support).
            Exits with 1 when any test fails.
            """
    )

    @Argument(help: "Test files.")
    var files: [String]

    @Option(help: "A folder of schemas that remote $refs resolve to, keyed by their path under http://localhost:1234/.")
    var remotes: String?

    @Flag(help: "Also print skipped tests.")
    var verbose = false

    func validate() throws {
        guard !files.isEmpty else { throw ValidationError("give at least one test file") }
    }

    func run() throws {
        var registry = SchemaRegistry()
        if let remotes {
            do {
                try registry.registerFiles(under: remotes)
            } catch {
                StandardError.write("fleetset: \(error)")
                throw CLIExit.usageOrIO
            }
        }
        var summary = SchemaTestSuite.Summary()
        var malformed = false
        for file in files {
            let document = try Inputs.json(file, duplicateKeys: .keepLast)
            let results: [SchemaTestSuite.Result]
            do {
                results = try SchemaTestSuite.run(document, registry: registry)
            } catch {
                print("\(file): not a schema test file: \(error)")
                malformed = true
                continue
            }
            for result in results {
                summary.add(result)
                switch result.outcome {
                case .passed: continue
                case .failed: print("FAIL \(file): \(result)")
                case .skipped: if verbose { print("SKIP \(file): \(result)") }
                }
            }
        }
        print(summary)
        if summary.failed > 0 || malformed { throw CLIExit.invalidInput }
    }
}
