/// Temporary files writers left in an inbox (a writer that died before its rename), told apart
/// from files still being written by monotonic time alone: a file is abandoned once it has been
/// seen unchanged (same inode, size and modification time) for ``abandonedAfter``. The wall
/// clock jumping (a device whose clock is set at boot) never makes a file look old.
public struct AbandonedFiles<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// What tells a file's versions apart.
    public struct Version: Sendable, Hashable {
        public var inode: UInt64
        public var size: Int64
        /// The modification time as the file system records it (only compared, never aged).
        public var modified: Int64

        public init(inode: UInt64, size: Int64, modified: Int64) {
            self.inode = inode
            self.size = size
            self.modified = modified
        }
    }

    /// How long a file must stay unchanged to count as abandoned.
    public let abandonedAfter: Duration
    private var firstSeen: [String: (version: Version, at: Instant)] = [:]

    public init(abandonedAfter: Duration) {
        self.abandonedAfter = abandonedAfter
    }

    /// Records a look at the folder's temporary files at `now`; returns the names to remove,
    /// sorted. Files gone since the last look are forgotten; a changed file starts over.
    public mutating func look(at found: [String: Version], now: Instant) -> [String] {
        var seen: [String: (version: Version, at: Instant)] = [:]
        var abandoned: [String] = []
        for (name, version) in found {
            if let earlier = firstSeen[name], earlier.version == version {
                if earlier.at.duration(to: now) >= abandonedAfter {
                    abandoned.append(name)
                } else {
                    seen[name] = earlier
                }
            } else {
                seen[name] = (version, now)
            }
        }
        firstSeen = seen
        return abandoned.sorted()
    }
}
