#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a system call on a file, a directory or a program failed: the path, what was being done,
/// the failing call and the system's reason. The one `errno`-style error of fleetset's POSIX
/// code: reading and writing files, watching directories, starting programs.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file, directory or program (empty: none in particular, e.g. an `inotify_init1`).
    public let path: String
    /// What was being done: `open`, `read`, `opendir`, `stat`, `watch`, `run`.
    public let operation: String
    /// The failing system call when it is not named by ``operation`` (`posix_spawn`,
    /// `inotify_add_watch`), or `nil`.
    public let call: String?
    /// The `errno` value.
    public let code: Int32

    /// Creates an error from the current `errno`.
    public init(path: String, operation: String, call: String? = nil, code: Int32 = errno) {
        self.path = path
        self.operation = operation
        self.call = call
        self.code = code
    }

    /// `cannot read /etc/x.json: No such file or directory`; with a call of its own,
    /// `cannot watch /var/spool/x: No such file or directory (inotify_add_watch)`.
    public var description: String {
        let reason = String(cString: strerror(code))
        let subject = path.isEmpty ? "" : " \(path)"
        return "cannot \(operation)\(subject): \(reason)" + (call.map { " (\($0))" } ?? "")
    }
}

/// Small, synchronous file-system helpers over POSIX calls (no Foundation).
public enum FileSystem {
    /// Files larger than this are refused by ``readFile(_:maximumSize:)`` unless a limit is
    /// given: documents fleetset reads are small, and a runaway file must not exhaust memory.
    public static let defaultMaximumSize = 64 << 20

    /// The whole contents of the regular file at `path`.
    ///
    /// - Parameter followLinks: `false` refuses a symbolic link (`ELOOP`) instead of reading
    ///   the file it points at: for files others may have placed.
    public static func readFile(_ path: String, maximumSize: Int = defaultMaximumSize, followLinks: Bool = true) throws(FileError)
        -> [UInt8]
    {
        let descriptor = try openForReading(path, followLinks: followLinks)
        var status = stat()
        guard fstat(descriptor.raw, &status) == 0 else { throw FileError(path: path, operation: "stat") }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw FileError(path: path, operation: "read", code: EISDIR) }
        return try readAll(from: descriptor.raw, path: path, maximumSize: maximumSize, sizeHint: Int(status.st_size))
    }

    /// Opens `path` for reading (close-on-exec, never blocking on a FIFO); with `followLinks`
    /// `false`, a symbolic link is refused (`ELOOP`). For callers that check the open file with
    /// `fstat` before reading it (``readAll(from:path:maximumSize:sizeHint:)``), so that what is
    /// checked is what is read.
    public static func openForReading(_ path: String, followLinks: Bool = true) throws(FileError) -> OwnedDescriptor {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | (followLinks ? 0 : O_NOFOLLOW)) }
        guard descriptor >= 0 else { throw FileError(path: path, operation: "open") }
        return OwnedDescriptor(taking: descriptor)
    }

    /// Reads an open file to its end; more than `maximumSize` bytes is `EFBIG`.
    public static func readAll(from descriptor: Int32, path: String, maximumSize: Int, sizeHint: Int = 0) throws(FileError) -> [UInt8] {
        guard sizeHint <= maximumSize else { throw FileError(path: path, operation: "read", code: EFBIG) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(sizeHint)
        var chunk = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let count = chunk.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt { read(descriptor, buffer.baseAddress, buffer.count) }
            }
            guard count >= 0 else { throw FileError(path: path, operation: "read") }
            if count == 0 { return bytes }
            bytes.append(contentsOf: chunk[..<count])
            guard bytes.count <= maximumSize else { throw FileError(path: path, operation: "read", code: EFBIG) }
        }
    }

    /// The whole contents of the regular file at `path`, or `nil` when there is none.
    public static func readFileIfPresent(_ path: String, maximumSize: Int = defaultMaximumSize) throws(FileError) -> [UInt8]? {
        do {
            return try readFile(path, maximumSize: maximumSize)
        } catch  where error.code == ENOENT {
            return nil
        }
    }

    /// The token in a token file (admin, enrollment): its first line (ended by LF or CRLF)
    /// without surrounding spaces or tabs; empty when the file is. Larger than 4 KiB is refused: a token
    /// file holds one token.
    public static func readToken(_ path: String) throws(FileError) -> String {
        let text = String(decoding: try readFile(path, maximumSize: 4096), as: UTF8.self)
        // Split on `isNewline`: "\r\n" is one Character, which a split on "\n" would not see.
        var line = text.split(maxSplits: 1, omittingEmptySubsequences: false, whereSeparator: \.isNewline).first ?? ""
        while let first = line.first, first == " " || first == "\t" { line.removeFirst() }
        while let last = line.last, last == " " || last == "\t" { line.removeLast() }
        return String(line)
    }

    /// The regular files under `directory`, recursively, as paths relative to it, sorted.
    /// Symbolic links and hidden entries (names starting with `.`) are skipped.
    public static func regularFiles(under directory: String) throws(FileError) -> [String] {
        var found: [String] = []
        try collectFiles(in: directory, relative: "", into: &found)
        return found.sorted()
    }

    /// The names of the entries of `directory` (`.` and `..` left out), unsorted.
    public static func entryNames(of directory: String) throws(FileError) -> [String] {
        guard let stream = opendir(directory) else { throw FileError(path: directory, operation: "open directory") }
        defer { closedir(stream) }
        var names: [String] = []
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
            if name != "." && name != ".." { names.append(name) }
        }
        return names
    }

    private static func collectFiles(in directory: String, relative: String, into found: inout [String]) throws(FileError) {
        for name in try entryNames(of: directory) {
            if name.hasPrefix(".") { continue }
            let path = directory + "/" + name
            let relativePath = relative.isEmpty ? name : relative + "/" + name
            var status = stat()
            guard lstat(path, &status) == 0 else { throw FileError(path: path, operation: "stat") }
            switch status.st_mode & S_IFMT {
            case S_IFDIR: try collectFiles(in: path, relative: relativePath, into: &found)
            case S_IFREG: found.append(relativePath)
            default: continue
            }
        }
    }
}

