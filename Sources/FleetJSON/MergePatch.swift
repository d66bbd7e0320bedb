extension JSONValue {
    /// RFC 7396 JSON Merge Patch: `patch` applied to this value.
    ///
    /// An object patch sets each member, removing members whose patch value is `null`, and
    /// merges nested objects; any other patch replaces the value entirely.
    public func applyingMergePatch(_ patch: JSONValue) -> JSONValue {
        guard case .object(let patchObject) = patch else { return patch }
        var result = objectValue ?? JSONObject()
        for (key, value) in patchObject {
            if value == .null {
                result[key] = nil
            } else {
                result[key] = (result[key] ?? .null).applyingMergePatch(value)
            }
        }
        return .object(result)
    }
}

extension JSONValue {
    /// A merge patch that turns `old` into `new` when applied to `old`, and that is `new`
    /// itself when applied to nothing: every member of `new` (objects recursively), and `null`
    /// for each member of `old` that `new` lacks. So a whole new value can be written by merge
    /// patch without knowing whether the target holds the old one. (A `null` inside `new` is
    /// lost, as in any merge patch.)
    public static func wholeValueMergePatch(from old: JSONValue?, to new: JSONValue) -> JSONValue {
        guard case .object(let newMembers) = new, case .object(let oldMembers)? = old else { return new }
        var patch = JSONObject()
        for (key, value) in newMembers { patch[key] = wholeValueMergePatch(from: oldMembers[key], to: value) }
        for key in oldMembers.keys where newMembers[key] == nil { patch[key] = .null }
        return .object(patch)
    }
}

extension JSONValue {
    /// The smallest merge patch that turns `old` into `new`: only the members that differ,
    /// removed ones as `null`, nested objects patched in turn, anything else replaced. (Compare
    /// ``wholeValueMergePatch(from:to:)``, which writes `new` whole.)
    public static func minimalMergePatch(from old: JSONValue, to new: JSONValue) -> JSONValue {
        guard case .object(let before) = old, case .object(let after) = new else { return new }
        var patch = JSONObject()
        for (key, value) in after where before[key] != value { patch[key] = minimalMergePatch(from: before[key] ?? .null, to: value) }
        for key in before.keys where after[key] == nil { patch[key] = .null }
        return .object(patch)
    }
}
