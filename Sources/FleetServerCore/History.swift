import FleetJSON
import FleetMetadata
import FleetProtocol

/// What one write did to an app, as its history keeps it: who, when, why, and for each scope
/// the merge patch and the values after it. Written by the store in the same transaction as the
/// write itself, so history and values never disagree.
public struct ChangeRecord: Sendable, Hashable {
    /// What kind of write.
    public enum Kind: String, Sendable, CaseIterable {
        /// An admin's or a device's merge patch of values.
        case values
        /// A metadata upload.
        case metadata
        /// Values made as they were after an earlier revision.
        case revert
        /// A staged rollout started, moved on, paused, resumed, completed or was aborted.
        case rollout
        /// Values stored before the history began (written by the store's migration).
        case initial
    }

    /// One scope's part in a write.
    public struct ScopeChange: Sendable, Hashable {
        public var scope: Scope
        public var patch: JSONObject
        /// The scope's values after the write (what a revert restores).
        public var after: JSONObject
        /// ``patch`` and ``after`` with the secrets of the metadata in force at the write
        /// masked, for showing: a setting that was secret then stays masked in the history even
        /// if a later metadata version stops marking it (the current version's secrets are
        /// masked too). `nil` for entries written without metadata at hand.
        public var shown: (patch: JSONObject, after: JSONObject)?

        public init(scope: Scope, patch: JSONObject, after: JSONObject) {
            self.scope = scope
            self.patch = patch
            self.after = after
        }

        /// A change whose shown form masks the secrets `metadata` marks.
        public init(scope: Scope, patch: JSONObject, after: JSONObject, masking metadata: Metadata) {
            self.init(scope: scope, patch: patch, after: after)
            shown = (metadata.masked(patch), metadata.masked(after))
        }

        /// The patch and values to show under `metadata` (the current version).
        public func masked(by metadata: Metadata) -> (patch: JSONObject, after: JSONObject) {
            (metadata.masked(shown?.patch ?? patch), metadata.masked(shown?.after ?? after))
        }

        public static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.scope == rhs.scope && lhs.patch == rhs.patch && lhs.after == rhs.after && lhs.shown?.patch == rhs.shown?.patch
                && lhs.shown?.after == rhs.shown?.after
        }

        public func hash(into hasher: inout Hasher) {
            hasher.combine(scope)
            hasher.combine(patch)
            hasher.combine(after)
        }
    }

    public var at: Int64
    public var actor: String
    public var message: String
    public var kind: Kind
    public var scopes: [ScopeChange]
    public var metadataVersion: Int?

    public init(at: Int64, actor: String, message: String = "", kind: Kind, scopes: [ScopeChange] = [], metadataVersion: Int? = nil) {
        self.at = at
        self.actor = actor
        self.message = message
        self.kind = kind
        self.scopes = scopes
        self.metadataVersion = metadataVersion
    }

    /// The scopes as the stores keep them: a JSON array of `{"scope","patch","after"}`.
    public var scopesText: String {
        JSONValue.array(
            scopes.map { change in
                var object: JSONObject = [
                    "scope": .string(change.scope.description), "patch": .object(change.patch), "after": .object(change.after),
                ]
                if let shown = change.shown {
                    object["shownPatch"] = .object(shown.patch)
                    object["shownAfter"] = .object(shown.after)
                }
                return .object(object)
            }
        ).serialized()
    }

    /// The scopes in `text` (see ``scopesText``).
    ///
    /// - Throws: ``StoreCorruption`` naming `what`.
    public static func scopes(_ text: String, what: String) throws -> [ScopeChange] {
        guard case .array(let elements)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        return try elements.map { element in
            guard case .object(let object) = element, case .string(let scopeText)? = object["scope"],
                let scope = Scope(parameter: scopeText),
                case .object(let patch)? = object["patch"], case .object(let after)? = object["after"]
            else { throw StoreCorruption(what: what) }
            var change = ScopeChange(scope: scope, patch: patch, after: after)
            if case .object(let shownPatch)? = object["shownPatch"], case .object(let shownAfter)? = object["shownAfter"] {
                change.shown = (shownPatch, shownAfter)
            }
            return change
        }
    }
}

