import FleetDeviceState
import FleetIO
import FleetJSON

#if canImport(Glibc)
import Glibc
#endif

extension PendingReports {
    /// The queue saved at `path`; empty when there is none. A file that cannot be read is
    /// reported through `problem` and treated as empty (the reports are informational).
    public static func load(_ path: String, problem: (String) -> Void = { _ in }) -> PendingReports {
        do {
            guard let bytes = try FileSystem.readFileIfPresent(path, maximumSize: 4 << 20) else { return PendingReports() }
            return try PendingReports(json: try JSONParser.parse(bytes))
        } catch {
            problem("\(path): \(error)")
            return PendingReports()
        }
    }

    /// Saves the queue durably (removes the file when the queue is empty).
    public func save(to path: String) throws(FileError) {
        if reports.isEmpty {
            try FileSystem.removeFile(path)
        } else {
            try FileSystem.writeAtomically(Array(json.serialized().utf8), to: path, mode: 0o600)
        }
    }
}
