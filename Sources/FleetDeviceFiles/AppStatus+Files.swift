import FleetDeviceState
import FleetIO
import FleetJSON

#if canImport(Glibc)
import Glibc
#endif

extension AppStatus {
    /// Reads `status.json`; `nil` when there is none or it cannot be read.
    public static func load(_ path: String) -> AppStatus? {
        guard let bytes = try? FileSystem.readFile(path, maximumSize: 1 << 20), let json = try? JSONParser.parse(bytes) else { return nil }
        return try? AppStatus(json: json)
    }

    /// Writes `status.json` atomically for readers, without `fsync` (see
    /// ``FileSystem/writeAtomically(_:to:mode:group:durable:unreadableDirectory:)``): a power cut
    /// may bring back an older status, after which the agent repeats the hook and the report.
    ///
    /// The file is 0640 with the app's readers `group`, like the settings: `lastError` can carry
    /// a hook's output (redacted, but still the app's business), so other local users do not
    /// read it.
    public func write(to path: String, group: gid_t?) throws(FileError) {
        try FileSystem.writeAtomically(Array((json.serialized(.pretty) + "\n").utf8), to: path, mode: 0o640, group: group, durable: false)
    }
}
