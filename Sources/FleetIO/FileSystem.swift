#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Why a file could not be read or listed: the path, the failing call and the system's reason.
public struct FileError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file or directory.
    public let path: String
    /// What was being done: `open`, `read`, `opendir`, `stat`.
    public let operation: String
    /// The `errno` value.
    public let code: Int32

    /// Creates an error from the current `errno`.
    public init(path: String, operation: String, code: Int32 = errno) {
        self.path = path
        self.operation = operation
        self.code = code
    }

    /// `cannot read /etc/x.json: No such file or directory`.
    public var description: String {
        let reason = String(cString: strerror(code))
        return "cannot \(operation) \(path): \(reason)"
    }
}

/// Small, synchronous file-system helpers over POSIX calls (no Foundation).
public enum FileSystem {
    /// Files larger than this are refused by ``readFile(_:maximumSize:)`` unless a limit is
    /// given: documents fleetset reads are small, and a runaway file must not exhaust memory.
    public static let defaultMaximumSize = 64 << 20

    /// The whole contents of the regular file at `path`.
    public static func readFile(_ path: String, maximumSize: Int = defaultMaximumSize) throws(FileError) -> [UInt8] {
        let descriptor = retryingOnInterrupt { open(path, O_RDONLY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw FileError(path: path, operation: "open") }
        defer { close(descriptor) }
        var status = stat()
        guard fstat(descriptor, &status) == 0 else { throw FileError(path: path, operation: "stat") }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw FileError(path: path, operation: "read", code: EISDIR) }
        guard Int(status.st_size) <= maximumSize else { throw FileError(path: path, operation: "read", code: EFBIG) }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(Int(status.st_size))
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

    /// The regular files under `directory`, recursively, as paths relative to it, sorted.
    /// Symbolic links and hidden entries (names starting with `.`) are skipped.
    public static func regularFiles(under directory: String) throws(FileError) -> [String] {
        var found: [String] = []
        try collectFiles(in: directory, relative: "", into: &found)
        return found.sorted()
    }

    private static func collectFiles(in directory: String, relative: String, into found: inout [String]) throws(FileError) {
        guard let stream = opendir(directory) else { throw FileError(path: directory, operation: "open directory") }
        defer { closedir(stream) }
        while let entry = readdir(stream) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
            }
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

    /// Runs a system call again while it fails with `EINTR`.
    @inline(__always)
    static func retryingOnInterrupt<Result: BinaryInteger>(_ call: () -> Result) -> Result {
        while true {
            let result = call()
            if result >= 0 || errno != EINTR { return result }
        }
    }
}

extension FileSystem {
    /// Replaces the file at `path` with `bytes` so that a reader (or a power cut) only ever sees
    /// the old contents or the new, never a mix: write a temporary file beside it, `fsync` it,
    /// `rename` it over the target, then `fsync` the directory so the rename itself is durable.
    ///
    /// The file gets exactly `mode` (the process umask does not apply), so a file holding a
    /// secret is created `0600` from its first byte. On failure the temporary file is removed
    /// and the old file is untouched.
    public static func writeAtomically(_ bytes: [UInt8], to path: String, mode: mode_t = 0o644) throws(FileError) {
        let directory = parentDirectory(of: path)
        let temporary = "\(path).tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
        let descriptor = retryingOnInterrupt { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode) }
        guard descriptor >= 0 else { throw FileError(path: temporary, operation: "create") }
        var written = false
        defer { if !written { unlink(temporary) } }
        do {
            defer { close(descriptor) }
            guard fchmod(descriptor, mode) == 0 else { throw FileError(path: temporary, operation: "chmod") }
            try writeAll(bytes, to: descriptor, path: temporary)
            guard retryingOnInterrupt({ fsync(descriptor) }) == 0 else { throw FileError(path: temporary, operation: "fsync") }
        }
        guard rename(temporary, path) == 0 else { throw FileError(path: path, operation: "replace") }
        written = true
        try syncDirectory(directory)
    }

    /// Flushes a directory's entries (a rename or a new file in it) to disk.
    public static func syncDirectory(_ directory: String) throws(FileError) {
        let descriptor = retryingOnInterrupt { open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC) }
        guard descriptor >= 0 else { throw FileError(path: directory, operation: "open directory") }
        defer { close(descriptor) }
        guard retryingOnInterrupt({ fsync(descriptor) }) == 0 else { throw FileError(path: directory, operation: "fsync") }
    }

    /// The folder `path` is in (`.` for a bare name).
    static func parentDirectory(of path: String) -> String {
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
