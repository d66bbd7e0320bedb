import FleetJSON
import FleetProtocol

/// A request left in an app's inbox (`<inboxDirectory>/<app>/`) for the agent, by the CLI, the
/// FleetSettings library, or an app in any language: a small JSON file (at most
/// ``maximumFileSize`` bytes), written to a temporary name (one starting with `.` or not ending
/// in `.json`) and renamed to its final name ending in `.json` once complete. The agent reads
/// only names ending in `.json` and not starting with `.`, so it never reads half a file. The
/// name without `.json` is the request's id, under which its outcome is recorded (see
/// ``ChangeJournal``); it must be new for each request (a name seen before is refused). Names
/// sort in the order requests were made when they start with the time, as ``submit(to:)``
/// makes them.
///
/// ```json
/// {"request": "set", "values": {"volume": 7, "kiosk.greeting": "Hello"}}
/// {"request": "ack", "revision": 42, "state": "applied", "message": "reloaded"}
/// {"request": "sync"}
/// {"request": "facts", "facts": {"version": "2.3.1", "channel": null}}
/// ```
///
/// - `set` changes settings the device may change (`x-writable`): each value must fit the
///   setting's schema; `null` removes the device's own value, so the fleet's applies again.
/// - `ack` tells the server what the app made of a revision: `applied`, `error` or
///   `unsupported`, with an optional message (at most 4096 characters).
/// - `sync` asks the agent to contact the server now for this app.
/// - `facts` sets the app's own device facts (``FleetProtocol/DeviceInfo``, `apps.<app>.<name>`):
///   names of `A-Z a-z 0-9 _ -`, string values of at most 256 characters, `null` removes one;
///   at most 32 per app. They are shown to every admin: never put a secret in one.
///
/// The agent removes a request once it has queued it durably or acted on it; one it refuses is
/// moved to `refused/` beside a `.reason` file.
public enum InboxRequest: Sendable, Hashable {
    /// Contact the server now.
    case sync
    /// Change writable settings (`null` removes the device's own value).
    case set(JSONObject)
    /// The app's outcome for a revision.
    case ack(revision: Int64, state: StatusReport.State, message: String)
    /// Set (`null`: remove) the app's own device facts.
    case facts(JSONObject)

    /// The largest request file the agent reads.
    public static let maximumFileSize = 64 << 10
    /// The most settings one `set` request may change.
    public static let maximumKeys = 256
    /// The longest setting key a `set` request may name, in characters.
    public static let maximumKeyLength = 1024

    private enum Kind: String, CaseIterable { case set, ack, sync, facts }

    /// Reads a request.
    public init(json: JSONValue) throws(DocumentError) {
        let kind = try ObjectReader(json, allowed: ["request", "values", "revision", "state", "message", "facts"]).oneOf(
            "request", Kind.self)
        switch kind {
        case .sync:
            _ = try ObjectReader(json, allowed: ["request"], unknownMember: "is not a member of a sync request")
            self = .sync
        case .set:
            let reader = try ObjectReader(json, allowed: ["request", "values"], unknownMember: "is not a member of a set request")
            let values = try reader.values("values")
            guard (1...Self.maximumKeys).contains(values.count) else {
                throw DocumentError(at: reader.location.appending("values"), "must name 1 to \(Self.maximumKeys) settings")
            }
            for key in values.keys where !(1...Self.maximumKeyLength).contains(key.unicodeScalars.count) {
                throw DocumentError(at: reader.location.appending("values"), "setting keys have 1 to \(Self.maximumKeyLength) characters")
            }
            self = .set(values)
        case .facts:
            let reader = try ObjectReader(json, allowed: ["request", "facts"], unknownMember: "is not a member of a facts request")
            let facts = try reader.values("facts")
            guard (1...DeviceInfo.maximumAppFacts).contains(facts.count) else {
                throw DocumentError(at: reader.location.appending("facts"), "must name 1 to \(DeviceInfo.maximumAppFacts) facts")
            }
            try DeviceInfo.checkAppFacts(facts, at: reader.location.appending("facts"))
            self = .facts(facts)
        case .ack:
            let reader = try ObjectReader(
                json, allowed: ["request", "revision", "state", "message"], unknownMember: "is not a member of an ack request")
            let state = try reader.oneOf("state", StatusReport.State.self)
            guard StatusReport.State.outcomes.contains(state) else {
                throw DocumentError(
                    at: JSONPointer.root.appending("state"), "an app acknowledges with \"applied\", \"error\" or \"unsupported\"")
            }
            self = .ack(
                revision: try reader.count("revision"), state: state,
                message: try reader.optionalString("message", maximumLength: StatusReport.maximumMessageLength) ?? "")
        }
    }

    /// The file form.
    public var json: JSONValue {
        switch self {
        case .sync: ["request": "sync"]
        case .set(let values): ["request": "set", "values": .object(values)]
        case .ack(let revision, let state, let message):
            ["request": "ack", "revision": .number(.integer(revision)), "state": .string(state.rawValue), "message": .string(message)]
        case .facts(let facts): ["request": "facts", "facts": .object(facts)]
        }
    }

    /// Whether `name` is a complete request file's name (not a file still being written).
    public static func isRequestName(_ name: String) -> Bool {
        !name.hasPrefix(".") && name.hasSuffix(".json") && name.utf8.count > 5
    }

    /// The id of the request in the file `name`: the name without `.json`.
    public static func id(ofFileNamed name: String) -> String {
        String(name.dropLast(5))
    }

}
