import CSpawn
import FleetIO
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// Runs a program as a child process with a time limit, collecting the tail of its output.
///
/// The child runs in a process group of its own, with standard input from `/dev/null`,
/// standard output and error into a pipe, the given environment only, and every signal
/// disposition reset to the default (the parent may ignore signals it handles itself; a child
/// must not inherit that). When the time limit passes, or the calling task is cancelled, the
/// whole group gets `SIGTERM`, and `SIGKILL` after ``killGrace``.
///
/// Waiting happens on a thread of its own, never on the Swift concurrency pool.
public enum ChildProcess {
    /// How long a child has between `SIGTERM` and `SIGKILL`.
    public static let killGrace: Duration = .seconds(2)

    /// How a child ended.
    public struct Result: Sendable, Equatable {
        /// How the process ended.
        public enum Termination: Sendable, Equatable {
            /// It exited with this status.
            case exited(Int32)
            /// A signal ended it.
            case signaled(Int32)
        }

        public var termination: Termination
        /// The time limit passed and the child was stopped.
        public var timedOut: Bool
        /// The calling task was cancelled and the child was stopped.
        public var cancelled: Bool
        /// The last bytes the child wrote to standard output and error, as text.
        public var output: String { String(decoding: outputBytes, as: UTF8.self) }
        /// The same bytes as written (a cut may fall inside a character).
        public var outputBytes: [UInt8]
        /// Whether the child wrote more than was kept, so that ``output`` starts mid-stream.
        public var outputWasCut: Bool
        /// From start to end.
        public var duration: Duration

        /// Whether the child exited with status 0 in time.
        public var succeeded: Bool { termination == .exited(0) && !timedOut && !cancelled }
    }

    /// Where a child's standard error goes.
    public enum ErrorOutput: Sendable, Equatable {
        /// Into the same pipe as standard output: ``Result/output`` holds both.
        case withOutput
        /// To the end of this file (an absolute path; created 0600 when missing, opened before
        /// the child changes directory), so that ``Result/output`` holds standard output alone
        /// and no warning of the child's can be taken for its answer.
        case appending(to: String)
    }

    /// Runs `arguments[0]` (an absolute path) with `arguments` as its argv.
    ///
    /// - Parameters:
    ///   - environment: `NAME=value` strings, the child's whole environment.
    ///   - timeout: when the child is stopped.
    ///   - outputLimit: how many bytes of output are kept (the last ones).
    ///   - directory: where the child starts; this process's own directory when `nil`. A child
    ///     running as another user needs one it may enter.
    ///   - errorOutput: where its standard error goes.
    /// - Throws: ``FleetIO/FileError`` (operation `run`) when the program cannot be started (missing, not executable, or
    ///   `directory` cannot be entered).
    public static func run(
        _ arguments: [String], environment: [String], timeout: Duration, outputLimit: Int = 2048, directory: String? = nil,
        errorOutput: ErrorOutput = .withOutput
    ) async throws(FileError) -> Result {
        precondition(!arguments.isEmpty, "a command needs at least the program")
        let child = try spawn(arguments, environment: environment, directory: directory, errorOutput: errorOutput)
        let pid = child.pid
        let watch = ChildWatch(pid: pid, output: child.output, timeout: timeout, outputLimit: outputLimit)
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                watch.start(continuation)
            }
        } onCancel: {
            watch.cancel()
        }
    }

    /// A started child and the read end of the pipe its output goes to.
    private struct Spawned: ~Copyable {
        let pid: pid_t
        let output: OwnedDescriptor
    }

    private static func spawn(
        _ arguments: [String], environment: [String], directory: String?, errorOutput: ErrorOutput
    ) throws(FileError) -> Spawned {
        let pipe: PipeEnds
        do {
            pipe = try FileSystem.makePipe()
        } catch {
            throw FileError(path: arguments[0], operation: "run", code: error.code)
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipe.writer.raw, 1)
        switch errorOutput {
        case .withOutput: posix_spawn_file_actions_adddup2(&actions, pipe.writer.raw, 2)
        case .appending(let path): posix_spawn_file_actions_addopen(&actions, 2, path, O_WRONLY | O_APPEND | O_CREAT, 0o600)
        }
        // Nothing else of this process reaches the child: no socket, no file it happens to have
        // open without close-on-exec, which a child that outlives the call (a daemon it starts)
        // would otherwise keep open.
        fleetset_spawn_close_from(&actions, 3)
        if let directory { fleetset_spawn_chdir(&actions, directory) }

        let (pid, status) = spawnInOwnGroup(arguments, environment: environment, actions: &actions)
        // The parent's copy of the write end goes now, so that the read end sees the end of the
        // output when the child (and whatever it started) is done.
        let output = pipe.closingWriter()
        guard status == 0 else { throw FileError(path: arguments[0], operation: "run", code: status) }
        return Spawned(pid: pid, output: output)
    }
}

