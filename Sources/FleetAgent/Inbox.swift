import FileWatch
import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import Logging
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// The local inbox, `<inboxDirectory>/<app>/`: picks up request files (see ``InboxRequest``)
/// with inotify, and by a rescan at start and after an inotify overflow, checks them, and hands
/// them to their app's loop through its ``InboxQueue``. The loop removes a file once it has
/// queued the request durably or acted on it, so a request survives a crash at any point.
///
/// A request file must be owned by an allowed writer (the app's `writers`, root or the agent's
/// user), be a regular file with one link (no symbolic or hard links), at most
/// ``InboxRequest/maximumFileSize`` bytes, and a well-formed request; anything else is moved to
/// `refused/` (checked to be the agent's own folder) with a `.reason` file beside it and
/// logged, never silently dropped; an allowed writer's refused request is also recorded in
/// `changes.json`. Each app's folder is sticky and writable by all (mode 1733, like a mail
/// drop), so apps and the CLI can leave requests but not read or remove others'. A user who
/// floods an inbox is throttled (``RefusalThrottle``): beyond 20 refusals at once and one every
/// 6 s, that user's refused files are removed without a line or a `.reason` each, and one
/// `event=inbox-refused-quietly` warning a minute counts them. The first scan
/// fulfils `scanned`, which the app loops wait for: requests left while the agent was down go
/// before the first request to the server.
struct Inbox<C: Clock>: Sendable where C.Duration == Duration {
    let configuration: AgentConfiguration
    let queues: [String: InboxQueue]
    /// Fulfilled after the first scan (or when there is nothing to scan).
    let scanned: Promise<Void>
    /// Monotonic time, for telling abandoned temporary files from ones being written.
    let clock: C
    /// Seconds since the epoch, for the age of refused requests (kept across restarts).
    let wallClock: @Sendable () -> Int64
    let logger: Logger
    /// Refusals handled one by one, per uid (shared with the task that writes the summaries).
    let refusals = Locked(RefusalThrottle<C.Instant>())

    /// How often the refusals counted quietly are summed up in one line per user.
    static var refusalSummaryInterval: Duration { .seconds(60) }

    /// Runs until the task is cancelled.
    func run() async {
        defer { scanned.fulfil(()) }
        let layout = configuration.layout
        var directories: [String: AppConfiguration] = [:]
        for app in configuration.apps {
            let directory = layout.inboxDirectory(app.id)
            do {
                try FileSystem.makeDirectories(layout.inboxDirectory, mode: 0o755)
                try InboxFolder.prepare(directory, now: wallClock())
                directories[directory] = app
            } catch {
                logger.error("cannot use the inbox", metadata: ["event": "inbox", "app": "\(app.id)", "error": "\(error)"])
            }
        }
        let watcher: DirectoryWatcher
        do {
            watcher = try DirectoryWatcher(directories: Array(directories.keys))
        } catch {
            logger.error(
                "cannot watch the inbox; taking what is there, later requests wait for the next start",
                metadata: ["event": "inbox", "error": "\(error)"])
            rescan(directories)
            scanned.fulfil(())
            return
        }
        rescan(directories)
        scanned.fulfil(())
        let watched = directories
        let sweeper = Task { await sweepAbandonedFiles(watched) }
        let summaries = Task { await summarizeQuietRefusals() }
        defer {
            sweeper.cancel()
            summaries.cancel()
        }
        await withTaskCancellationHandler {
            for await event in watcher.events {
                switch event {
                case .overflow:
                    rescan(directories)
                case .removed:
                    break  // what the inbox took itself, or nothing it holds
                case .appeared(let directory, let name):
                    if let app = directories[directory] { take(name, in: directory, app: app) }
                case .created(let directory, let name):
                    // A regular file is taken once complete; a link (symbolic or hard) or anything
                    // else at once: no close or rename will follow.
                    let path = directory + "/" + name
                    if let app = directories[directory], let status = try? FileSystem.status(of: path),
                        (status.st_mode & S_IFMT) != S_IFREG || status.st_nlink > 1
                    {
                        take(name, in: directory, app: app)
                    }
                }
            }
        } onCancel: {
            watcher.stop()
        }
    }

