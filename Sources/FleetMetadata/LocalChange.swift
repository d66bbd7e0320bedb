import FleetJSON
import FleetSchema

/// Why a device-side change of settings cannot be made, for a person: `/brightness: must be <= 100
/// (got 140)`. Values of `x-secret` settings are never quoted.
public struct ChangeProblem: Sendable, Hashable, CustomStringConvertible {
    /// The setting (or a place inside it).
    public let location: JSONPointer
    /// What is wrong.
    public let message: String

    /// Creates a problem.
    public init(_ location: JSONPointer, _ message: String) {
        self.location = location
        self.message = message
    }

    public var description: String { "\(location.displayText): \(message)" }
}

extension Metadata {
    /// The problems of changing `current` by `change` (a merge patch of top-level settings) on
    /// the device: every key must be a setting and `x-writable`, and every new value must fit the
    /// schema together with the other settings. Only problems the change itself causes count, so
    /// a value an earlier forced metadata upload made invalid does not block other changes. A
    /// `null` (remove the device's own value) is checked by the server, which knows the value
    /// that applies then. Empty when the change may be sent.
    public func problems(ofChange change: JSONObject, to current: JSONObject) -> [ChangeProblem] {
        var problems: [ChangeProblem] = []
        let known = Set(settingKeys)
        for key in change.keys.sorted() {
            let location = JSONPointer.root.appending(key)
            if !known.contains(key) {
                problems.append(ChangeProblem(location, "is not a setting of \(app) (schema version \(version))"))
            } else if !writableKeys.contains(key) {
                problems.append(ChangeProblem(location, "is not x-writable: only the fleet's administrators may change it"))
            }
        }
        guard problems.isEmpty else { return problems }
        let checked = Set(change.keys.filter { change[$0] != .null })
        guard !checked.isEmpty else { return [] }
        let before = Set(validate(values: .object(current)).map(\.description))
        let after = SettingsValues.mergePatch(.object(current), .object(change))
        for error in validate(values: after) where !before.contains(error.description) {
            guard let first = error.instanceLocation.tokens.first, checked.contains(first) else { continue }
            problems.append(ChangeProblem(error.instanceLocation, error.message))
        }
        return problems
    }

    /// The JSON value a person means by `text` for the setting `key`: ``readValue(_:at:)`` at
    /// the setting itself.
    public func parseValue(_ text: String, forKey key: String) throws(ChangeProblem) -> JSONValue {
        try readValue(text, at: JSONPointer.root.appending(key))
    }

    /// The JSON value a person means by `text` (the VALUE of `KEY=VALUE`, on the device and in
    /// the admin CLI alike) for the value at `location`: a setting, or a place inside one by key
    /// path. It is read by the schema of that place:
    ///
    /// - text in JSON string quotes (`"7"`, `"true"`, `"[1]"`) is always that string: the escape
    ///   for a string that looks like another type;
    /// - `null` is null where the schema allows null;
    /// - otherwise each type the schema allows is tried, every other type before `string`:
    ///   `7` is an integer for an integer setting and the text "7" for a string one (an enum of
    ///   strings included); `true`/`false` (also `yes`/`no`, `on`/`off`) for a boolean; JSON for
    ///   numbers, arrays and objects; any text for a string. With an `enum` or `const`, a
    ///   reading among its values wins;
    /// - a place with no type (none written, or one the schema does not describe) takes JSON
    ///   when `text` is JSON, else the text.
    ///
    /// - Throws: ``ChangeProblem`` when the setting does not exist or the text is not of a type
    ///   the place allows (never quoting the text of a secret).
    public func readValue(_ text: String, at location: JSONPointer) throws(ChangeProblem) -> JSONValue {
        guard let key = location.tokens.first, schemaDocument["properties"]?[key] != nil else {
            throw ChangeProblem(location, "is not a setting of \(app) (schema version \(version))")
        }
        if text.hasPrefix("\""), case .string(let quoted)? = try? JSONParser.parse(Array(text.utf8)) { return .string(quoted) }
        let place = SchemaPlace(in: schemaDocument, at: location)
        let json = try? JSONParser.parse(Array(text.utf8))
        var types = place.types
        if types.contains("null"), text == "null" { return .null }
        types.removeAll { $0 == "null" }
        if types.isEmpty { return json ?? .string(text) }
        // Every reading of a type other than "string" first; among them, one the enum lists.
        let readings = types.sorted { ($0 == "string" ? 1 : 0) < ($1 == "string" ? 1 : 0) }.compactMap { Self.read(text, as: $0) }
        if let allowed = place.allowedValues, let listed = readings.first(where: allowed.contains) { return listed }
        if let first = readings.first { return first }
        let shown = secretKeys.contains(key) || place.isSecret ? "" : " (got \(JSONValue.string(text).serialized()))"
        throw ChangeProblem(location, "must be \(types.map(Self.typeDescription).joined(separator: " or "))\(shown)")
    }

