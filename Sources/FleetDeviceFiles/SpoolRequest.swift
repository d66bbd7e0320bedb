import FleetIO
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// A request left in an app's inbox (`<spoolDirectory>/<app>/`) for the agent, by the CLI or
/// an app, in any language: a small JSON file, written to a temporary name and renamed to its
/// final name ending in `.json` once complete (the agent reads only names ending in `.json`
/// and not starting with `.`, so it never reads half a file).
///
/// ```json
/// {"request": "sync"}
/// ```
///
/// `sync` asks the agent to contact the server now for this app. The agent removes a request
/// once it has acted on it; one it refuses is moved to `refused/` beside a `.reason` file.
public enum SpoolRequest: Sendable, Hashable {
    /// Contact the server now.
    case sync

    /// The largest request file the agent reads.
    public static let maximumFileSize = 64 << 10

    /// Reads a request.
    public init(json: JSONValue) throws(WireError) {
        enum Kind: String, CaseIterable { case sync }
        let reader = try MemberReader(json, allowed: ["request"])
        switch try reader.oneOf("request", Kind.self) {
        case .sync: self = .sync
        }
    }

    /// The file form.
    public var json: JSONValue {
        switch self {
        case .sync: ["request": "sync"]
        }
    }

    /// Whether `name` is a complete request file's name (not a file still being written).
    public static func isRequestName(_ name: String) -> Bool {
        !name.hasPrefix(".") && name.hasSuffix(".json")
    }

    /// Leaves this request in `directory` (the app's inbox), atomically and durably. Returns the
    /// file's path.
    @discardableResult
    public func submit(to directory: String) throws(FileError) -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        let micros = String(spec.tv_nsec / 1000 + 1_000_000).dropFirst()
        let path = "\(directory)/\(spec.tv_sec)\(micros)-\(getpid())-\(UInt32.random(in: .min ... .max)).json"
        try FileSystem.writeAtomically(Array(json.serialized().utf8), to: path, mode: 0o644)
        return path
    }
}
