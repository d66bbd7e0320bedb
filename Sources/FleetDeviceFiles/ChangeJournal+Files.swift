import FleetDeviceState
import FleetIO
import FleetJSON

#if canImport(Glibc)
import Glibc
#endif

extension ChangeJournal {
    /// The journal saved at `path`; empty when there is none.
    ///
    /// - Throws: when the file is there but cannot be read: the agent must not start over with
    ///   an empty queue and lose changes (it keeps the file and retries).
    public static func load(_ path: String) throws -> ChangeJournal {
        guard let bytes = try FileSystem.readFileIfPresent(path, maximumSize: 16 << 20) else { return ChangeJournal() }
        return try ChangeJournal(json: try JSONParser.parse(bytes))
    }

    /// Saves the journal durably, readable by `group` (mode 0640): the values are those of
    /// writable settings, which the same readers see in `settings.json`.
    public func save(to path: String, group: gid_t?) throws(FileError) {
        try FileSystem.writeAtomically(Array((json.serialized(.pretty) + "\n").utf8), to: path, mode: 0o640, group: group)
    }
}
