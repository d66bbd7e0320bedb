/// A device's own values at a key path: what a device stores when it changes one value inside a
/// setting, so that the rest of the setting keeps following the fleet.
///
/// A device scope's values hold whole settings by name (`"volume": 7`) and, beside them,
/// *key-path values*: members named by the JSON Pointer of one place inside a setting
/// (`"/playlist/0/content": "news.mp4"`). No setting's name begins with `/` (fleetset's metadata
/// refuses one), so the two never mix. Effective settings lay a scope's key-path values over the value
/// the setting has once that scope's whole values are laid ( ``overlay(_:onto:)``): a later
/// change of the app's value of `playlist` (a rotated password inside it, a new item) reaches
/// the device, which keeps only its own `content`.
///
/// What is stored as a key-path value and what as a whole setting (``applying(_:to:inherited:)``):
///
/// - a value at a place that exists in the setting, or a new member of an object, is a key-path
///   value;
/// - a change of an array's length (appending with `-` or the next index) makes the device hold
///   the whole setting as it has it then, with the change: which element is which would not
///   survive the fleet's own changes of the array;
/// - inside a setting the device holds whole (or a place under one of its key-path values), the
///   change goes into that value;
/// - `null` at a key path is "the fleet's value again": the device's key-path values there and
///   below go, and inside a value it holds whole, the place takes the value the device would
///   get without it (or goes, when there is none).
public enum KeyPathValues {
    /// The most parts a key path may have (the setting's name and 31 below it): a deeper one is
    /// refused when written and left out when stored, so no value grows past what the JSON
    /// parsers on both sides read (and no write costs more than a bounded walk).
    public static let maximumDepth = 32

    /// Whether `name`, a member of a scope's values, is a key-path value (`/playlist/0/content`)
    /// rather than a setting.
    public static func isKeyPath(_ name: String) -> Bool { name.hasPrefix("/") }

    /// The setting a member of a scope's values belongs to: the setting itself, or the first part
    /// of a key-path value's path (`nil` for a malformed path).
    public static func setting(of name: String) -> String? {
        isKeyPath(name) ? JSONPointer(name)?.tokens.first : name
    }

    /// A member of a change as people write it: the setting's name, or a key path
    /// (`playlist/0/content`).
    public static func shownName(_ name: String) -> String {
        isKeyPath(name) ? JSONPointer(name)?.keyPath ?? name : name
    }

    /// What `values` (whole settings) hold where the member `name` of a change goes: the
    /// setting, or the place a key-path value names (`nil` when nothing is there).
    public static func value(at name: String, in values: JSONObject) -> JSONValue? {
        guard isKeyPath(name) else { return values[name] }
        return JSONPointer(name).flatMap { JSONValue.object(values)[pointer: $0] }
    }

    /// Lays the key-path values of a scope's `layer` over `values` (the values once that
    /// scope's whole settings are laid), shallower paths first. A path that no longer fits
    /// (the fleet's array is shorter now; a place that holds text) is left out.
    ///
    /// - Returns: for each key-path value left out, why.
    @discardableResult
    public static func overlay(_ layer: JSONObject, onto values: inout JSONObject) -> [String: KeyPathError] {
        var unapplied: [String: KeyPathError] = [:]
        for (name, path) in paths(in: layer) {
            guard let value = layer[name], let key = path.tokens.first else { continue }
            guard path.tokens.count <= maximumDepth else {
                unapplied[name] = KeyPathError(at: path, .mismatch, "has more than \(maximumDepth) parts")
                continue
            }
            guard let base = values[key] else {
                unapplied[name] = KeyPathError(at: JSONPointer(tokens: [key]), .missing, "the setting has no value to change inside")
                continue
            }
            if let missing = missingElement(base, path.inside) {
                unapplied[name] = KeyPathError(
                    at: JSONPointer(tokens: [key] + missing.location.tokens), .missing, "there is no element \(missing.index) now")
                continue
            }
            do throws(KeyPathError) {
                values[key] = try base.setting(value, at: path.inside)
            } catch {
                unapplied[name] = error.under([key])
            }
        }
        return unapplied
    }

