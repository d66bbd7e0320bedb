import FleetIO
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// An app's update lock: `<stateDirectory>/apps/<app>/updates.lock`, a `flock(2)` lock.
///
/// An app that is busy (a sale in progress, a video playing to its end) holds it shared; the
/// agent takes it exclusively, without waiting, before it writes new settings and holds it
/// until their hook has run. So the agent never applies while the app holds it, and an app that
/// asks for it while the agent applies waits until the apply is done. The kernel lets go of a
/// lock when its holder dies: a crashed app never blocks updates.
///
/// The agent makes the file (mode 0640, group: the app's readers), so every app that can read
/// its settings can open it read-only and lock it; `flock(1)` does it from a shell:
/// `flock --shared /var/lib/fleetset/apps/kiosk/updates.lock my-busy-task`.
public final class UpdateLock: Sendable {
    /// The lock file.
    public let path: String
    /// The descriptor while the lock is held (by this object).
    private let held = Locked<Int32?>(nil)

    public init(path: String) { self.path = path }

    /// The lock file of `app`.
    public convenience init(layout: DeviceLayout, app: String) {
        self.init(path: layout.appDirectory(app) + "/updates.lock")
    }

    /// Makes the file if it is missing (the agent, at start).
    public func create(group: gid_t?) throws(FileError) {
        let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o640)
        guard descriptor >= 0 else { throw FileError(path: path, operation: "create") }
        defer { Glibc.close(descriptor) }
        if let group, fchown(descriptor, uid_t.max, group) != 0 { throw FileError(path: path, operation: "chown") }
        if fchmod(descriptor, 0o640) != 0 { throw FileError(path: path, operation: "chmod") }
    }

    /// Takes the lock exclusively without waiting (the agent). Returns false while anyone else
    /// holds it; true when taken, or already held by this object.
    public func tryExclusive() throws(FileError) -> Bool {
        try take(LOCK_EX | LOCK_NB)
    }

    /// Takes the lock shared without waiting (an app). Returns false while the agent applies.
    public func tryShared() throws(FileError) -> Bool {
        try take(LOCK_SH | LOCK_NB)
    }

    private func take(_ operation: Int32) throws(FileError) -> Bool {
        if held.withLock({ $0 }) != nil { return true }
        let descriptor = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard descriptor >= 0 else { throw FileError(path: path, operation: "open") }
        guard retryingOnInterrupt({ flock(descriptor, operation) }) == 0 else {
            let code = errno
            Glibc.close(descriptor)
            if code == EWOULDBLOCK { return false }
            throw FileError(path: path, operation: "flock", code: code)
        }
        held.withLock { $0 = descriptor }
        return true
    }

    /// Lets go of the lock, if held.
    public func release() {
        guard
            let descriptor = held.withLock({ value -> Int32? in
                defer { value = nil }
                return value
            })
        else { return }
        Glibc.close(descriptor)
    }

    /// Whether this object holds the lock.
    public var isHeld: Bool { held.withLock { $0 != nil } }

    deinit { release() }
}