/// A ``ChangeRecord`` with the revision of the app it made.
public struct HistoryEntry: Sendable, Hashable {
    public var app: String
    /// 1, 2, 3, … per app.
    public var number: Int64
    public var change: ChangeRecord

    public init(app: String, number: Int64, change: ChangeRecord) {
        self.app = app
        self.number = number
        self.change = change
    }
}

/// One write of an app's values: the new values of each scope it changes (an empty object
/// removes the scope's row), the rollout it creates or moves on (if any), and its history
/// entry — all in one transaction (``SettingsStore/commit(_:)``).
public struct AppWrite: Sendable, Hashable {
    public var app: String
    public var values: [Scope: JSONObject]
    /// The rollout as it is after the write. A new one (``Rollout/version`` 1) is inserted and
    /// must be the app's only active rollout; a known one is replaced when the stored one has
    /// the version before it.
    public var rollout: Rollout?
    public var change: ChangeRecord

    public init(app: String, values: [Scope: JSONObject] = [:], rollout: Rollout? = nil, change: ChangeRecord) {
        self.app = app
        self.values = values
        self.rollout = rollout
        self.change = change
    }

    /// What other instances must hear of it: each scope written, and the app scope for a rollout
    /// (what the app's devices are served depends on it).
    public var touchedScopes: [Scope] {
        var scopes = values.keys.sorted { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }
        if rollout != nil, !scopes.contains(.app) { scopes.append(.app) }
        return scopes
    }
}

/// ``SettingsStore/commit(_:)`` found the rollout changed by another writer (or another active
/// rollout of the app): nothing was written.
public struct RolloutConflict: Error, Sendable, CustomStringConvertible {
    public let app: String

    public init(app: String) { self.app = app }

    public var description: String { "the rollout of \(app) was changed by another writer; read it again" }
}

/// What an app's history says about its values.
public enum AppHistory {
    /// The values as they were after history entry `number`: for each scope, the values after
    /// the last entry at or before `number` that wrote it; a scope no such entry wrote was empty.
    ///
    /// - Parameter entries: the app's history, oldest first.
    public static func values(after number: Int64, in entries: [HistoryEntry]) -> [Scope: JSONObject] {
        var values: [Scope: JSONObject] = [:]
        for entry in entries where entry.number <= number {
            for change in entry.change.scopes { values[change.scope] = change.after }
        }
        return values.filter { !$0.value.isEmpty }
    }
}

/// Which part of an app's history a reader wants: the newest ``limit`` entries numbered below
/// ``before``, of one ``scope`` only when it is given. Stores answer it with an indexed query,
/// so a page costs the same whatever the history's length.
public struct HistoryPage: Sendable, Hashable {
    /// Only the entries that wrote this scope (each still whole: the caller trims it).
    public var scope: Scope?
    /// Only the entries numbered below this (`nil`: up to the newest).
    public var before: Int64?
    /// At most this many, the newest (`nil`: all).
    public var limit: Int?

    public init(scope: Scope? = nil, before: Int64? = nil, limit: Int? = nil) {
        self.scope = scope
        self.before = before
        self.limit = limit
    }

    /// The whole history.
    public static let all = HistoryPage()
}

/// What a revert to entry ``number`` reads of the history, and nothing more: for each scope the
/// newest entry at or before it that wrote the scope.
public struct HistoryBase: Sendable, Hashable {
    /// The entry reverted to.
    public var number: Int64
    /// Whether the history keeps entry ``number``.
    public var isKept: Bool
    /// The app's newest entry (0: none).
    public var newest: Int64
    /// The oldest entry a revert can go back to: entries before it may have been removed by the
    /// retention (``HistoryRetention``), so the values after them cannot be rebuilt. 1 when
    /// nothing was ever removed.
    public var floor: Int64
    /// For each scope, the newest entry at or before ``number`` that wrote it, oldest first.
    public var entries: [HistoryEntry]