    private func rescan(_ directories: [String: AppConfiguration]) {
        for (directory, app) in directories.sorted(by: { $0.key < $1.key }) {
            let names = (try? FileSystem.entryNames(of: directory)) ?? []
            for name in names.sorted() where InboxRequest.isRequestName(name) {
                take(name, in: directory, app: app)
            }
        }
    }

    /// How long a temporary file in an inbox must stay unchanged to count as abandoned by a
    /// writer that died, and how often the inboxes are looked at for them.
    static var abandonedAfter: Duration { .seconds(3600) }
    static var sweepInterval: Duration { .seconds(600) }

    /// Removes the temporary files writers left behind (a crash before their rename) once they
    /// stayed unchanged for ``abandonedAfter`` of monotonic time, so that inboxes do not fill up
    /// with them; runs until cancelled.
    private func sweepAbandonedFiles(_ directories: [String: AppConfiguration]) async {
        var tracked = Dictionary(
            uniqueKeysWithValues: directories.keys.map { ($0, AbandonedFiles<C.Instant>(abandonedAfter: Self.abandonedAfter)) })
        while !Task.isCancelled {
            for directory in directories.keys.sorted() {
                var found: [String: AbandonedFiles<C.Instant>.Version] = [:]
                for name in (try? FileSystem.entryNames(of: directory)) ?? [] where name != "refused" && !InboxRequest.isRequestName(name) {
                    guard let status = try? FileSystem.status(of: directory + "/" + name), (status.st_mode & S_IFMT) != S_IFDIR else {
                        continue
                    }
                    found[name] = .init(
                        inode: UInt64(status.st_ino), size: Int64(status.st_size),
                        modified: Int64(status.st_mtim.tv_sec) * 1_000_000_000 + Int64(status.st_mtim.tv_nsec))
                }
                for name in tracked[directory, default: AbandonedFiles(abandonedAfter: Self.abandonedAfter)].look(at: found, now: clock.now)
                {
                    do {
                        try FileSystem.removeFile(directory + "/" + name)
                        logger.notice("removed an abandoned temporary file", metadata: ["event": "inbox-cleanup", "file": "\(name)"])
                    } catch {
                        logger.error("cannot remove an abandoned temporary file", metadata: ["event": "inbox", "error": "\(error)"])
                    }
                }
            }
            try? await clock.sleep(for: Self.sweepInterval)
        }
    }

    /// Every ``refusalSummaryInterval``: one warning per user whose refused files were removed
    /// quietly since the last one. Runs until cancelled.
    private func summarizeQuietRefusals() async {
        while !Task.isCancelled {
            try? await clock.sleep(for: Self.refusalSummaryInterval)
            let now = clock.now
            for (uid, count) in refusals.withLock({ $0.takeSummary(at: now) }) {
                logger.warning(
                    "inbox requests refused quietly",
                    metadata: [
                        "event": "inbox-refused-quietly", "uid": "\(uid)", "count": "\(count)",
                        "reason":
                            "this user left more bad requests than the agent handles one by one (20 at once, one every 6 s); removed without a .reason",
                    ])
            }
        }
    }

    /// Checks one request file and hands it to the app's loop, or moves it aside with the reason.
    private func take(_ name: String, in directory: String, app: AppConfiguration) {
        guard InboxRequest.isRequestName(name), let queue = queues[app.id] else { return }
        let path = directory + "/" + name
        let id = InboxRequest.id(ofFileNamed: name)
        do {
            // Gone already: handled and removed by the app's loop since the event (or a rescan) named it.
            guard let request = try InboxFolder.read(path, writers: app.writers, agentUser: geteuid()) else { return }
            // Writers that may not read the inbox could not fsync it after their rename.
            do {
                try FileSystem.syncDirectory(directory)
            } catch {
                logger.error("cannot sync the inbox", metadata: ["event": "disk-error", "error": "\(error)"])
            }
            queue.deliver(InboxDelivery(id: id, path: path, content: .request(request)))
        } catch {
            if let owner = error.owner {
                let now = clock.now
                switch refusals.withLock({ $0.admit(owner, at: now) }) {
                case .handle:
                    break
                case .quietFromNow:
                    logger.warning(
                        "inbox requests of one user refused quietly from now",
                        metadata: [
                            "event": "inbox-refused-quietly", "uid": "\(owner)", "app": "\(app.id)",
                            "reason":
                                "more bad requests than the agent handles one by one (20 at once, one every 6 s); a count follows every minute",
                        ])
                    try? FileSystem.removeFile(path)
                    deliverRefusal(error, id: id, to: queue)
                    return
                case .quiet:
                    try? FileSystem.removeFile(path)  // counted for the summary line
                    deliverRefusal(error, id: id, to: queue)
                    return
                }
            }
            refuse(name, in: directory, app: app.id, reason: error.description)
            deliverRefusal(error, id: id, to: queue)
        }
    }

