import FleetDeviceFiles

#if canImport(Glibc)
import Glibc
#endif

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
        kind: Kind, links: Int, size: Int, owner: uid_t, group: gid_t, writers: Writers, agentUser: uid_t
    ) -> String? {
        guard kind == .regular else { return "not a regular file (symbolic links, devices and folders are refused)" }
        guard links == 1 else { return "has \(links) hard links; a request must be a file of its own" }
        guard writers.allow(owner: owner, group: group, agentUser: agentUser) else {
            return "written by uid \(owner) (gid \(group)), who may not change this app's settings; allowed: \(writers.summary)"
        }
        guard size <= SpoolRequest.maximumFileSize else {
            return "\(size) bytes, more than the \(SpoolRequest.maximumFileSize) a request may have"
        }
        return nil
    }
}
