import Foundation

/// The public conformance suites in `../shared/data` beside the repository (CI has them; a
/// plain clone may not — the tests that need them are then skipped, saying so).
enum SharedData {
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("shared/data")

    static let jsonTestSuite = root.appendingPathComponent("json-test-suite/test_parsing")

    static var hasJSONTestSuite: Bool { FileManager.default.fileExists(atPath: jsonTestSuite.path) }

    /// The files of JSONTestSuite whose names start with `prefix` (`y_`, `n_`, `i_`).
    static func jsonTestFiles(_ prefix: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: jsonTestSuite.path)) ?? []
        return names.filter { $0.hasPrefix(prefix) && $0.hasSuffix(".json") }.sorted()
    }

    static func bytes(_ name: String) throws -> [UInt8] {
        Array(try Data(contentsOf: jsonTestSuite.appendingPathComponent(name)))
    }
}