    /// A device's change (a merge patch of settings that may hold key-path values) applied to
    /// the values its scope holds, by the rules above. Whole settings go first (as a merge patch;
    /// the key-path values under them go), then key-path values, shallower paths first.
    ///
    /// - Parameters:
    ///   - inherited: the values the device gets from every wider scope (the metadata's
    ///     defaults included); `nil` when not known (two changes combined on the device), where a
    ///     change that needs it throws ``Uncombinable``.
    /// - Throws: ``KeyPathError`` for a path that is malformed or does not fit the value it
    ///   goes into (naming the place, from the setting on).
    public static func applying(_ change: JSONObject, to layer: JSONObject, inherited: JSONObject?) throws -> JSONObject {
        var result = layer
        var whole = JSONObject()
        for (name, value) in change where !isKeyPath(name) { whole[name] = value }
        var replaced = JSONObject()
        for (name, value) in change where isKeyPath(name) {
            guard let path = JSONPointer(name), !path.tokens.isEmpty else {
                throw KeyPathError(at: .root, .mismatch, "\(name) is not a JSON pointer (~1 for a / in a name, ~0 for a ~)")
            }
            guard path.tokens.count <= maximumDepth else {
                throw KeyPathError(
                    at: JSONPointer(tokens: Array(path.tokens.prefix(maximumDepth))), .mismatch,
                    "a key path has at most \(maximumDepth) parts")
            }
            if path.tokens.count == 1 { replaced[path.tokens[0]] = value }
        }
        for key in whole.keys + replaced.keys { removePaths(under: JSONPointer(tokens: [key]), orAt: true, from: &result) }
        result = JSONValue.object(result).applyingMergePatch(.object(whole)).objectValue ?? [:]
        for (key, value) in replaced { result[key] = value == .null ? nil : value }
        for (name, path) in paths(in: change) where path.tokens.count > 1 {
            guard let value = change[name] else { continue }
            try apply(value, at: path, named: name, to: &result, inherited: inherited)
        }
        return result
    }

    /// The change that turns a setting's value `old` (what the device has) into `new`, as
    /// key-path values of only the places that differ: objects that keep their members and arrays
    /// of the same length are compared member by member (an added member is a place of its
    /// own), element by element; an object that lost a member or an array whose length differs
    /// is replaced whole there (at the setting itself, as `/key`, which
    /// replaces rather than merges). `new` absent gives the fleet's value again (`key: null`).
    public static func changes(from old: JSONValue?, to new: JSONValue?, setting key: String) -> JSONObject {
        var changes = JSONObject()
        guard let new else {
            if old != nil { changes[key] = .null }
            return changes
        }
        func compare(_ old: JSONValue?, _ new: JSONValue, at path: JSONPointer) {
            guard old != new else { return }
            switch (old, new) {
            case (.object(let before)?, .object(let after))
            where before.keys.allSatisfy { after[$0] != nil } && path.tokens.count < maximumDepth:
                // Members changed or added, each at its own path (a removed one: the object whole).
                for (member, value) in after { compare(before[member], value, at: path.appending(member)) }
            case (.array(let before)?, .array(let after)) where before.count == after.count && path.tokens.count < maximumDepth:
                for (index, value) in after.enumerated() { compare(before[index], value, at: path.appending(String(index))) }
            default:
                switch new {
                case .object, .array: changes[path.description] = new
                default: changes[path.tokens.count == 1 ? key : path.description] = new
                }
            }
        }
        compare(old, new, at: JSONPointer(tokens: [key]))
        return changes
    }

    /// Two changes of the device's values, `older` then `newer`, as one change with the same
    /// effect on the server: a setting `newer` sets replaces `older`'s value of it and its
    /// key-path values; a key-path value goes into a value `older` sets that holds its place.
    /// `nil` when they must go one after the other: an append (`-`), a `null` inside a value
    /// `older` sets (the fleet's value there is the server's to know), a path that does not fit.
    public static func combining(_ older: JSONObject, _ newer: JSONObject) -> JSONObject? {
        var result = older
        for (name, value) in newer where !isKeyPath(name) {
            removePaths(under: JSONPointer(tokens: [name]), orAt: true, from: &result)
            result[name] = value
        }
        for (name, path) in paths(in: newer) {
            guard let value = newer[name], path.tokens.count > 1, !path.tokens.contains("-") else { return nil }
            removePaths(under: path, orAt: true, from: &result)
            if let owner = owner(of: path, in: result), let held = result[owner.name], held != .null {
                let relative = JSONPointer(tokens: Array(path.tokens.dropFirst(owner.path.tokens.count)))
                guard value != .null, let new = try? held.setting(value, at: relative) else { return nil }
                result[owner.name] = new
            } else {
                result[name] = value
            }
        }
        return result
    }

    /// Thrown by ``applying(_:to:inherited:)`` without the inherited values, for a change that
    /// needs them: the two changes are sent one after the other instead.
    public struct Uncombinable: Error, Sendable {}

    /// The setting's value or key-path value of `layer` that holds the place `path` (a proper
    /// ancestor of it), with its own path.
    private static func owner(of path: JSONPointer, in layer: JSONObject) -> (name: String, path: JSONPointer)? {
        if let key = path.tokens.first, layer[key] != nil { return (key, JSONPointer(tokens: [key])) }
        for count in stride(from: path.tokens.count - 1, through: 2, by: -1) {
            let ancestor = JSONPointer(tokens: Array(path.tokens.prefix(count)))
            if layer[ancestor.description] != nil { return (ancestor.description, ancestor) }
        }
        return nil
    }