    /// An allowed writer's refused request is recorded in `changes.json` (`fleetset set --wait`
    /// and the library see why), throttled or not; a stranger's never is.
    private func deliverRefusal(_ error: InboxRefusal, id: String, to queue: InboxQueue) {
        if error.fromWriter { queue.deliver(InboxDelivery(id: id, path: nil, content: .refused(error.description))) }
    }

    private func refuse(_ name: String, in directory: String, app: String, reason: String) {
        logger.warning("request refused", metadata: ["event": "inbox-refused", "app": "\(app)", "file": "\(name)", "reason": "\(reason)"])
        do {
            try InboxFolder.moveAside(directory + "/" + name, reason: reason, now: wallClock())
        } catch {
            logger.error("cannot move a refused request aside; removing it", metadata: ["event": "inbox", "error": "\(error)"])
            try? FileSystem.removeFile(directory + "/" + name)
        }
    }
}

/// An app's inbox folder on disk: its checks, the reading of request files, and `refused/`.
enum InboxFolder {
    /// The mode of each app's inbox folder.
    static let directoryMode: mode_t = 0o1733

    /// Reads and checks a request file; `nil` when there is no file at `path`. The type is
    /// checked before opening (a FIFO or device is never opened for reading), and every check is
    /// made again on the open file, so that what is checked is what is read.
    static func read(_ path: String, writers: Writers, agentUser: uid_t) throws(InboxRefusal) -> InboxRequest? {
        let named: stat?
        do {
            named = try FileSystem.status(of: path)
        } catch {
            throw InboxRefusal(description: "\(error)", fromWriter: false)
        }
        guard let named else { return nil }
        guard (named.st_mode & S_IFMT) == S_IFREG else { throw refusal(named, writers: writers, agentUser: agentUser) }
        let descriptor: OwnedDescriptor
        do {
            descriptor = try FileSystem.openForReading(path, followLinks: false)
        } catch let error where error.code == ENOENT {
            return nil
        } catch {
            throw InboxRefusal(description: "\(error)", fromWriter: false)
        }
        var opened = stat()
        guard fstat(descriptor.raw, &opened) == 0 else {
            throw InboxRefusal(description: "\(FileError(path: path, operation: "stat"))", fromWriter: false)
        }
        if RequestFileCheck.refusal(
            kind: (opened.st_mode & S_IFMT) == S_IFREG ? .regular : .other, links: Int(opened.st_nlink), size: Int(opened.st_size),
            owner: opened.st_uid, group: opened.st_gid, writers: writers, agentUser: agentUser) != nil
        {
            throw refusal(opened, writers: writers, agentUser: agentUser)
        }
        do {
            let bytes = try FileSystem.readAll(
                from: descriptor.raw, path: path, maximumSize: InboxRequest.maximumFileSize, sizeHint: Int(opened.st_size))
            return try InboxRequest(json: try JSONParser.parse(bytes))
        } catch {
            throw InboxRefusal(description: "not a request: \(error)", fromWriter: true, owner: opened.st_uid)
        }
    }