    private static func read(_ text: String, as type: String) -> JSONValue? {
        switch type {
        case "string":
            return .string(text)
        case "boolean":
            switch text.lowercased() {
            case "true", "yes", "on": return .bool(true)
            case "false", "no", "off": return .bool(false)
            default: return nil
            }
        case "integer":
            guard let value = try? JSONParser.parse(Array(text.utf8)), case .number(let number) = value, number.isInteger else {
                return nil
            }
            return value
        case "number":
            guard let value = try? JSONParser.parse(Array(text.utf8)), case .number = value else { return nil }
            return value
        case "array":
            guard let value = try? JSONParser.parse(Array(text.utf8)), case .array = value else { return nil }
            return value
        case "object":
            guard let value = try? JSONParser.parse(Array(text.utf8)), case .object = value else { return nil }
            return value
        default:
            return nil
        }
    }

    private static func typeDescription(_ type: String) -> String {
        switch type {
        case "boolean": "true or false"
        case "integer": "an integer"
        case "number": "a number"
        case "array": "a JSON array such as [\"a\", \"b\"]"
        case "object": "a JSON object such as {\"key\": 1}"
        case "string": "text"
        default: type
        }
    }
}

extension ChangeProblem: Error {}

/// What a schema says of one place in the settings (a setting, or a place inside one), found by
/// following `properties`, `items`, `prefixItems`, `additionalProperties` and local `$ref`s from
/// the root: the types it allows, its `enum` or `const`, and whether it is `x-secret`. A place
/// the schema does not describe that plainly (`oneOf`, `if`, a remote `$ref`) allows any type.
struct SchemaPlace {
    /// The JSON types allowed (`string`, `integer`, …), from `type` or else from the `enum` or
    /// `const` values; empty when nothing is said.
    var types: [String] = []
    /// The `enum` values (or the `const`), when the place has them.
    var allowedValues: [JSONValue]?
    /// Whether the place or a place above it is `x-secret`.
    var isSecret = false

    init(in root: JSONValue, at location: JSONPointer) {
        var schema: JSONValue? = root
        for token in location.tokens {
            guard let current = schema.map({ Self.resolved($0, in: root) }) else { break }
            if current["x-secret"] == .bool(true) { isSecret = true }
            schema = Self.child(of: current, token)
        }
        guard let found = schema.map({ Self.resolved($0, in: root) }) else { return }
        if found["x-secret"] == .bool(true) { isSecret = true }
        if case .array(let values)? = found["enum"] {
            allowedValues = values
        } else if let value = found["const"] {
            allowedValues = [value]
        }
        switch found["type"] {
        case .string(let type)?: types = [type]
        case .array(let list)?: types = list.compactMap(\.stringValue)
        default: types = Self.types(of: allowedValues ?? [])
        }
    }

    /// The schema of member or item `token` inside `schema`, if the schema says.
    private static func child(of schema: JSONValue, _ token: String) -> JSONValue? {
        if let property = schema["properties"]?[token] { return property }
        if let index = Int(token) ?? (token == "-" ? Int.max : nil) {
            if case .array(let prefix)? = schema["prefixItems"], index < prefix.count { return prefix[index] }
            if case .object? = schema["items"] { return schema["items"] }
        }
        if case .object? = schema["additionalProperties"] { return schema["additionalProperties"] }
        return nil
    }

    /// `schema` with a local `$ref` (`#/$defs/…`) followed, a few steps at most.
    private static func resolved(_ schema: JSONValue, in root: JSONValue) -> JSONValue {
        var current = schema
        for _ in 0..<8 {
            guard case .string(let reference)? = current["$ref"], reference.hasPrefix("#"),
                let pointer = JSONPointer(String(reference.dropFirst())), let target = root[pointer: pointer]
            else { return current }
            current = target
        }
        return current
    }

    /// The JSON types of `values`, in order of first appearance.
    private static func types(of values: [JSONValue]) -> [String] {
        var types: [String] = []
        for value in values {
            let type: String
            switch value {
            case .null: type = "null"
            case .bool: type = "boolean"
            case .number(let number): type = number.isInteger ? "integer" : "number"
            case .string: type = "string"
            case .array: type = "array"
            case .object: type = "object"
            }
            if !types.contains(type) { types.append(type) }
        }
        return types
    }
}
