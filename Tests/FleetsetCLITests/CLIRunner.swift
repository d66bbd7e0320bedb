import Foundation

/// Runs the built `fleetset` binary, as a user would, and captures what it prints.
enum CLIRunner {
    struct Output {
        var status: Int32
        var standardOutput: String
        var standardError: String
        var lines: [String] {
            standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
        }
    }

    /// The `fleetset` binary beside the test bundle (SwiftPM builds both into one folder).
    static let binary: String = {
        let testExecutable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var folder = URL(fileURLWithPath: testExecutable).deletingLastPathComponent()
        while folder.path != "/" && !folder.lastPathComponent.hasSuffix("debug") && !folder.lastPathComponent.hasSuffix("release") {
            folder.deleteLastPathComponent()
        }
        return folder.appendingPathComponent("fleetset").path
    }()

    static func run(_ arguments: [String]) throws -> Output {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        let standardOutput = Pipe()
        let standardError = Pipe()
        process.standardOutput = standardOutput
        process.standardError = standardError
        try process.run()
        let out = standardOutput.fileHandleForReading.readDataToEndOfFile()
        let err = standardError.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, standardOutput: String(decoding: out, as: UTF8.self),
            standardError: String(decoding: err, as: UTF8.self))
    }

    /// A fresh temporary folder for one test.
    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    static func write(_ text: String, to url: URL) throws {
        try Data(text.utf8).write(to: url)
    }
}

enum Shared {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared")
    static let suite = root.appendingPathComponent("data/json-schema-test-suite")
    static let kiosk = root.appendingPathComponent("examples/kiosk.SettingsSchema.json")
    /// This repository's root.
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static var hasSuite: Bool { FileManager.default.fileExists(atPath: suite.appendingPathComponent("tests/draft2020-12").path) }
    static var hasKiosk: Bool { FileManager.default.fileExists(atPath: kiosk.path) }
}