/// Watches one child on its own thread: collects output, enforces the time limit, reaps it.
private final class ChildWatch: Sendable {
    private struct State {
        var continuation: CheckedContinuation<ChildProcess.Result, Never>?
        var cancelled = false
    }

    let pid: pid_t
    /// Closed when the watch is done with it (the watch outlives its thread).
    let output: OwnedDescriptor
    let timeout: Duration
    let outputLimit: Int
    private let state = Locked(State())

    init(pid: pid_t, output: consuming OwnedDescriptor, timeout: Duration, outputLimit: Int) {
        self.pid = pid
        self.output = output
        self.timeout = timeout
        self.outputLimit = outputLimit
    }

    func cancel() { state.withLock { $0.cancelled = true } }

    func start(_ continuation: CheckedContinuation<ChildProcess.Result, Never>) {
        state.withLock { $0.continuation = continuation }
        if DetachedThread.start(named: "fleetset-child", { [self] in watch() }) != 0 {
            watch()  // no thread to spare: wait here rather than leak the child
        }
    }

    private func watch() {
        let clock = ContinuousClock()
        let start = clock.now
        var tail: [UInt8] = []
        var outputWasCut = false
        var outputOpen = true
        var terminateSentAt: ContinuousClock.Instant?
        var killed = false
        var timedOut = false
        var cancelled = false
        var chunk = [UInt8](repeating: 0, count: 4096)
        var waitStatus: Int32 = 0

        func readAvailable() {
            while outputOpen {
                var descriptor = pollfd(fd: output.raw, events: Int16(POLLIN), revents: 0)
                guard poll(&descriptor, 1, 0) > 0 else { return }
                let count = chunk.withUnsafeMutableBytes { buffer in
                    retryingOnInterrupt { read(output.raw, buffer.baseAddress, buffer.count) }
                }
                guard count > 0 else {
                    outputOpen = false
                    return
                }
                tail.append(contentsOf: chunk[..<count])
                if tail.count > outputLimit {
                    tail.removeFirst(tail.count - outputLimit)
                    outputWasCut = true
                }
            }
        }

        while true {
            if outputOpen {
                var descriptor = pollfd(fd: output.raw, events: Int16(POLLIN), revents: 0)
                _ = poll(&descriptor, 1, 20)
                readAvailable()
            } else {
                usleep(20_000)
            }
            let reaped = retryingOnInterrupt { waitpid(pid, &waitStatus, WNOHANG) }
            if reaped == pid || reaped < 0 { break }
            let now = clock.now
            if !cancelled, state.withLock({ $0.cancelled }) { cancelled = true }
            if terminateSentAt == nil, cancelled || now - start >= timeout {
                timedOut = !cancelled
                kill(-pid, SIGTERM)
                terminateSentAt = now
            } else if let sentAt = terminateSentAt, !killed, now - sentAt >= ChildProcess.killGrace {
                kill(-pid, SIGKILL)
                killed = true
            }
        }
        readAvailable()
        let termination: ChildProcess.Result.Termination =
            (waitStatus & 0x7f) == 0 ? .exited((waitStatus >> 8) & 0xff) : .signaled(waitStatus & 0x7f)
        let result = ChildProcess.Result(
            termination: termination, timedOut: timedOut, cancelled: cancelled, outputBytes: tail, outputWasCut: outputWasCut,
            duration: clock.now - start)
        let continuation = state.withLock { state in
            defer { state.continuation = nil }
            return state.continuation
        }
        continuation?.resume(returning: result)
    }
}

/// `posix_spawn` of `arguments` (the first is the program's absolute path) with `actions`: the
/// child leads a process group of its own, with no signal blocked and every signal at its
/// default, whatever this thread blocks or this process ignores. Returns its pid and
/// `posix_spawn`'s status (0: started).
func spawnInOwnGroup(_ arguments: [String], environment: [String], actions: inout posix_spawn_file_actions_t) -> (pid: pid_t, status: Int32)
{
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var noSignals = sigset_t()
    sigemptyset(&noSignals)
    var allSignals = sigset_t()
    sigfillset(&allSignals)
    posix_spawnattr_setsigmask(&attributes, &noSignals)
    posix_spawnattr_setsigdefault(&attributes, &allSignals)
    posix_spawnattr_setpgroup(&attributes, 0)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

    let argv = arguments.map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer {
        for pointer in argv { free(pointer) }
        for pointer in envp { free(pointer) }
    }
    var pid = pid_t()
    let status = posix_spawn(&pid, arguments[0], &actions, &attributes, argv, envp)
    return (pid, status)
}
