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
    /// The problems of changing `current` by `change` (a merge patch of top-level settings, which
    /// may hold key-path values, see ``KeyPathValues``) on the device: every setting it changes
    /// must exist and be `x-writable`, and every new value must fit the schema together with the
    /// other settings. Only problems the change itself causes count, so a value an earlier forced
    /// metadata upload made invalid does not block other changes. A `null` (the fleet's value
    /// again) is checked by the server, which knows the value that applies then. Empty when the
    /// change may be sent.
    public func problems(ofChange change: JSONObject, to current: JSONObject) -> [ChangeProblem] {
        var problems: [ChangeProblem] = []
        let known = Set(settingKeys)
        for name in change.keys.sorted() {
            guard let key = KeyPathValues.setting(of: name) else {
                problems.append(ChangeProblem(.root, "\(name) is not a key path (~1 for a / in a name, ~0 for a ~)"))
                continue
            }
            let location = JSONPointer.root.appending(key)
            if !known.contains(key) {
                problems.append(ChangeProblem(location, "is not a setting of \(app) (schema version \(version))"))
            } else if !writableKeys.contains(key) {
                problems.append(ChangeProblem(location, "is not x-writable: only the fleet's administrators may change it"))
            }
        }
        guard problems.isEmpty else { return problems }
        var newValues = JSONObject()
        for (name, value) in change where value != .null { newValues[name] = value }
        let checked = Set(newValues.keys.compactMap(KeyPathValues.setting(of:)))
        guard !checked.isEmpty else { return [] }
        let before = Set(validate(values: .object(current)).map(\.description))
        var after: JSONObject
        do {
            after = try KeyPathValues.applying(newValues, to: current, inherited: nil)
        } catch let error as KeyPathError {
            return [ChangeProblem(error.location, error.message)]
        } catch {
            return []  // a change that needs the fleet's values: the server checks it
        }
        var settings = JSONObject()
        for (name, value) in after where !KeyPathValues.isKeyPath(name) { settings[name] = value }
        for (name, error) in KeyPathValues.overlay(after, onto: &settings) where change[name] != nil {
            problems.append(ChangeProblem(error.location, error.message))
        }
        for error in validate(values: .object(settings)) where !before.contains(error.description) {
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
    ///   for a string that looks like another type (refused where no string is allowed);
    /// - `null` is null where the schema allows null;
    /// - otherwise each type the schema allows is tried, every other type before `string`:
    ///   `7` is an integer for an integer setting and the text "7" for a string one (an enum of
    ///   strings included); `true`/`false` (also `yes`/`no`, `on`/`off`) for a boolean; JSON for
    ///   numbers, arrays and objects; any text for a string. With an `enum` or `const`, a
    ///   reading among its values wins, one written exactly as listed before an alias (`yes`
    ///   is the text "yes" when the enum lists it);
    /// - a place with no type (none written, or one the schema does not describe) takes JSON
    ///   when `text` is JSON, else the text.
    ///
    /// - Throws: ``ChangeProblem`` when the setting does not exist or the text is not of a type
    ///   the place allows. The text is quoted back only where no secret can be
    ///   (``isSecret(at:)``).
    public func readValue(_ text: String, at location: JSONPointer) throws(ChangeProblem) -> JSONValue {
        guard let key = location.tokens.first, schemaDocument["properties"]?[key] != nil else {
            throw ChangeProblem(location, "is not a setting of \(app) (schema version \(version))")
        }
        let place = SchemaPlace(in: schemaDocument, at: location)
        var types = place.types
        let json = try? JSONParser.parse(Array(text.utf8))
        if text.hasPrefix("\""), case .string(let quoted)? = json {
            guard types.isEmpty || types.contains("string") else {
                throw ChangeProblem(
                    location, "must be \(Self.describe(types)); a value in double quotes is text (leave the quotes out)")
            }
            return .string(quoted)
        }
        if types.contains("null"), text == "null" { return .null }
        types.removeAll { $0 == "null" }
        if types.isEmpty { return json ?? .string(text) }
        // Every reading of a type other than "string" first.
        let readings = types.sorted { ($0 == "string" ? 1 : 0) < ($1 == "string" ? 1 : 0) }.compactMap { Self.read(text, json, as: $0) }
        if let allowed = place.allowedValues {
            // Among the values listed, one written as listed (its JSON, or the text itself) before
            // one reached through an alias (yes, on, …).
            let listed = readings.filter(allowed.contains)
            if let exact = listed.first(where: { $0 == json || $0 == .string(text) }) ?? listed.first { return exact }
        }
        if let first = readings.first { return first }
        let shown = isSecret(at: location) ? "" : " (got \(JSONValue.string(text).serialized()))"
        throw ChangeProblem(location, "must be \(Self.describe(types))\(shown)")
    }

    /// Whether a value at `location` is, or is inside, a secret: asked of the schema's own
    /// conservative walk (``FleetSchema/JSONSchema/secretLocations(in:)``: every subschema that
    /// could apply counts, `$ref`s, `allOf` and the rest included) for settings that hold a value
    /// at that place.
    public func isSecret(at location: JSONPointer) -> Bool {
        if let key = location.tokens.first, secretKeys.contains(key) { return true }
        var skeleton: JSONValue = .string("")
        for token in location.tokens.reversed() {
            if let index = JSONPointer.arrayIndex(token) ?? (token == "-" ? 0 : nil), index <= 1_000 {
                skeleton = .array(Array(repeating: .null, count: index) + [skeleton])
            } else {
                skeleton = .object([token: skeleton])
            }
        }
        let inside = { (secret: JSONPointer) in
            location.tokens.starts(with: secret.tokens) || secret.tokens.starts(with: location.tokens)
        }
        return schema.secretLocations(in: skeleton).contains(where: inside)
    }

    private static func describe(_ types: [String]) -> String {
        types.filter { $0 != "null" }.map(Self.typeDescription).joined(separator: " or ")
    }

    /// `text` read as a value of JSON type `type`; `json` is `text` parsed once as JSON (`nil`
    /// when it is not JSON).
    private static func read(_ text: String, _ json: JSONValue?, as type: String) -> JSONValue? {
        switch (type, json) {
        case ("string", _):
            return .string(text)
        case ("boolean", _):
            switch text.lowercased() {
            case "true", "yes", "on": return .bool(true)
            case "false", "no", "off": return .bool(false)
            default: return nil
            }
        case ("integer", .number(let number)?):
            return number.isInteger ? json : nil
        case ("number", .number?), ("array", .array?), ("object", .object?):
            return json
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
/// the root: the types it allows, and its `enum` or `const`. A place the schema does not
/// describe that plainly (`oneOf`, `if`, `patternProperties`, a remote `$ref`) allows any type.
/// (Whether a place is secret is the schema walk's to say: ``Metadata/isSecret(at:)``.)
struct SchemaPlace {
    /// The JSON types allowed (`string`, `integer`, …), from `type` or else from the `enum` or
    /// `const` values; empty when nothing is said.
    var types: [String] = []
    /// The `enum` values (or the `const`), when the place has them.
    var allowedValues: [JSONValue]?

    init(in root: JSONValue, at location: JSONPointer) {
        var schema: JSONValue? = root
        for token in location.tokens {
            guard let current = schema.map({ Self.resolved($0, in: root) }) else { break }
            schema = Self.child(of: current, token)
        }
        guard let found = schema.map({ Self.resolved($0, in: root) }) else { return }
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
        let index = JSONPointer.arrayIndex(token)
        if index != nil || token == "-" {
            if let index, case .array(let prefix)? = schema["prefixItems"], index < prefix.count { return prefix[index] }
            if case .object? = schema["items"] { return schema["items"] }
        }
        // A name a pattern may cover: which schema applies is not plain to see.
        if schema["patternProperties"] != nil { return nil }
        if case .object? = schema["additionalProperties"] { return schema["additionalProperties"] }
        return nil
    }

    /// `schema` with a local `$ref` (`#/$defs/…`) followed, a few steps at most; a keyword
    /// written beside the `$ref` wins over the target's.
    private static func resolved(_ schema: JSONValue, in root: JSONValue) -> JSONValue {
        var current = schema
        for _ in 0..<8 {
            guard case .object(var own) = current, case .string(let reference)? = own["$ref"], reference.hasPrefix("#"),
                let pointer = JSONPointer(String(reference.dropFirst())), case .object(var target)? = root[pointer: pointer]
            else { return current }
            own["$ref"] = nil
            for (key, value) in own { target[key] = value }
            current = .object(target)
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