extension FileSystem {
    /// Replaces the file at `path` with `bytes` so that a reader (or a power cut) only ever sees
    /// the old contents or the new, never a mix: write a temporary file beside it, `fsync` it,
    /// `rename` it over the target, then `fsync` the directory so the rename itself is durable.
    ///
    /// The file gets exactly `mode` (the process umask does not apply), so a file holding a
    /// secret is created `0600` from its first byte; with `group` it also gets that group (the
    /// caller must be a member of it). On failure the temporary file is removed and the old
    /// file is untouched.
    ///
    /// - Parameter durable: `false` skips both `fsync`s: the replacement is still atomic for
    ///   readers, but a power cut may bring back the old contents. For files that are only a
    ///   report of state (a status file), where flash wear matters more than the last update.
    public static func writeAtomically(
        _ bytes: [UInt8], to path: String, mode: mode_t = 0o644, group: gid_t? = nil, durable: Bool = true,
        unreadableDirectory: UnreadableDirectory = .fail
    ) throws(FileError) {
        let directory = parentDirectory(of: path)
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
        // Created 0600, so that nobody else can open it before it has its group: a member of the
        // process's own group could otherwise open it in the moment before `fchown`, keep the
        // descriptor, and read the secrets written next. Only then does it get its mode.
        let opened = retryingOnInterrupt { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600) }
        guard opened >= 0 else { throw FileError(path: temporary, operation: "create") }
        let file = OwnedDescriptor(taking: opened)
        var written = false
        defer { if !written { unlink(temporary) } }
        if let group, fchown(file.raw, uid_t.max, group) != 0 {
            throw FileError(path: temporary, operation: "give group \(group) to")
        }
        guard fchmod(file.raw, mode) == 0 else { throw FileError(path: temporary, operation: "chmod") }
        try writeAll(bytes, to: file.raw, path: temporary)
        if durable {
            guard retryingOnInterrupt({ fsync(file.raw) }) == 0 else { throw FileError(path: temporary, operation: "fsync") }
        }
        guard rename(temporary, path) == 0 else { throw FileError(path: path, operation: "replace") }
        written = true
        guard durable else { return }
        do {
            try syncDirectory(directory)
        } catch  where error.code == EACCES && unreadableDirectory == .skipSync {
            // A folder the writer may add to but not read (a mail drop such as an app's inbox,
            // mode 1733) cannot be opened to fsync it. The file's contents are on disk; the
            // rename reaches it with the file system's next commit (ext4: within 5 s), or when
            // the folder's owner syncs it. (sync(2) instead would flush every dirty page of the
            // machine and can stall for seconds.)
        }
    }

    /// What ``writeAtomically(_:to:mode:group:durable:unreadableDirectory:)`` does when the
    /// folder cannot be opened to fsync it (the writer may add to it but not read it).
    public enum UnreadableDirectory: Sendable {
        /// Fail: the rename must be on disk when the call returns.
        case fail
        /// Go on: the file is synced and in place; the rename is committed soon after.
        case skipSync
    }

    /// Makes `path` a second name of the file at `source`, replacing whatever `path` named, in
    /// one atomic step (a hard link to a temporary name, then `rename`). Not durable until the
    /// directory is synced. Returns `false` when `source` does not exist.
    @discardableResult
    public static func replaceWithLink(_ path: String, to source: String) throws(FileError) -> Bool {
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
        guard link(source, temporary) == 0 else {
            if errno == ENOENT { return false }
            throw FileError(path: source, operation: "link")
        }
        // When `path` already names the same file (a stop between the two steps of a persist
        // left it so), POSIX `rename` does nothing and succeeds, leaving the temporary name
        // behind: it is removed whatever `rename` did (it is gone already when `rename` moved it).
        defer { unlink(temporary) }
        guard rename(temporary, path) == 0 else { throw FileError(path: path, operation: "replace") }
        return true
    }

    /// Creates the directory `path` and its missing parents; the new ones get exactly `mode`.
    /// An existing directory is left as it is.
    public static func makeDirectories(_ path: String, mode: mode_t = 0o755) throws(FileError) {
        var status = stat()
        if stat(path, &status) == 0 {
            guard (status.st_mode & S_IFMT) == S_IFDIR else { throw FileError(path: path, operation: "make directory", code: ENOTDIR) }
            return
        }
        let parent = parentDirectory(of: path)
        if parent != path && parent != "." && parent != "/" { try makeDirectories(parent, mode: mode) }
        guard mkdir(path, mode) == 0 || errno == EEXIST else { throw FileError(path: path, operation: "make directory") }
        guard chmod(path, mode) == 0 else { throw FileError(path: path, operation: "chmod") }
    }

    /// Removes the file at `path`; a missing file is not an error.
    public static func removeFile(_ path: String) throws(FileError) {
        guard unlink(path) == 0 || errno == ENOENT else { throw FileError(path: path, operation: "remove") }
    }

    /// What `lstat` says of `path` (links are not followed), or `nil` when nothing is there.
    public static func status(of path: String) throws(FileError) -> stat? {
        var status = stat()
        guard lstat(path, &status) == 0 else {
            if errno == ENOENT { return nil }
            throw FileError(path: path, operation: "stat")
        }
        return status
    }

    /// Flushes a directory's entries (a rename or a new file in it) to disk.
    public static func syncDirectory(_ directory: String) throws(FileError) {
        let opened = retryingOnInterrupt { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard opened >= 0 else { throw FileError(path: directory, operation: "open directory") }
        let folder = OwnedDescriptor(taking: opened)
        guard retryingOnInterrupt({ fsync(folder.raw) }) == 0 else { throw FileError(path: directory, operation: "fsync") }
    }

    /// The folder `path` is in (`.` for a bare name).
    public static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func writeAll(_ bytes: [UInt8], to descriptor: Int32, path: String) throws(FileError) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes.withUnsafeBytes { buffer in
                retryingOnInterrupt { write(descriptor, buffer.baseAddress! + offset, buffer.count - offset) }
            }
            guard count > 0 else { throw FileError(path: path, operation: "write") }
            offset += count
        }
    }
}

extension FileSystem {
    /// A pipe, both ends close-on-exec (and non-blocking when asked).
    public static func makePipe(nonBlocking: Bool = false) throws(FileError) -> PipeEnds {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { throw FileError(path: "pipe", operation: "create") }
        let pipe = PipeEnds(reader: OwnedDescriptor(taking: ends[0]), writer: OwnedDescriptor(taking: ends[1]))
        for end in ends {
            let flags = fcntl(end, F_GETFL)
            guard fcntl(end, F_SETFD, FD_CLOEXEC) == 0, !nonBlocking || fcntl(end, F_SETFL, flags | O_NONBLOCK) == 0 else {
                throw FileError(path: "pipe", operation: "configure")
            }
        }
        return pipe
    }
}
