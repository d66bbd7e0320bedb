import FleetJSON
import FleetProtocol

/// `apps/<app>/changes.json`: the device's own changes of writable settings, queued until the
/// server confirms them and the confirmed values are in `settings.json`, and the outcome of the
/// most recent ones — what `fleetset status`, `fleetset set --wait` and the FleetSettings
/// library read.
///
/// ```json
/// {"queued": [{"id": "1795428000123456-812-77", "values": {"volume": 7}, "madeAt": "2026-11-23T10:00:00Z",
///              "confirmedRevision": null}],
///  "ended": [{"id": "1795427990000000-790-12", "state": "refused", "keys": ["brightness"], "revision": null,
///             "message": "/brightness: must be <= 100 (got 140)", "supersededBy": null, "endedAt": "2026-11-23T09:59:51Z"}]}
/// ```
///
/// The queue keeps the order changes were made. A new change that sets a key of an older change
/// not yet sent takes that change over (several changes of one key coalesce to the latest; the
/// older change's other keys go with it, so values asked for together stay together); the older
/// change ends `superseded`, naming the change that carries its keys on. A change the
/// server confirmed keeps its place, with `confirmedRevision`, until a revision at least that
/// new is in `settings.json`; then it ends `applied`. The file is written durably: a change
/// survives restarts and power cuts.
public struct ChangeJournal: Sendable, Hashable {
    /// A change waiting to be sent, or sent and confirmed but not yet in `settings.json`.
    public struct Change: Sendable, Hashable {
        /// The request's id (its file name in the inbox, without `.json`).
        public var id: String
        /// The new values; `null` removes the device's own value.
        public var values: JSONObject
        /// When the agent took the request, in seconds since the epoch.
        public var madeAt: Int64
        /// The revision the server answered with, once it confirmed the change.
        public var confirmedRevision: Int64?

        /// Creates a change.
        public init(id: String, values: JSONObject, madeAt: Int64, confirmedRevision: Int64? = nil) {
            self.id = id
            self.values = values
            self.madeAt = madeAt
            self.confirmedRevision = confirmedRevision
        }
    }

    /// How a change ended.
    public struct Outcome: Sendable, Hashable {
        /// The end of a change.
        public enum State: String, Sendable, CaseIterable {
            /// The server confirmed it and `settings.json` holds the confirmed revision.
            case applied
            /// The agent or the server refused it; the message says why.
            case refused
            /// A later change took over all of its keys before it was sent.
            case superseded
        }

        public var id: String
        public var state: State
        /// The settings it changed (only names: values may be secret).
        public var keys: [String]
        /// For `applied`: the revision in `settings.json` that holds it.
        public var revision: Int64?
        /// For `refused`: why.
        public var message: String
        /// For `superseded`: the change that carries its keys on.
        public var supersededBy: String?
        /// In seconds since the epoch.
        public var endedAt: Int64

        /// Creates an outcome.
        public init(
            id: String, state: State, keys: [String], revision: Int64? = nil, message: String = "", supersededBy: String? = nil,
            endedAt: Int64
        ) {
            self.id = id
            self.state = state
            self.keys = keys
            self.revision = revision
            self.message = message
            self.supersededBy = supersededBy
            self.endedAt = endedAt
        }
    }

    /// Where a request stands.
    public enum Lookup: Sendable, Hashable {
        /// Not in the journal: still in the inbox, or too old to be remembered.
        case unknown
        case queued(Change)
        case ended(Outcome)
    }

    /// How many ended changes are remembered.
    public static let endedCapacity = 50
    /// How many changes may wait at once; past it, a new request is refused.
    public static let queueCapacity = 1000

    /// The changes not yet ended, in the order they were made.
    public private(set) var queued: [Change]
    /// The most recent outcomes, oldest first.
    public private(set) var ended: [Outcome]

    /// Creates a journal.
    public init(queued: [Change] = [], ended: [Outcome] = []) {
        self.queued = queued
        self.ended = Array(ended.suffix(Self.endedCapacity))
    }

    /// Where the request `id` stands.
    public func lookup(_ id: String) -> Lookup {
        if let change = queued.first(where: { $0.id == id }) { return .queued(change) }
        if let outcome = ended.last(where: { $0.id == id }) { return .ended(outcome) }
        return .unknown
    }

    /// The next change to send: the oldest one the server has not confirmed.
    public var nextToSend: Change? { queued.first { $0.confirmedRevision == nil } }

    /// Queues a change. An older change not yet sent that changes one of its settings (the
    /// setting itself or a key-path value inside it) is merged into it (``KeyPathValues/combining(_:_:)``:
    /// the newer value wins) and ends `superseded`: the values asked for together are sent
    /// together, so a combination the schema requires is never split. Changes that cannot be
    /// merged (an append to an array, a key path into a value the older one sets whole) are
    /// sent one after the other instead.
    public mutating func enqueue(_ change: Change, at time: Int64) {
        let settings = Self.settings(of: change.values)
        let overlapping = queued.filter { older in
            older.confirmedRevision == nil && !Self.settings(of: older.values).isDisjoint(with: settings)
        }
        var merged: JSONObject? = JSONObject()
        for older in overlapping { merged = merged.flatMap { KeyPathValues.combining($0, older.values) } }
        merged = merged.flatMap { KeyPathValues.combining($0, change.values) }
        guard let merged else {
            queued.append(change)
            return
        }
        let superseded = Set(overlapping.map(\.id))
        for older in overlapping {
            record(Outcome(id: older.id, state: .superseded, keys: older.values.keys.sorted(), supersededBy: change.id, endedAt: time))
        }
        var newest = change
        newest.values = merged
        queued = queued.filter { !superseded.contains($0.id) } + [newest]
    }

