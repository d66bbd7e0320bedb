import FleetJSON
import FleetSchema

/// Operations on a settings values object that the server, the agent and the CLI share.
public enum SettingsValues {
    /// The text shown instead of a secret value.
    public static let mask: JSONValue = "********"

    /// RFC 7396 JSON Merge Patch: `patch` applied to `target`.
    ///
    /// An object patch sets each member, removing members whose patch value is `null`, and
    /// merges nested objects; any other patch replaces the target entirely.
    public static func applyingMergePatch(_ target: JSONValue, _ patch: JSONValue) -> JSONValue {
        target.applyingMergePatch(patch)
    }

    /// `values` with an RFC 7396 merge patch applied (a `null` removes the key).
    public static func merged(_ values: JSONObject, _ patch: JSONObject) -> JSONObject {
        guard case .object(let result) = applyingMergePatch(.object(values), .object(patch)) else { return [:] }
        return result
    }

    /// The top-level keys whose values differ between `old` and `new` (added, removed or
    /// changed), sorted.
    public static func changedKeys(_ old: JSONObject, _ new: JSONObject) -> [String] {
        var changed: Set<String> = []
        for (key, value) in new where old[key] != value { changed.insert(key) }
        for key in old.keys where new[key] == nil { changed.insert(key) }
        return changed.sorted()
    }

    /// The merge patch that turns `old` into `new` at the top level: changed keys with their
    /// new values, removed keys as `null`.
    public static func patch(from old: JSONObject, to new: JSONObject) -> JSONObject {
        var patch = JSONObject()
        for key in changedKeys(old, new) { patch[key] = new[key] ?? .null }
        return patch
    }
}

extension Metadata {
    /// `values` with every missing setting that has a `default` filled in, recursively through
    /// object properties (an absent object setting without a default of its own is created when
    /// its properties have defaults). Present values are never changed, and array items are not
    /// filled.
    public func applyingDefaults(to values: JSONObject) -> JSONObject {
        Self.fillDefaults(values, schema: schemaDocument) ?? values
    }

    /// The values every device starts from: the defaults alone.
    public var defaultValues: JSONObject { applyingDefaults(to: JSONObject()) }

    /// The defaults of an object schema's properties (for a new item of a list, say).
    public static func defaults(of objectSchema: JSONValue) -> JSONObject {
        fillDefaults(nil, schema: objectSchema) ?? JSONObject()
    }

    private static func fillDefaults(_ values: JSONObject?, schema: JSONValue) -> JSONObject? {
        guard case .object(let properties)? = schema["properties"] else { return values }
        var result = values ?? JSONObject()
        var filledAny = false
        for (key, property) in properties {
            switch result[key] {
            case .object(let nested)?:
                if let filled = fillDefaults(nested, schema: property) { result[key] = .object(filled) }
            case nil:
                if let value = property["default"] {
                    result[key] = value
                    filledAny = true
                } else if property["type"] == .string("object"), let created = fillDefaults(nil, schema: property), !created.isEmpty {
                    result[key] = .object(created)
                    filledAny = true
                }
            default:
                continue
            }
        }
        return values == nil && !filledAny ? nil : result
    }

    /// `values` with every secret replaced by ``SettingsValues/mask``, for logs and output: the
    /// value of each setting marked `x-secret`, and of every value deeper down that an
    /// `x-secret` subschema applies to (a list item's password). See
    /// `JSONSchema.secretLocations(in:)`.
    /// A device's key-path value (``KeyPathValues``) is masked as it would be in its place: its
    /// secret members masked, the whole of it when its place is inside a secret.
    public func masked(_ values: JSONObject) -> JSONObject {
        var settings = JSONObject()
        var keyPaths = JSONObject()
        for (name, value) in values {
            if KeyPathValues.isKeyPath(name) { keyPaths[name] = value } else { settings[name] = value }
        }
        var result = schema.maskingSecrets(in: .object(settings), with: SettingsValues.mask).objectValue ?? settings
        for (name, value) in keyPaths { result[name] = maskedKeyPathValue(value, at: name) }
        return result
    }

    /// A key-path value with its secrets masked: put in its place inside a value of the setting
    /// made for the purpose (arrays up to its index filled with nulls), masked as a whole setting
    /// would be, and read back. Masked whole when that cannot be told (an index past 1,000, a
    /// malformed path) or when its place is inside a secret.
    private func maskedKeyPathValue(_ value: JSONValue, at name: String) -> JSONValue {
        guard let path = JSONPointer(name), let key = path.tokens.first, !secretKeys.contains(key) else { return SettingsValues.mask }
        var placed = value
        for token in path.tokens.dropFirst().reversed() {
            if let index = JSONPointer.arrayIndex(token) ?? (token == "-" ? 0 : nil) {
                guard index <= 1_000 else { return SettingsValues.mask }
                placed = .array(Array(repeating: .null, count: index) + [placed])
            } else {
                placed = .object([token: placed])
            }
        }
        let masked = schema.maskingSecrets(in: .object([key: placed]), with: SettingsValues.mask)
        let location = JSONPointer(tokens: path.tokens.map { $0 == "-" ? "0" : $0 })
        return masked[pointer: location] ?? SettingsValues.mask
    }

    /// The top-level settings of `values` that are or hold a secret (see ``masked(_:)``), found
    /// in one walk.
    public func keysHoldingSecrets(in values: JSONObject) -> Set<String> {
        Set(schema.secretLocations(in: .object(values)).compactMap(\.tokens.first))
    }

    /// The text of every scalar inside a secret of `values` (strings as they are, numbers as
    /// JSON), for redacting free text such as a hook's output.
    public func secretScalars(in values: JSONObject) -> [String] {
        schema.secretScalars(in: .object(values))
    }

    /// The keys of `patch` that devices may not write (not `x-writable`), sorted; empty when
    /// the whole patch is allowed.
    ///
    /// A key-path value (``KeyPathValues``) is allowed inside a writable setting.
    public func forbiddenKeys(in patch: JSONObject) -> [String] {
        patch.keys.filter { !(KeyPathValues.setting(of: $0).map(writableKeys.contains) ?? false) }.sorted()
    }
}