    private static func apply(
        _ value: JSONValue, at path: JSONPointer, named name: String, to layer: inout JSONObject, inherited: JSONObject?
    ) throws {
        removePaths(under: path, orAt: true, from: &layer)
        if let owner = owner(of: path, in: layer), let held = layer[owner.name] {
            let relative = JSONPointer(tokens: Array(path.tokens.dropFirst(owner.path.tokens.count)))
            var new: JSONValue?
            if value != .null {
                new = value
            } else {
                guard let inherited else { throw Uncombinable() }
                new = JSONValue.object(inherited)[pointer: path]
            }
            do throws(KeyPathError) {
                layer[owner.name] = try held.setting(new, at: relative)
            } catch let error where new == nil && error.kind == .missing {
                // The fleet has nothing there either: nothing to remove.
            } catch {
                throw error.under(owner.path.tokens)
            }
            return
        }
        guard value != .null else { return }  // the device's values there are gone: the fleet's apply
        guard let inherited else {
            if path.tokens.contains("-") { throw Uncombinable() }
            layer[name] = value
            return
        }
        // What the device has now: the fleet's value with the device's other key-path values.
        var current = inherited
        overlay(layer, onto: &current)
        guard let key = path.tokens.first else { return }
        if let base = current[key], missingElement(base, path.inside) == nil {
            // Checked here so that a path that does not fit is refused now, not left out later.
            do throws(KeyPathError) {
                _ = try base.setting(value, at: path.inside)
            } catch {
                throw error.under([key])
            }
            layer[name] = value
        } else {
            // A change of an array's length, or of a setting that has no value yet: the device
            // holds the whole setting as it has it now, with the change.
            do throws(KeyPathError) {
                layer[key] = try (current[key] ?? .object([:])).setting(value, at: path.inside)
            } catch {
                throw error.under([key])
            }
            removePaths(under: JSONPointer(tokens: [key]), orAt: false, from: &layer)
        }
    }

    /// The first array index on `path` inside `value` that names no element (an append with `-`
    /// or the length counts as none), with where it is: a stored key-path value replaces what
    /// is there, and never appends to the fleet's array.
    private static func missingElement(_ value: JSONValue, _ path: JSONPointer) -> (location: JSONPointer, index: String)? {
        var current: JSONValue? = value
        var done: [String] = []
        for token in path.tokens {
            switch current {
            case .array(let elements)?:
                guard let index = JSONPointer.arrayIndex(token), index < elements.count else {
                    return (JSONPointer(tokens: done + [token]), token)
                }
                current = elements[index]
            case .object(let members)?:
                current = members[token]
            default:
                return nil  // objects made on the way, or a place that does not fit (the setting says why)
            }
            done.append(token)
        }
        return nil
    }

    /// Removes the key-path values at `path` (when `orAt`) and below it.
    private static func removePaths(under path: JSONPointer, orAt: Bool, from layer: inout JSONObject) {
        for name in layer.keys where isKeyPath(name) {
            guard let other = JSONPointer(name), other.tokens.starts(with: path.tokens) else { continue }
            if orAt || other.tokens.count > path.tokens.count { layer[name] = nil }
        }
    }

    /// The key-path values of `object` with their paths, shallower paths first (then by text).
    private static func paths(in object: JSONObject) -> [(name: String, path: JSONPointer)] {
        object.keys.filter(isKeyPath).compactMap { name in JSONPointer(name).map { (name, $0) } }
            .filter { !$0.path.tokens.isEmpty }
            .sorted { precedes($0.path, $1.path) }
    }

    /// Shallower paths first; at one depth, part by part, array indices by number (9 before 10)
    /// and an append (`-`) after every index, other names by text.
    private static func precedes(_ lhs: JSONPointer, _ rhs: JSONPointer) -> Bool {
        if lhs.tokens.count != rhs.tokens.count { return lhs.tokens.count < rhs.tokens.count }
        for (left, right) in zip(lhs.tokens, rhs.tokens) where left != right {
            switch (JSONPointer.arrayIndex(left), JSONPointer.arrayIndex(right)) {
            case (let l?, let r?): return l < r
            case (_?, nil) where right == "-": return true
            case (nil, _?) where left == "-": return false
            default: return left < right
            }
        }
        return false
    }
}

extension KeyPathError {
    /// The error with its location inside the value at `prefix` (from the setting on).
    func under(_ prefix: [String]) -> KeyPathError {
        KeyPathError(at: JSONPointer(tokens: prefix + location.tokens), kind, message)
    }
}

extension JSONPointer {
    /// The path inside the setting: every part after the first.
    var inside: JSONPointer { JSONPointer(tokens: Array(tokens.dropFirst())) }
}
