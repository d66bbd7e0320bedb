import FleetDeviceState
import FleetIO
import FleetJSON

#if canImport(Glibc)
import Glibc
#endif

extension InboxRequest {
    /// Leaves this request in `directory` (the app's inbox), atomically, the file's contents
    /// fsynced. The rename is made durable here when the caller may read the inbox (root, the
    /// agent's user); other writers cannot open it to fsync it, so the agent syncs the inbox when
    /// it takes the request (at once while it runs), and the file system commits it within
    /// seconds in any case. Returns the request's id: the time in microseconds, the process id
    /// and a random number, so ids sort in the order requests were made and never collide.
    @discardableResult
    public func submit(to directory: String) throws(FileError) -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let micros = String(spec.tv_nsec / 1000 + 1_000_000).dropFirst()
        let id = "\(spec.tv_sec)\(micros)-\(getpid())-\(UInt32.random(in: .min ... .max))"
        // Writers other than root and the agent cannot open the inbox (mode 1733) to fsync it;
        // the agent syncs it when it takes the request (see the Inbox).
        try FileSystem.writeAtomically(
            Array(json.serialized().utf8), to: "\(directory)/\(id).json", mode: 0o644, unreadableDirectory: .skipSync)
        return id
    }
}