    public init(number: Int64, isKept: Bool, newest: Int64, floor: Int64, entries: [HistoryEntry]) {
        self.number = number
        self.isKept = isKept
        self.newest = newest
        self.floor = floor
        self.entries = entries
    }

    /// The values of every scope after entry ``number`` (see ``AppHistory/values(after:in:)``).
    public var values: [Scope: JSONObject] { AppHistory.values(after: number, in: entries) }
}

/// How much of each app's history the server keeps (`fleetset-server serve --history-keep`).
///
/// An entry goes when it is older than ``maximumAge`` or not among the app's newest
/// ``maximumCount`` (either limit removes it), except: the app's newest entry (its number is
/// never used again), and for each scope the newest entry at or before the cut, so that the
/// values after every entry from the cut on can still be rebuilt and reverted to (the cut
/// becomes the app's ``HistoryBase/floor``). The scopes of deleted devices keep nothing beyond
/// the limits.
public struct HistoryRetention: Sendable, Hashable {
    /// Seconds; `nil`: no age limit.
    public var maximumAge: Int64?
    /// Entries per app; `nil`: no count limit.
    public var maximumCount: Int?

    public init(maximumAge: Int64? = nil, maximumCount: Int? = nil) {
        self.maximumAge = maximumAge
        self.maximumCount = maximumCount.map { max(1, $0) }
    }

    /// Keeps everything.
    public static let everything = HistoryRetention()

    /// The default: the newest 100,000 entries of each app, whatever their age. A fleet whose
    /// admins and devices write a few times a day never reaches it; a device that writes
    /// without end (a stolen token, at the write rate limit) fills it in under a week and no
    /// more.
    public static let standard = HistoryRetention(maximumCount: 100_000)

    /// Reads `90d`, `100000`, or both as `90d,100000` (`keep-all`: no limit).
    public init?(_ text: String) {
        if text == "keep-all" {
            self = .everything
            return
        }
        var age: Int64?
        var count: Int?
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            if part.hasSuffix("d"), let days = Int64(part.dropLast()), days >= 1, days <= 100_000, age == nil {
                age = days * 86_400
            } else if let number = Int(part), number >= 1, count == nil {
                count = number
            } else {
                return nil
            }
        }
        guard age != nil || count != nil else { return nil }
        self.init(maximumAge: age, maximumCount: count)
    }

    /// How many entries one pass removes at most (one transaction each): the first pass over a
    /// long history (after an upgrade) must not hold the database for minutes.
    public static let batch: Int64 = 10_000

    /// The cut for an app whose newest entry is `newest`, given the newest entry written before
    /// `now - maximumAge` (`oldEnough`), and where the last pass left the floor: entries at or
    /// before it go (bar the exceptions above). At most ``batch`` past `floor`; `finished`
    /// says whether that reached the whole cut. `nil`: nothing to remove.
    public func cut(newest: Int64, newestOlderThanAge oldEnough: Int64?, floor: Int64 = 0) -> (cut: Int64, finished: Bool)? {
        var cut: Int64 = 0
        if let maximumCount { cut = max(cut, newest - Int64(maximumCount)) }
        if maximumAge != nil, let oldEnough { cut = max(cut, oldEnough) }
        cut = min(cut, newest - 1)  // the newest entry always stays
        guard cut >= 1, cut > floor else { return nil }
        let step = min(cut, floor + Self.batch)
        return (step, step == cut)
    }
}

/// What one pass of ``SettingsStore/pruneHistory(app:keeping:now:)`` did.
public struct HistoryPruning: Sendable, Hashable {
    /// The entries removed.
    public var removed: Int
    /// Whether the retention is met; `false`: a pass stopped at ``HistoryRetention/batch`` and
    /// another is due.
    public var finished: Bool

    public init(removed: Int, finished: Bool) {
        self.removed = removed
        self.finished = finished
    }
}
