import FleetIO
import Foundation
import PosixThreads

/// A `fleetset-server serve` the simulator runs on 127.0.0.1, with its database, admin token
/// and log in one folder; it can be killed and started again on the same port (the `restart`
/// scenario). Its process id lets the simulator read its memory and CPU from `/proc`.
public final class LaunchedServer: Sendable {
    /// Why the server could not be started.
    public struct StartFailed: Error, CustomStringConvertible {
        public let description: String
    }

    private let executable: String
    private let directory: String
    private let database: String
    private let extraArguments: [String]
    private let running = Locked<Process?>(nil)
    private let boundPort = Locked(0)

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(boundPort.withLock { $0 })" }
    /// The server's log (standard error), appended to across restarts.
    public var logPath: String { directory + "/server.log" }
    public let adminTokenPath: String
    /// The running process's id.
    public var pid: Int32? { running.withLock { $0?.processIdentifier } }

    /// - Parameters:
    ///   - executable: the `fleetset-server` binary.
    ///   - directory: where the database, the admin token and the log go (kept across runs).
    ///   - database: `--database`: a PostgreSQL URL for instances that share one (default: a
    ///     SQLite file in `directory`).
    ///   - adminTokenFile: the admin token file (default: in `directory`); instances sharing a
    ///     database share it too (the first one started makes it).
    ///   - extraArguments: more `serve` options (`--max-long-polls`, `--log-level`).
    public init(
        executable: String, directory: String, database: String? = nil, adminTokenFile: String? = nil, extraArguments: [String] = []
    ) {
        self.executable = executable
        self.directory = directory
        self.database = database ?? directory + "/fleet.sqlite"
        self.adminTokenPath = adminTokenFile ?? directory + "/admin.token"
        self.extraArguments = extraArguments
    }

    /// `127.0.0.1:<port>`, for a balancer.
    public var address: String { "127.0.0.1:\(boundPort.withLock { $0 })" }

    /// Starts the server (on any free port the first time, on the same port again after a
    /// kill) and returns once it listens.
    public func start(timeout: Duration = .seconds(60)) async throws {
        let port = boundPort.withLock { $0 }
        let arguments =
            [
                "serve", "--database", database, "--listen", "127.0.0.1:\(port)", "--admin-token-file", adminTokenPath,
                // One address sends for the whole fleet here: its limit must not be what is measured.
                "--address-rate", "1000000000", "--address-burst", "1000000000",
            ] + extraArguments
        if !FileManager.default.fileExists(atPath: logPath) { _ = FileManager.default.createFile(atPath: logPath, contents: nil) }
        guard let log = FileHandle(forWritingAtPath: logPath) else { throw StartFailed(description: "cannot write \(logPath)") }
        let logStart = log.seekToEndOfFile()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = log
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw StartFailed(description: "cannot run \(executable): \(error)")
        }
        try? log.close()
        running.withLock { $0 = process }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            let text = String(decoding: (try? FileSystem.readFile(logPath, maximumSize: 1 << 30)) ?? [], as: UTF8.self)
            let fresh = text.utf8.count > Int(logStart) ? String(text.utf8.dropFirst(Int(logStart))) ?? "" : ""
            if let line = fresh.split(separator: "\n").first(where: { $0.contains("event=listening") }),
                let range = line.range(of: "address=127.0.0.1:"), let bound = Int(line[range.upperBound...].prefix { $0.isNumber })
            {
                boundPort.withLock { $0 = bound }
                return
            }
            guard process.isRunning else { throw StartFailed(description: "the server exited at start; its log:\n\(fresh)") }
            try await Task.sleep(for: .milliseconds(20))
        }
        process.terminate()
        throw StartFailed(description: "the server did not listen within \(timeout)")
    }

    /// Sends `signal` (SIGKILL: a crash; SIGTERM: a graceful stop) and waits up to `grace` for
    /// the process to end; one still running then is killed (SIGKILL).
    ///
    /// - Returns: whether it ended within `grace` (`false`: a graceful stop that hung, which the
    ///   caller reports).
    @discardableResult
    public func stop(signal: Int32 = SIGKILL, grace: Duration = .seconds(30)) async -> Bool {
        guard let process = running.withLock({ $0 }) else { return true }
        defer { running.withLock { $0 = nil } }
        if process.isRunning { kill(process.processIdentifier, signal) }
        // Polled: Foundation's waitUntilExit spins a core while it waits.
        let deadline = ContinuousClock.now + grace
        while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
        guard process.isRunning else { return true }
        terminateNow()
        return false
    }

    /// Kills the server (SIGKILL) and returns once it has ended, without suspending: for
    /// `defer` blocks and error paths.
    public func terminateNow() {
        guard let process = running.withLock({ $0 }) else { return }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        while process.isRunning { usleep(1000) }  // SIGKILL ends it at once
        running.withLock { $0 = nil }
    }

    /// The admin token the server made at its first start.
    public func adminToken() throws -> String {
        try FileSystem.readToken(adminTokenPath)
    }
}
