#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The process's limit on open files (`RLIMIT_NOFILE`). Every held long-poll is a connection,
/// and so an open file: the server raises its soft limit to the hard one at start and holds
/// at most ``longPollCapacity(openFiles:)`` long-polls, so that it sheds load (503) rather
/// than failing to accept connections or to open its database.
public enum OpenFileLimit {
    /// The soft limit before and after raising it, and the hard limit.
    public struct Raised: Sendable, Equatable {
        public var previous: UInt64
        public var current: UInt64
        public var hard: UInt64
    }

    /// Raises the soft limit to the hard limit; `nil` when the limits cannot be read. A hard
    /// limit of "unlimited" is not taken literally: the soft limit then goes to 1,048,576.
    public static func raiseToHard() -> Raised? {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return nil }
        let previous = UInt64(limit.rlim_cur)
        let hard = UInt64(limit.rlim_max)
        let target = hard == UInt64.max ? max(previous, 1 << 20) : hard  // RLIM_INFINITY is all ones
        guard target > previous else { return Raised(previous: previous, current: previous, hard: hard) }
        limit.rlim_cur = rlim_t(target)
        guard setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else {
            return Raised(previous: previous, current: previous, hard: hard)
        }
        return Raised(previous: previous, current: target, hard: hard)
    }

    /// The long-polls to hold at most with `openFiles` descriptors: all but a reserve for the
    /// database, admin and other requests, and the listening sockets (a quarter, at most 1,000).
    public static func longPollCapacity(openFiles: UInt64) -> Int {
        let files = Int(clamping: openFiles)
        return max(1, files - min(1000, files / 4))
    }
}
