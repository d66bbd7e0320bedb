import FleetIO

#if canImport(Glibc)
import Glibc
#endif

/// A file replaced atomically that keeps its previous generation beside it.
///
/// ``write(_:mode:group:)`` first makes the previous-generation name point at the current file
/// (a hard link, atomically), then replaces the current file with temp file + `fsync` +
/// `rename` + `fsync` of the folder. Whenever a power cut strikes, the current name holds the
/// old or the new contents, and the previous name holds a complete older generation.
public struct GenerationFile: Sendable, Hashable {
    /// The current generation: `settings.json`.
    public let path: String
    /// The one before: `settings.previous.json`.
    public let previousPath: String

    public init(path: String, previousPath: String) {
        self.path = path
        self.previousPath = previousPath
    }

    /// Makes `bytes` the current generation and the current one the previous.
    public func write(_ bytes: [UInt8], mode: mode_t, group: gid_t?) throws(FileError) {
        try FileSystem.replaceWithLink(previousPath, to: path)
        try FileSystem.writeAtomically(bytes, to: path, mode: mode, group: group)
    }

    /// Puts the previous generation back as the current one (after the current was found
    /// corrupt); the previous name keeps it too.
    public func restorePrevious(mode: mode_t, group: gid_t?) throws(FileError) {
        let bytes = try FileSystem.readFile(previousPath)
        try FileSystem.writeAtomically(bytes, to: path, mode: mode, group: group)
    }

    /// The current generation's bytes, `nil` when there is none.
    public func readCurrent(maximumSize: Int = FileSystem.defaultMaximumSize) throws(FileError) -> [UInt8]? {
        try FileSystem.readFileIfPresent(path, maximumSize: maximumSize)
    }

    /// The previous generation's bytes, `nil` when there is none.
    public func readPrevious(maximumSize: Int = FileSystem.defaultMaximumSize) throws(FileError) -> [UInt8]? {
        try FileSystem.readFileIfPresent(previousPath, maximumSize: maximumSize)
    }
}
