import ChildProcess
import Foundation
import PosixThreads

/// Runs the built binaries (`fleetset`, `fleetsetd`, `fleetset-server`), as a user would, and
/// captures what they print.
public enum CLIRunner {
    /// What a finished process printed, and its exit status.
    public struct Output: Sendable {
        public var status: Int32
        public var standardOutput: String
        public var standardError: String
        /// The non-empty lines of standard output.
        public var lines: [String] {
            standardOutput.split(separator: "\n", omittingEmptySubsequences: false).map(String.init).filter { !$0.isEmpty }
        }
    }

    /// The `fleetset` binary beside the test bundle (SwiftPM builds both into one folder).
    public static let binary: String = {
        let testExecutable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
        var folder = URL(fileURLWithPath: testExecutable).deletingLastPathComponent()
        while folder.path != "/" && !folder.lastPathComponent.hasSuffix("debug") && !folder.lastPathComponent.hasSuffix("release") {
            folder.deleteLastPathComponent()
        }
        return folder.appendingPathComponent("fleetset").path
    }()

    /// Another product built beside `fleetset`: `fleetsetd`, `fleetset-server`.
    public static func product(_ name: String) -> String {
        URL(fileURLWithPath: binary).deletingLastPathComponent().appendingPathComponent(name).path
    }

    /// Runs `fleetset` (or `executable`) with `arguments` and waits for it; `input` is its
    /// standard input (empty when not given).
    ///
    /// The process is waited for on a thread of its own: a test that waited on one of the
    /// concurrency pool's few threads (two on a two-core machine) would stall every in-process
    /// server and proxy of the test process for as long as the command runs, and a command that
    /// needs one of them to answer (`fleetset set --wait` through a test's proxy) would never end.
    /// `directory` is where it starts (this process's own when `nil`): a program run as another
    /// user needs one that user may enter.
    public static func run(_ arguments: [String], executable: String = binary, input: String? = nil, directory: String? = nil) async throws
        -> Output
    {
        try await withCheckedThrowingContinuation { continuation in
            DetachedThread.start(named: "fleetset-test-run") {
                continuation.resume(
                    with: Result { try runSynchronously(arguments, executable: executable, input: input, directory: directory) })
            }
        }
    }

    private static let copies = Locked<[String: String]>([:])

    /// A copy of the program at `path` that every user may run: in a folder of its own under
    /// the temporary directory (0755), made once per test process and program. A build folder
    /// under a private home (0700, as `/root` and Debian's homes are) is out of other users'
    /// reach, and so is every binary in it. The copies go when the process exits.
    public static func copyForOtherUsers(_ path: String) throws -> String {
        try copies.withLock { copies in
            if let copy = copies[path] { return copy }
            let folder = try temporaryDirectory().path
            let copy = folder + "/" + URL(fileURLWithPath: path).lastPathComponent
            do {
                try FileManager.default.copyItem(atPath: path, toPath: copy)
                guard chmod(folder, 0o755) == 0, chmod(copy, 0o755) == 0 else {
                    throw ProcessFailed(log: "cannot make \(copy) runnable by other users")
                }
            } catch {
                try? FileManager.default.removeItem(atPath: folder)
                throw error
            }
            if copies.isEmpty {
                atexit {
                    for copy in CLIRunner.copies.withLock({ Array($0.values) }) {
                        try? FileManager.default.removeItem(atPath: URL(fileURLWithPath: copy).deletingLastPathComponent().path)
                    }
                }
            }
            copies[path] = copy
            return copy
        }
    }

    /// ``run(_:executable:input:)`` on the calling thread, for clean-up where nothing can be
    /// awaited (a `defer`). Never from a test's body: see ``run(_:executable:input:)``.
    public static func runSynchronously(_ arguments: [String], executable: String = binary, input: String? = nil, directory: String? = nil)
        throws -> Output
    {
        let child = try SpawnedProcess(executable, arguments, directory: directory, input: input.map { Array($0.utf8) }, output: .pipe)
        // Both pipes are drained at once: a command that fills one while the other is read
        // first would wait for ever.
        let errorText = Locked<[UInt8]>([])
        let errorDone = DispatchSemaphore(value: 0)
        DetachedThread.start(named: "fleetset-test-err") {
            let bytes = SpawnedProcess.readAll(child.standardError!)
            errorText.withLock { $0 = bytes }
            errorDone.signal()
        }
        let out = child.standardOutput.map { SpawnedProcess.readAll($0) } ?? []
        errorDone.wait()
        return Output(
            status: child.waitBlocking(), standardOutput: String(decoding: out, as: UTF8.self),
            standardError: String(decoding: errorText.withLock { $0 }, as: UTF8.self))
    }

    /// A fresh temporary folder for one test.
    public static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-cli-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }

    /// Writes `text` to `url`.
    public static func write(_ text: String, to url: URL) throws {
        try Data(text.utf8).write(to: url)
    }
}

/// The `../shared` folder beside the repository, and this repository's root.
public enum Shared {
    public static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared")
    public static let suite = root.appendingPathComponent("data/json-schema-test-suite")
    public static let kiosk = root.appendingPathComponent("examples/kiosk.SettingsSchema.json")
    /// This repository's root.
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    public static var hasSuite: Bool { FileManager.default.fileExists(atPath: suite.appendingPathComponent("tests/draft2020-12").path) }
    public static var hasKiosk: Bool { FileManager.default.fileExists(atPath: kiosk.path) }
}
