import FleetIO
import FleetJSON
import FleetSchema
import FleetSchemaFiles

/// The official JSON-Schema-Test-Suite in `../shared/data` beside the repository (CI has it; a
/// plain clone may not — the tests that need it are then skipped, saying so).
enum SchemaSuiteData {
    static let root: String = {
        var components = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(4)  // SchemaSuiteData.swift, FleetSchemaTests, Tests, the repository
        return components.joined(separator: "/") + "/shared/data/json-schema-test-suite"
    }()

    static let tests = root + "/tests/draft2020-12"
    static let optionalTests = tests + "/optional"
    static let remotes = root + "/remotes"

    static let isPresent: Bool = (try? FileSystem.regularFiles(under: tests)) != nil
    static let skipMessage = "the JSON Schema Test Suite is not at ../shared/data/json-schema-test-suite"

    /// The required test files (`tests/draft2020-12/*.json`, not `optional/`).
    static var requiredFiles: [String] {
        ((try? FileSystem.regularFiles(under: tests)) ?? []).filter { !$0.contains("/") && $0.hasSuffix(".json") }
    }

    /// The optional test files (`optional/**/*.json`).
    static var optionalFiles: [String] {
        ((try? FileSystem.regularFiles(under: optionalTests)) ?? []).map { "optional/" + $0 }
    }

    /// The registry the suite expects: the meta-schemas plus `remotes/` at http://localhost:1234/.
    static let registry: SchemaRegistry = {
        var registry = SchemaRegistry()
        try? registry.registerFiles(under: remotes)
        return registry
    }()

    static func run(_ file: String) throws -> [SchemaTestSuite.Result] {
        let document = try JSONParser.parse(try FileSystem.readFile(tests + "/" + file))
        return try SchemaTestSuite.run(document, registry: registry)
    }
}
