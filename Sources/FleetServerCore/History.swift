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
