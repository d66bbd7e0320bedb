import FileWatch
import FleetDeviceFiles
import FleetIO
import FleetJSON
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The local inbox, `<spoolDirectory>/<app>/`: picks up request files (see ``SpoolRequest``)
/// with inotify, and by a rescan at start and after an inotify overflow.
///
/// A request file must be a regular file (not a link), at most
/// ``SpoolRequest/maximumFileSize`` bytes, and a well-formed request; anything else is moved to
/// `refused/` with a `.reason` file beside it, never silently dropped. Each app's folder is
/// created sticky and writable by all (mode 1733, like a mail drop), so apps and the CLI can
/// leave requests but not read or remove others'.
struct Inbox: Sendable {
    let configuration: AgentConfiguration
    let syncTriggers: [String: Wakeup]
    let logger: Logger

    /// The mode of each app's inbox folder.
    static let directoryMode: mode_t = 0o1733

    /// Runs until the task is cancelled.
    func run() async {
        let layout = configuration.layout
        var directories: [String: String] = [:]
        for app in configuration.apps {
            let directory = layout.spoolDirectory(app.id)
            do {
                try FileSystem.makeDirectories(layout.spoolDirectory, mode: 0o755)
                try FileSystem.makeDirectories(directory, mode: Self.directoryMode)
                directories[directory] = app.id
            } catch {
                logger.error("cannot create the inbox", metadata: ["event": "inbox", "app": "\(app.id)", "error": "\(error)"])
            }
        }
        let watcher: DirectoryWatcher
        do {
            watcher = try DirectoryWatcher(directories: Array(directories.keys))
        } catch {
            logger.error("cannot watch the inbox; sync requests wait for the next poll", metadata: ["event": "inbox", "error": "\(error)"])
            return
        }
        rescan(directories)
        await withTaskCancellationHandler {
            for await event in watcher.events {
                switch event {
                case .overflow:
                    rescan(directories)
                case .appeared(let directory, let name):
                    if let app = directories[directory] { take(name, in: directory, app: app) }
                case .created(let directory, let name):
                    // A regular file is taken once complete; a link or anything else at once.
                    let path = directory + "/" + name
                    if let app = directories[directory], let status = try? FileSystem.status(of: path), (status.st_mode & S_IFMT) != S_IFREG {
                        take(name, in: directory, app: app)
                    }
                }
            }
        } onCancel: {
            watcher.stop()
        }
    }

    private func rescan(_ directories: [String: String]) {
        for (directory, app) in directories.sorted(by: { $0.key < $1.key }) {
            let names = (try? FileSystem.entryNames(of: directory)) ?? []
            for name in names.sorted() where name != "refused" { take(name, in: directory, app: app) }
        }
    }

    /// Acts on one request file and removes it, or moves it aside with the reason.
    private func take(_ name: String, in directory: String, app: String) {
        guard SpoolRequest.isRequestName(name) else { return }
        let path = directory + "/" + name
        let request: SpoolRequest
        do {
            request = try Self.read(path)
        } catch {
            refuse(name, in: directory, app: app, reason: error.description)
            return
        }
        switch request {
        case .sync:
            syncTriggers[app]?.signal()
            logger.info("sync requested", metadata: ["event": "inbox", "app": "\(app)", "request": "sync"])
        }
        do {
            try FileSystem.removeFile(path)
        } catch {
            logger.error("cannot remove a request", metadata: ["event": "inbox", "app": "\(app)", "error": "\(error)"])
        }
    }

    /// Reads and checks a request file.
    static func read(_ path: String) throws(InboxRefusal) -> SpoolRequest {
        let status: stat?
        do {
            status = try FileSystem.status(of: path)
        } catch {
            throw InboxRefusal(description: "\(error)")
        }
        guard let status else { throw InboxRefusal(description: "vanished before it was read") }
        guard (status.st_mode & S_IFMT) == S_IFREG else {
            throw InboxRefusal(description: "not a regular file (symbolic links, devices and folders are refused)")
        }
        guard Int(status.st_size) <= SpoolRequest.maximumFileSize else {
            throw InboxRefusal(description: "\(status.st_size) bytes, more than the \(SpoolRequest.maximumFileSize) a request may have")
        }
        do {
            let bytes = try FileSystem.readFile(path, maximumSize: SpoolRequest.maximumFileSize, followLinks: false)
            return try SpoolRequest(json: try JSONParser.parse(bytes))
        } catch {
            throw InboxRefusal(description: "not a request: \(error)")
        }
    }

    private func refuse(_ name: String, in directory: String, app: String, reason: String) {
        let refused = directory + "/refused"
        logger.warning("request refused", metadata: ["event": "inbox-refused", "app": "\(app)", "file": "\(name)", "reason": "\(reason)"])
        do {
            try FileSystem.makeDirectories(refused, mode: 0o750)
            guard rename(directory + "/" + name, refused + "/" + name) == 0 else {
                throw FileError(path: directory + "/" + name, operation: "move aside")
            }
            try FileSystem.writeAtomically(Array((reason + "\n").utf8), to: refused + "/" + name + ".reason", mode: 0o640, durable: false)
        } catch {
            logger.error("cannot move a refused request aside; removing it", metadata: ["event": "inbox", "error": "\(error)"])
            try? FileSystem.removeFile(directory + "/" + name)
        }
    }
}

/// Why a request file was refused.
struct InboxRefusal: Error, CustomStringConvertible {
    let description: String
}
