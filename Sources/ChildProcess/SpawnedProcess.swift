import CSpawn
import Glibc
import PosixThreads

/// A long-running child process started with `posix_spawn`, its standard streams on pipes, a
/// file or `/dev/null` (the simulator's servers, the tests' binaries; `ChildProcess.run` is for
/// a hook with a time limit).
///
/// Not Foundation's `Process`: on Linux its `run()` finds the highest open descriptor by copying
/// each `/proc/self/fd` entry's whole 256-byte name out of `readdir`'s buffer, past the end of
/// the entry, and a process holding a thousand and more descriptors (the test suite, the
/// simulator with its fleet connected) crashed there: a segmentation fault in `memcpy` under
/// `Process.run()`, seen in CI.
public final class SpawnedProcess: Sendable {
    /// Where the child's standard error goes.
    public enum ErrorOutput: Sendable {
        /// Its own pipe (``standardError``).
        case pipe
        /// The end of a file (created with mode 0600 when missing).
        case appending(to: String)
    }

    /// Where the child's standard output goes.
    public enum Output: Sendable {
        /// Its own pipe (``standardOutput``).
        case pipe
        /// The same pipe as standard error.
        case standardError
        /// `/dev/null`.
        case discard
    }

    /// The child's process id (the leader of a process group of its own).
    public let pid: pid_t
    /// The read end of its standard output, with ``Output/pipe``.
    public let standardOutput: Int32?
    /// The read end of its standard error, with ``ErrorOutput/pipe``.
    public let standardError: Int32?
    private let exitStatus = Locked<Int32?>(nil)

    /// The most standard input a child is given: what a pipe holds, written before it starts
    /// (so that a child that exits without reading it cannot raise SIGPIPE here).
    public static let maximumInput = 60 << 10

    /// Starts `executable` (an absolute path) with `arguments`; `environment` is added to this
    /// process's own; `directory` is where it starts (this process's own when `nil`); `input`
    /// (at most ``maximumInput`` bytes) is its standard input, `/dev/null` when `nil`.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String] = [:], directory: String? = nil, input: [UInt8]? = nil,
        output: Output, errorOutput: ErrorOutput = .pipe
    ) throws {
        precondition((input?.count ?? 0) <= Self.maximumInput, "standard input beyond what a pipe holds")
        var opened: [Int32] = []
        func makePipe() throws -> (read: Int32, write: Int32) {
            var ends: [Int32] = [0, 0]
            guard fleetset_pipe_cloexec(&ends) == 0 else {
                let code = errno
                for descriptor in opened { close(descriptor) }
                throw SpawnFailed(program: executable, call: "pipe2", code: code)
            }
            opened += ends
            return (ends[0], ends[1])
        }
        var errorFile: String?
        if case .appending(let path) = errorOutput { errorFile = path }
        let errorPipe = errorFile == nil ? try makePipe() : nil
        let outputPipe = output == .pipe ? try makePipe() : nil
        let inputPipe = input == nil ? nil : try makePipe()
        if let input, let inputPipe {
            var written = 0
            while written < input.count {
                let count = input[written...].withUnsafeBytes { write(inputPipe.write, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                written += count
            }
            close(inputPipe.write)
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        if let inputPipe {
            posix_spawn_file_actions_adddup2(&actions, inputPipe.read, 0)
        } else {
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        }
        if let errorPipe {
            posix_spawn_file_actions_adddup2(&actions, errorPipe.write, 2)
        } else if let errorFile {
            posix_spawn_file_actions_addopen(&actions, 2, errorFile, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        }
        switch output {
        case .pipe: posix_spawn_file_actions_adddup2(&actions, outputPipe!.write, 1)
        case .standardError: posix_spawn_file_actions_adddup2(&actions, 2, 1)
        case .discard: posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        }
        fleetset_spawn_close_from(&actions, 3)
        if let directory { fleetset_spawn_chdir(&actions, directory) }

        var merged: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") { merged[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            entry += 1
        }
        merged.merge(environment) { _, new in new }
        let (pid, status) = spawnInOwnGroup(
            [executable] + arguments, environment: merged.map { "\($0.key)=\($0.value)" }, actions: &actions)
        // The child's ends close here; the parent keeps the other ends.
        if let errorPipe { close(errorPipe.write) }
        if let outputPipe { close(outputPipe.write) }
        if let inputPipe { close(inputPipe.read) }
        guard status == 0 else {
            if let errorPipe { close(errorPipe.read) }
            if let outputPipe { close(outputPipe.read) }
            throw SpawnFailed(program: executable, call: "posix_spawn", code: status)
        }
        self.pid = pid
        standardError = errorPipe?.read
        standardOutput = outputPipe?.read
    }

    /// Its exit status (or the number of the signal that ended it) once it has ended, else `nil`.
    /// Never blocks.
    public var status: Int32? {
        exitStatus.withLock { known in
            if known == nil {
                var raw: Int32 = 0
                if waitpid(pid, &raw, WNOHANG) == pid { known = Self.decode(raw) }
            }
            return known
        }
    }
    // Reaping happens under the lock (``status``) or records its result under it at once
    // (``waitBlocking()``): whoever reaps the child records how it ended.

    /// Whether it still runs.
    public var isRunning: Bool { status == nil }

    /// Waits for it to end, blocking the calling thread (only from a thread of its own).
    public func waitBlocking() -> Int32 {
        while true {
            if let known = status { return known }
            var raw: Int32 = 0
            let reaped = waitpid(pid, &raw, 0)
            if reaped == pid {
                let decoded = Self.decode(raw)
                return exitStatus.withLock { known in
                    if known == nil { known = decoded }
                    return known ?? decoded
                }
            }
            // EINTR: wait again. ECHILD: another thread reaped it and records how it ended;
            // ``status`` above returns that once it has.
            if reaped == -1 && errno == ECHILD { usleep(1000) }
        }
    }

    /// Sends `signal` to it.
    public func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Everything `descriptor` gives until its end, then closes it (blocking: a thread of its own).
    public static func readAll(_ descriptor: Int32, onChunk: (([UInt8]) -> Void)? = nil) -> [UInt8] {
        var collected: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            let chunk = Array(buffer[0..<count])
            if let onChunk { onChunk(chunk) } else { collected += chunk }
        }
        close(descriptor)
        return collected
    }

    /// The exit code, or the signal that ended it (as `Process.terminationStatus` says it).
    private static func decode(_ raw: Int32) -> Int32 {
        let signal = raw & 0x7f
        return signal == 0 ? (raw >> 8) & 0xff : signal
    }
}

/// A program that could not be started.
public struct SpawnFailed: Error, CustomStringConvertible {
    public let program: String
    public let call: String
    public let code: Int32
    public var description: String { "cannot run \(program): \(call): \(String(cString: strerror(code)))" }
}