    /// The refusal of a file with `status`, saying whether an allowed writer left it.
    private static func refusal(_ status: stat, writers: Writers, agentUser: uid_t) -> InboxRefusal {
        let reason = RequestFileCheck.refusal(
            kind: (status.st_mode & S_IFMT) == S_IFREG ? .regular : .other, links: Int(status.st_nlink), size: Int(status.st_size),
            owner: status.st_uid, group: status.st_gid, writers: writers, agentUser: agentUser)
        let kind: RequestFileCheck.Kind = (status.st_mode & S_IFMT) == S_IFREG ? .regular : .other
        return InboxRefusal(
            description: reason ?? "refused",
            fromWriter: RequestFileCheck.isAttributable(
                kind: kind, links: Int(status.st_nlink), owner: status.st_uid, group: status.st_gid, writers: writers, agentUser: agentUser),
            owner: status.st_uid)
    }

    /// Makes sure the app's inbox is a folder of the agent's own with mode 1733, and that its
    /// `refused/` is one too (a local user could otherwise have put a link or a folder of their
    /// own there first: the inbox is writable by all).
    static func prepare(_ directory: String, now: Int64) throws(FileError) {
        try FileSystem.makeDirectories(directory, mode: directoryMode)
        guard let status = try FileSystem.status(of: directory), (status.st_mode & S_IFMT) == S_IFDIR, status.st_uid == geteuid() else {
            throw FileError(path: directory, operation: "use as an inbox (not a folder of the agent's own)", code: EPERM)
        }
        if status.st_mode & 0o7777 != directoryMode {
            guard chmod(directory, directoryMode) == 0 else { throw FileError(path: directory, operation: "chmod") }
        }
        let refused = directory + "/refused"
        if let found = try FileSystem.status(of: refused), !isOwnFolder(found) {
            // Squatted: move it out of the way (the agent owns the sticky inbox, so it may).
            guard rename(refused, directory + "/.squatted-refused-\(now)") == 0 else {
                throw FileError(path: refused, operation: "move aside")
            }
        }
        try FileSystem.makeDirectories(refused, mode: 0o700)
        // Refused files are the agent's business alone (0700), whatever an older agent made.
        if let made = try FileSystem.status(of: refused), made.st_mode & 0o7777 != 0o700 {
            guard chmod(refused, 0o700) == 0 else { throw FileError(path: refused, operation: "chmod") }
        }
    }

    private static func isOwnFolder(_ status: stat) -> Bool {
        (status.st_mode & S_IFMT) == S_IFDIR && status.st_uid == geteuid()
    }

    /// Moves the request file at `path` to `refused/` beside it, with `reason` in a `.reason` file.
    static func moveAside(_ path: String, reason: String, now: Int64) throws(FileError) {
        let directory = FileSystem.parentDirectory(of: path)
        let name = String(path.dropFirst(directory.utf8.count + 1))
        let refused = directory + "/refused"
        guard let found = try FileSystem.status(of: refused), isOwnFolder(found) else {
            throw FileError(path: refused, operation: "use (not a folder of the agent's own)", code: EPERM)
        }
        guard rename(path, refused + "/" + name) == 0 else { throw FileError(path: path, operation: "move aside") }
        try FileSystem.writeAtomically(Array((reason + "\n").utf8), to: refused + "/" + name + ".reason", mode: 0o600, durable: false)
        prune(refused, now: now)
    }

    /// Removes what ``RefusedFolder`` no longer keeps from `refused/`.
    static func prune(_ refused: String, now: Int64) {
        let entries = ((try? FileSystem.entryNames(of: refused)) ?? []).compactMap { name -> RefusedFolder.Entry? in
            guard let status = try? FileSystem.status(of: refused + "/" + name) else { return nil }
            return RefusedFolder.Entry(name: name, modified: Int(status.st_mtim.tv_sec))
        }
        for name in RefusedFolder.expired(entries, now: Int(now)) {
            try? FileSystem.removeFile(refused + "/" + name)
        }
    }
}

/// Why a request file was refused.
struct InboxRefusal: Error, CustomStringConvertible {
    let description: String
    /// Whether the file came from an allowed writer (only then is the refusal recorded in
    /// `changes.json`: others must not be able to push real outcomes out of it).
    let fromWriter: Bool
    /// The uid owning the file (or the link), when it was looked at: whom the refusal counts
    /// against for ``RefusalThrottle``.
    var owner: UInt32? = nil
}