    /// The settings a change's members belong to (``KeyPathValues/setting(of:)``).
    private static func settings(of values: JSONObject) -> Set<String> {
        Set(values.keys.map { KeyPathValues.setting(of: $0) ?? $0 })
    }

    /// Records that the server confirmed the change `id` with `revision`.
    public mutating func confirm(_ id: String, revision: Int64) {
        guard let index = queued.firstIndex(where: { $0.id == id }) else { return }
        queued[index].confirmedRevision = revision
    }

    /// Ends the change `id` as refused.
    public mutating func refuse(_ id: String, message: String, at time: Int64) {
        guard let index = queued.firstIndex(where: { $0.id == id }) else { return }
        let change = queued.remove(at: index)
        record(Outcome(id: change.id, state: .refused, keys: change.values.keys.sorted(), message: message, endedAt: time))
    }

    /// Records a request refused before it was queued.
    public mutating func refuseUnqueued(id: String, keys: [String], message: String, at time: Int64) {
        record(Outcome(id: id, state: .refused, keys: keys.sorted(), message: message, endedAt: time))
    }

    /// Ends every confirmed change whose revision is at most `revision`, now in `settings.json`:
    /// `applied`, or `refused` with `refusal` when the device refused that revision. Returns the
    /// outcomes.
    @discardableResult
    public mutating func settle(upTo revision: Int64, refusal: String? = nil, at time: Int64) -> [Outcome] {
        var outcomes: [Outcome] = []
        queued.removeAll { change in
            guard let confirmed = change.confirmedRevision, confirmed <= revision else { return false }
            let outcome =
                if let refusal {
                    Outcome(
                        id: change.id, state: .refused, keys: change.values.keys.sorted(),
                        message:
                            "the server took the change in revision \(confirmed), but the device refused revision \(revision): \(refusal)",
                        endedAt: time)
                } else {
                    Outcome(id: change.id, state: .applied, keys: change.values.keys.sorted(), revision: revision, endedAt: time)
                }
            outcomes.append(outcome)
            return true
        }
        for outcome in outcomes { record(outcome) }
        return outcomes
    }

    /// The longest message kept with an outcome (longer ones are cut, ending in `…`).
    public static let maximumMessageLength = 4096

    private mutating func record(_ outcome: Outcome) {
        var outcome = outcome
        if outcome.message.unicodeScalars.count > Self.maximumMessageLength {
            outcome.message = String(String.UnicodeScalarView(outcome.message.unicodeScalars.prefix(Self.maximumMessageLength - 1))) + "…"
        }
        ended.append(outcome)
        if ended.count > Self.endedCapacity { ended.removeFirst(ended.count - Self.endedCapacity) }
    }

    // MARK: - File form

    /// Reads the file form.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["queued", "ended"])
        var queued: [Change] = []
        for (index, element) in try Self.array(reader, "queued").enumerated() {
            let location = reader.location.appending("queued").appending(index: index)
            let change = try ObjectReader(element, at: location, allowed: ["id", "values", "madeAt", "confirmedRevision"])
            queued.append(
                Change(
                    id: try change.string("id", maximumLength: 255), values: try change.values("values"),
                    madeAt: try change.timestamp("madeAt"),
                    confirmedRevision: try change.nullableCount("confirmedRevision")))
        }
        var ended: [Outcome] = []
        for (index, element) in try Self.array(reader, "ended").enumerated() {
            let location = reader.location.appending("ended").appending(index: index)
            let outcome = try ObjectReader(
                element, at: location, allowed: ["id", "state", "keys", "revision", "message", "supersededBy", "endedAt"])
            ended.append(
                Outcome(
                    id: try outcome.string("id", maximumLength: 255), state: try outcome.oneOf("state", Outcome.State.self),
                    keys: try outcome.names("keys", maximumCount: InboxRequest.maximumKeys, maximumLength: InboxRequest.maximumKeyLength)
                        ?? [],
                    revision: try outcome.nullableCount("revision"),
                    message: try outcome.optionalString("message", maximumLength: 1 << 16) ?? "",
                    supersededBy: outcome.object["supersededBy"] == .null
                        ? nil : try outcome.optionalString("supersededBy", maximumLength: 255),
                    endedAt: try outcome.timestamp("endedAt")))
        }
        self.init(queued: queued, ended: ended)
    }

    private static func array(_ reader: ObjectReader, _ key: String) throws(DocumentError) -> [JSONValue] {
        guard case .array(let list)? = reader.object[key] else { throw reader.missingOr(key, "must be an array") }
        return list
    }

    /// The file form.
    public var json: JSONValue {
        func optional(_ value: Int64?) -> JSONValue { value.map { .number(.integer($0)) } ?? .null }
        return [
            "queued": .array(
                queued.map {
                    [
                        "id": .string($0.id), "values": .object($0.values), "madeAt": .string(Timestamp.format($0.madeAt)),
                        "confirmedRevision": optional($0.confirmedRevision),
                    ]
                }),
            "ended": .array(
                ended.map {
                    [
                        "id": .string($0.id), "state": .string($0.state.rawValue), "keys": .array($0.keys.map(JSONValue.string)),
                        "revision": optional($0.revision), "message": .string($0.message),
                        "supersededBy": $0.supersededBy.map(JSONValue.string) ?? .null, "endedAt": .string(Timestamp.format($0.endedAt)),
                    ]
                }),
        ]
    }
}
