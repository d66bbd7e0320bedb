import FleetJSON
import FleetProtocol

/// One change of one place, as `fleetset admin plan` shows it: `~ /volume: 3 → 5`,
/// `+ /title: "Lobby"`, `- /greeting`.
public struct ValueChange: Sendable, Hashable {
    /// What happens at the place.
    public enum Kind: Sendable, Hashable {
        /// The place gets a value it did not have (`+`).
        case added
        /// The place's value goes (`-`).
        case removed
        /// The place's value is replaced (`~`).
        case changed
    }

    /// The place: a JSON pointer's text (`/display/brightness`).
    public var place: String
    /// What happens there.
    public var kind: Kind
    /// The value before (`nil` when added).
    public var old: JSONValue?
    /// The value after (`nil` when removed).
    public var new: JSONValue?
    /// Whether the place holds a secret: its values are never shown.
    public var isSecret: Bool

    /// Creates a change.
    public init(place: String, kind: Kind, old: JSONValue? = nil, new: JSONValue? = nil, isSecret: Bool = false) {
        self.place = place
        self.kind = kind
        self.old = old
        self.new = new
        self.isSecret = isSecret
    }

    /// The line plan prints, values as compact JSON. A secret's value is never shown: a
    /// changed one reads `~ /pin: (secret: will be set, write-only)` (the server compared it).
    public var line: String {
        let shown = { (value: JSONValue?) in value.map { $0.serialized() } ?? "" }
        switch (kind, isSecret) {
        case (.added, true): return "+ \(place): (secret)"
        case (.added, false): return "+ \(place): \(shown(new))"
        case (.removed, _): return "- \(place)"
        case (.changed, true): return "~ \(place): (secret: will be set, write-only)"
        case (.changed, false): return "~ \(place): \(shown(old)) → \(shown(new))"
        }
    }
}

/// The pure steps between a tree and what the server holds: the values each scope should hold,
/// their changes place by place, the patches of policies, and what becomes of groups and
/// metadata. No I/O: the CLI reads the server and sends what these say.
public enum TreeDiff {
    /// The changes from `old` to `new`, place by place: objects are compared member by member
    /// (recursively), anything else whole. Places in `secretPlaces` (and under them) are shown
    /// without their values. Sorted by place.
    public static func changes(from old: JSONObject, to new: JSONObject, secretPlaces: Set<String> = []) -> [ValueChange] {
        var changes: [ValueChange] = []
        collect(old: .object(old), new: .object(new), at: .root, secretPlaces: secretPlaces, into: &changes)
        return changes
    }

    private static func collect(
        old: JSONValue?, new: JSONValue?, at place: JSONPointer, secretPlaces: Set<String>, into changes: inout [ValueChange]
    ) {
        guard old != new else { return }
        let secret = secretPlaces.contains(place.description)
        if !secret, case .object(let before)? = old, case .object(let after)? = new {
            let keys = Set(before.keys).union(after.keys).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
            for key in keys {
                collect(old: before[key], new: after[key], at: place.appending(key), secretPlaces: secretPlaces, into: &changes)
            }
            return
        }
        let kind: ValueChange.Kind = old == nil ? .added : new == nil ? .removed : .changed
        changes.append(ValueChange(place: place.description, kind: kind, old: old, new: new, isSecret: secret))
    }

    /// What a scope should hold after an apply: the tree's values with `--prune`; without it, the
    /// stored values with the tree's settings laid over them (settings the tree lacks stay).
    ///
    /// Secret references: a place whose reference resolved keeps the tree's placeholder (the
    /// caller puts the secret in just before sending); one that did not resolve keeps the
    /// stored value: it is listed in `keep` when the scope stores a value there, and left out
    /// when it stores none.
    ///
    /// - Parameters:
    ///   - stored: the scope's values as the server shows them (secrets masked).
    ///   - tree: the scope's file (an empty document when it has none).
    ///   - resolved: the places of `tree`'s references that resolved.
    public static func desired(stored: JSONObject, tree: TreeDocument, prune: Bool, resolved: Set<String>) -> (
        values: JSONObject, keep: [String]
    ) {
        var values = prune ? JSONObject() : stored
        for (key, value) in tree.values { values[key] = value }
        var keep: [String] = []
        var whole = JSONValue.object(values)
        for (place, _) in tree.secrets where !resolved.contains(place) {
            guard let pointer = JSONPointer(place) else { continue }
            if JSONValue.object(stored)[pointer: pointer] != nil {
                keep.append(place)
            } else if let removed = try? whole.setting(nil, at: pointer) {
                whole = removed
            }
        }
        return (whole.objectValue ?? values, keep.sorted())
    }

    /// The merge patch that turns the policy `stored` into what the tree says: the tree's keys
    /// with their values; with `prune`, the keys it lacks as `null`.
    public static func policyPatch(stored: JSONObject, tree: JSONObject, prune: Bool) -> JSONObject {
        var patch = JSONObject()
        for (key, value) in tree where stored[key] != value { patch[key] = value }
        if prune {
            for key in stored.keys where tree[key] == nil { patch[key] = .null }
        }
        return patch
    }

    /// The `version` member of a metadata document; `nil` when it has none or is not JSON.
    public static func metadataVersion(_ bytes: [UInt8]) -> Int? {
        guard case .object(let object)? = try? JSONParser.parse(bytes), case .number(let number)? = object["version"] else { return nil }
        return number.int64Value.map { Int($0) }
    }
}

/// What `apply` does with an app's metadata document.
public enum MetadataStep: Sendable, Hashable {
    /// The tree has none, or the same document as the server.
    case unchanged
    /// Upload the tree's document: its version is greater than the stored one (`nil`: none).
    case upload(from: Int?, to: Int)
    /// Refused: the tree's version is lower than the stored one, or the same with another
    /// document; the message names the file and both versions.
    case refused(String)

    /// The step for `tree`'s document at `file` against the `stored` one (`nil`: none).
    public static func step(tree: [UInt8]?, stored: [UInt8]?, file: String) -> MetadataStep {
        guard let tree else { return .unchanged }
        guard let treeVersion = TreeDiff.metadataVersion(tree) else {
            return .refused("\(file): not a metadata document with a whole-number version")
        }
        guard let stored else { return .upload(from: nil, to: treeVersion) }
        let storedVersion = TreeDiff.metadataVersion(stored) ?? 0
        if treeVersion > storedVersion { return .upload(from: storedVersion, to: treeVersion) }
        if treeVersion < storedVersion {
            return .refused(
                "\(file): version \(treeVersion) is lower than the stored version \(storedVersion); export again, or give the document a version above \(storedVersion)"
            )
        }
        guard (try? JSONParser.parse(tree)) == (try? JSONParser.parse(stored)) else {
            return .refused(
                "\(file): the document differs from the stored one but has the same version \(treeVersion); a changed document needs a version above \(storedVersion)"
            )
        }
        return .unchanged
    }
}
