#if canImport(Glibc)
import Glibc
#endif

/// The service side of systemd's notify protocol (`sd_notify(3)`), spoken directly: datagrams of
/// `KEY=VALUE` lines to the `AF_UNIX` socket named by `$NOTIFY_SOCKET` (a path, or an abstract
/// name starting with `@`).
///
/// ```swift
/// let notifier = SystemdNotifier.fromEnvironment()
/// notifier?.send(.ready, .status("serving 2 apps"))
/// ```
///
/// Without `$NOTIFY_SOCKET` (not started by systemd as `Type=notify`) there is no notifier and
/// nothing is sent.
public final class SystemdNotifier: Sendable {
    /// One assignment of the protocol.
    public struct Message: Sendable, Hashable {
        /// `KEY=VALUE`.
        public let line: String

        public init(_ line: String) { self.line = line }

        /// `READY=1`: start-up is finished.
        public static let ready = Message("READY=1")
        /// `RELOADING=1`: the configuration is being reloaded (`READY=1` follows).
        public static let reloading = Message("RELOADING=1")
        /// `STOPPING=1`: shutting down.
        public static let stopping = Message("STOPPING=1")
        /// `WATCHDOG=1`: the service is alive.
        public static let watchdog = Message("WATCHDOG=1")
        /// `STATUS=…`: one line for `systemctl status` (line breaks become spaces).
        public static func status(_ text: String) -> Message {
            Message("STATUS=" + String(text.map { $0 == "\n" ? " " : $0 }))
        }
    }

    /// The socket address as given, e.g. `/run/systemd/notify` or `@/org/…`.
    public let address: String
    private let descriptor: Int32

    /// Opens a datagram socket for `address`.
    ///
    /// - Returns: `nil` when `address` is not an absolute path or an abstract name, or no
    ///   socket can be made.
    public init?(address: String) {
        guard address.hasPrefix("/") || address.hasPrefix("@"), address.utf8.count < 108 else { return nil }
        let descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        self.descriptor = descriptor
        self.address = address
    }

    deinit {
        close(descriptor)
    }

    /// The notifier for `$NOTIFY_SOCKET`, or `nil` when the variable is not set. The variable is
    /// removed from the environment (child processes must not talk to systemd in the agent's name).
    public static func fromEnvironment() -> SystemdNotifier? {
        guard let value = getenv("NOTIFY_SOCKET") else { return nil }
        let address = String(cString: value)
        unsetenv("NOTIFY_SOCKET")
        return SystemdNotifier(address: address)
    }

    /// Sends the messages in one datagram, never waiting: when the receiver's queue is full the
    /// datagram is dropped. Returns `false` when it could not be sent (systemd gone or behind);
    /// the protocol is best-effort, so callers go on either way.
    @discardableResult
    public func send(_ messages: Message...) -> Bool {
        send(messages)
    }

    /// Sends the messages in one datagram.
    @discardableResult
    public func send(_ messages: [Message]) -> Bool {
        let payload = Array(messages.map(\.line).joined(separator: "\n").utf8)
        var socketAddress = sockaddr_un()
        socketAddress.sun_family = sa_family_t(AF_UNIX)
        var pathBytes = Array(address.utf8)
        if pathBytes.first == UInt8(ascii: "@") { pathBytes[0] = 0 }
        withUnsafeMutableBytes(of: &socketAddress.sun_path) { buffer in
            for (index, byte) in pathBytes.enumerated() { buffer[index] = byte }
        }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + pathBytes.count + (pathBytes.first == 0 ? 0 : 1))
        let sent = payload.withUnsafeBytes { bytes in
            withUnsafePointer(to: &socketAddress) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                    sendto(descriptor, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT), address, length)
                }
            }
        }
        return sent == payload.count
    }

    /// How often to send `WATCHDOG=1`: half of `$WATCHDOG_USEC`, when the watchdog is on for
    /// this process (`$WATCHDOG_PID`, when set, must be this process); `nil` otherwise.
    public static func watchdogInterval() -> Duration? {
        watchdogInterval(environment: { name in getenv(name).map { String(cString: $0) } }, processID: getpid())
    }

    /// ``watchdogInterval()`` from the variables `environment` gives, for the process
    /// `processID` (tests pass their own: changing the real environment while other threads
    /// start processes is a data race that crashes them).
    public static func watchdogInterval(environment: (String) -> String?, processID: Int32) -> Duration? {
        guard let text = environment("WATCHDOG_USEC"), let microseconds = Int64(text), microseconds > 0 else { return nil }
        if let pid = environment("WATCHDOG_PID"), Int32(pid) != processID { return nil }
        return .microseconds(microseconds / 2)
    }

    /// Whether standard error goes to journald (`$JOURNAL_STREAM` names the very stream that
    /// file descriptor 2 is), so log lines should carry `<N>` priority prefixes.
    public static func standardErrorIsJournal() -> Bool {
        guard let value = getenv("JOURNAL_STREAM").map({ String(cString: $0) }) else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var status = stat()
        guard fstat(2, &status) == 0 else { return false }
        return UInt64(status.st_dev) == device && UInt64(status.st_ino) == inode
    }
}
