import Foundation

/// Runs the helper scripts in `Tests/FleetConsoleTests/QRCode/Scripts` with the project's
/// Python tools (`.build/python-tools`, made by `scripts/python-tools`: zxing-cpp and pillow),
/// and Debian's zbar-tools and librsvg2-bin (`scripts/install-deps`).
enum ExternalTools {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static var scriptsDirectory: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Scripts")
    }

    static var pythonInterpreter: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/python-tools/bin/python3").path
    }

    /// Runs `Scripts/<script>` and returns its standard output; throws with
    /// the script's standard error when it exits non-zero.
    static func runPythonScript(_ script: String, arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = [pythonInterpreter, scriptsDirectory.appendingPathComponent(script).path] + arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        // Read before waiting so a full pipe cannot block the script.
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        let errorData = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw Failure(
                description: """
                    \(script) failed (exit \(process.terminationStatus)) using \(pythonInterpreter). \
                    The decoder round trip needs Debian packages zbar-tools and librsvg2-bin and PyPI packages \
                    zxing-cpp and pillow: run scripts/install-deps and scripts/python-tools.
                    \(String(decoding: errorData, as: UTF8.self))
                    """)
        }
        return String(decoding: outputData, as: UTF8.self)
    }

    static func makeTemporaryDirectory() throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("qr-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }
}
