import ChildProcess
import FleetTestWaiting
import Foundation
import PosixThreads

/// A process a test started (a server, the agent), its standard error captured line by line.
public final class RunningProcess: Sendable {
    private let child: SpawnedProcess
    private let capture: LogCapture

    /// Everything the process wrote to standard error so far.
    public var log: String { capture.text }
    /// Its process id.
    public var pid: Int32 { child.pid }
    /// Whether it still runs.
    public var isRunning: Bool { child.isRunning }

    /// Starts `executable` with `arguments`; `environment` is added to this process's own. With
    /// `standardOutputToLog`, standard output is captured into ``log`` too (for commands whose
    /// output is the point, like `fleetset watch`).
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:], standardOutputToLog: Bool = false) throws
    {
        let child = try SpawnedProcess(
            executable, arguments, environment: environment, output: standardOutputToLog ? .standardError : .discard)
        let capture = LogCapture()
        DetachedThread.start(named: "fleetset-test-log") {
            _ = SpawnedProcess.readAll(child.standardError!) { chunk in capture.append(String(decoding: chunk, as: UTF8.self)) }
        }
        self.child = child
        self.capture = capture
    }

    /// The first line containing `fragment`, waiting up to `timeout` for it.
    @discardableResult
    public func waitForLog(_ fragment: String, timeout: Duration = .seconds(60)) async throws -> String {
        try await capture.waitForLine(containing: fragment, timeout: timeout)
    }

    /// The number of lines containing `fragment` so far.
    public func count(_ fragment: String) -> Int {
        log.split(separator: "\n").filter { $0.contains(fragment) }.count
    }

    /// Waits until `fragment` has appeared in `count` lines.
    public func waitForLog(_ fragment: String, count: Int, timeout: Duration = .seconds(60)) async throws {
        try await Waiting.until(timeout: timeout, "\(count) lines with \(fragment) in:\n\(log)") { self.count(fragment) >= count }
    }

    /// Sends `number` to the process.
    public func signal(_ number: Int32) { child.signal(number) }

    /// Waits for the process to end and returns its exit status (or the signal that ended it).
    /// It polls rather than blocks: a blocked thread of the concurrency pool would stall the
    /// test process's in-process servers for as long as the process takes to end.
    public func waitForExit() async -> Int32 {
        while true {
            if let status = child.status { return status }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    /// Waits up to `timeout` for the process to end; `nil` when it is still running.
    public func waitForExit(timeout: Duration) async -> Int32? {
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if let status = child.status { return status }
            try? await Task.sleep(for: .milliseconds(2))
        }
        return child.status
    }

    /// Kills the process (SIGKILL) if it still runs, and waits for it.
    public func kill() {
        guard child.isRunning else { return }
        child.signal(SIGKILL)
        _ = child.waitBlocking()
    }
}

/// A `fleetset-server serve` process on 127.0.0.1 with its own SQLite file, its log captured.
public final class ServerProcess: Sendable {
    /// The port it listens on.
    public let port: Int
    public let running: RunningProcess
    /// Whether it serves HTTPS.
    public let secure: Bool

    public var log: String { running.log }
    /// `http://127.0.0.1:<port>`, or `https://…` with TLS.
    public var url: String { "\(secure ? "https" : "http")://127.0.0.1:\(port)" }

    /// Starts a server with its database and admin token in `directory`, on `port` (0: any free
    /// port); with `tls`, over HTTPS with that PEM certificate and key.
    ///
    /// - Parameter extraArguments: more `serve` options (limits, timeouts).
    /// - Parameter database: `--database` (default: `fleet.sqlite` in `directory`).
    public static func start(
        in directory: String, port requested: Int = 0, tls: (certificate: String, key: String)? = nil, database: String? = nil,
        extraArguments: [String] = [], executable: String = CLIRunner.product("fleetset-server")
    ) async throws -> ServerProcess {
        var arguments =
            [
                "serve", "--database", database ?? directory + "/fleet.sqlite", "--listen", "127.0.0.1:\(requested)", "--admin-token-file",
                directory + "/admin.token", "--log-level", "debug",
            ] + extraArguments
        if let tls { arguments += ["--tls-certificate", tls.certificate, "--tls-key", tls.key] }
        let running = try RunningProcess(executable, arguments)
        let line = try await running.waitForLog("event=listening")
        guard let range = line.range(of: "address=127.0.0.1:"), let port = Int(line[range.upperBound...].prefix { $0.isNumber }) else {
            throw ProcessFailed(log: running.log)
        }
        return ServerProcess(port: port, running: running, secure: tls != nil)
    }

    private init(port: Int, running: RunningProcess, secure: Bool) {
        self.port = port
        self.running = running
        self.secure = secure
    }

    /// The process id.
    public var pid: Int32 { running.pid }
    public func waitForLog(_ fragment: String) async throws { try await running.waitForLog(fragment) }
    public func signal(_ number: Int32) { running.signal(number) }
    public func waitForExit() async -> Int32 { await running.waitForExit() }
    public func kill() { running.kill() }
}

/// What a process wrote, collected by a reader thread.
public final class LogCapture: Sendable {
    private let buffer = Locked("")

    public init() {}

    public var text: String { buffer.withLock { $0 } }

    public func append(_ text: String) { buffer.withLock { $0 += text } }

    /// The first complete line containing `fragment`, waiting up to `timeout` for it to appear.
    public func waitForLine(containing fragment: String, timeout: Duration = .seconds(60)) async throws -> String {
        var found: String?
        try await Waiting.until(timeout: timeout, "no line with \(fragment) in:\n\(text)") {
            found = text.split(separator: "\n").first(where: { $0.contains(fragment) }).map(String.init)
            return found != nil
        }
        return found ?? ""
    }
}

/// Waiting for a condition another process, or another task of the test, brings about: the
/// wait of `FleetTestWaiting`, offered here so that the tests of the binaries need no second
/// import.
public enum Waiting {
    /// Checks `condition` every 2 ms until it holds; throws `message` after `timeout`, which
    /// only bounds a failing test. Say in `message` what was awaited. See
    /// `FleetTestWaiting.Waiting.until`, which this calls.
    public static func until(
        timeout: Duration = .seconds(60), _ message: @autoclosure () -> String, _ condition: () async throws -> Bool
    ) async throws {
        try await FleetTestWaiting.Waiting.until(timeout: timeout, message(), condition)
    }
}

/// A process did not do what the test waited for; the message holds its log.
public struct ProcessFailed: Error, CustomStringConvertible {
    public let log: String
    public init(log: String) { self.log = log }
    public var description: String { log }
}
