import FleetDeviceState

/// The checks a request file in an app's inbox must pass before the agent reads it.
public enum RequestFileCheck {
    /// What kind of file it is.
    public enum Kind: Sendable {
        case regular, other
    }

    /// Why a file with these properties is refused, or `nil` when it may be read.
    ///
    /// - Parameters:
    ///   - links: the file's hard-link count; more than one means it may be someone else's file
    ///     linked into the inbox.
    ///   - owner, group: the file's owner and group, checked against `writers`.
    public static func refusal(
        kind: Kind, links: Int, size: Int, owner: UInt32, group: UInt32, writers: Writers, agentUser: UInt32
    ) -> String? {
        guard kind == .regular else { return "not a regular file (symbolic links, devices and folders are refused)" }
        guard links == 1 else { return "has \(links) hard links; a request must be a file of its own" }
        guard writers.allow(owner: owner, group: group, agentUser: agentUser) else {
            return "written by uid \(owner) (gid \(group)), who may not change this app's settings; allowed: \(writers.summary)"
        }
        guard size <= InboxRequest.maximumFileSize else {
            return "\(size) bytes, more than the \(InboxRequest.maximumFileSize) a request may have"
        }
        return nil
    }

    /// Whether a refusal of a file with these properties may be recorded as its owner's: only
    /// for a regular file with one link owned by an allowed writer. A hard link is anybody's
    /// (whoever made it need not own the file), so it is never attributed to the file's owner.
    public static func isAttributable(kind: Kind, links: Int, owner: UInt32, group: UInt32, writers: Writers, agentUser: UInt32) -> Bool {
        kind == .regular && links == 1 && writers.allow(owner: owner, group: group, agentUser: agentUser)
    }
}

/// What an inbox's `refused/` folder keeps: the requests the agent moved aside, each with its
/// `.reason` file, for at most ``maximumAge`` and at most ``maximumRequests`` of them, so
/// that a writer who floods the inbox with bad requests cannot fill the disk.
public enum RefusedFolder {
    /// Requests kept at most (the newest).
    public static let maximumRequests = 100
    /// Seconds a refused request is kept.
    public static let maximumAge = 7 * 24 * 3600

    /// One entry of the folder: its name and modification time (seconds since the epoch).
    public struct Entry: Sendable, Hashable {
        public var name: String
        public var modified: Int

        public init(name: String, modified: Int) {
            self.name = name
            self.modified = modified
        }
    }

    /// The names to remove at `now`: every request (with its `.reason`) older than
    /// ``maximumAge``, then the oldest beyond ``maximumRequests``. A request and its reason go
    /// together; their age is the newer of the two.
    public static func expired(_ entries: [Entry], now: Int) -> [String] {
        var requests: [String: (names: [String], modified: Int)] = [:]
        for entry in entries {
            let request = entry.name.hasSuffix(".reason") ? String(entry.name.dropLast(".reason".count)) : entry.name
            var group = requests[request] ?? ([], Int.min)
            group.names.append(entry.name)
            group.modified = max(group.modified, entry.modified)
            requests[request] = group
        }
        let newestFirst = requests.sorted { ($0.value.modified, $0.key) > ($1.value.modified, $1.key) }
        var expired: [String] = []
        for (position, request) in newestFirst.enumerated()
        where position >= maximumRequests || now - request.value.modified > maximumAge {
            expired += request.value.names.sorted()
        }
        return expired.sorted()
    }
}
