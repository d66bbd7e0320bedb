import ChildProcess
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
    private let running = Locked<SpawnedProcess?>(nil)
    private let boundPort = Locked(0)

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(boundPort.withLock { $0 })" }
    /// The server's log (standard error), appended to across restarts.
    public var logPath: String { directory + "/server.log" }
    public let adminTokenPath: String
    /// The running process's id.
    public var pid: Int32? { running.withLock { $0?.pid } }

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
        let logStart = ((try? FileManager.default.attributesOfItem(atPath: logPath))?[.size] as? Int) ?? 0
        let process: SpawnedProcess
        do {
            // Spawned, not started with Foundation's Process: see SpawnedProcess (a restart happens
            // with the whole fleet's connections open).
            process = try SpawnedProcess(executable, arguments, output: .discard, errorOutput: .appending(to: logPath))
        } catch {
            throw StartFailed(description: "cannot run \(executable): \(error)")
        }
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
        process.signal(SIGKILL)
        _ = process.waitBlocking()  // SIGKILL ends it at once; nothing is left behind
        running.withLock { $0 = nil }
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
        process.signal(signal)
        // Polled: the caller's task must not block a thread of the concurrency pool.
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
        process.signal(SIGKILL)
        _ = process.waitBlocking()  // SIGKILL ends it at once
        running.withLock { $0 = nil }
    }

    /// The admin token the server made at its first start.
    public func adminToken() throws -> String {
        try FileSystem.readToken(adminTokenPath)
    }
}
