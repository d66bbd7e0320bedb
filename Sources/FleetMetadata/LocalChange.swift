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

    /// The JSON value a person means by `text` for the setting `key`, read by the setting's
    /// schema type: `7` is an integer for an integer setting and the text "7" for a string
    /// setting; `true`/`false` (also `yes`/`no`, `on`/`off`) for a boolean; JSON for arrays and
    /// objects; `null` for a nullable setting (in a merge patch, that removes the device's own
    /// value). A setting with no single type takes JSON when `text` is JSON, else the text.
    ///
    /// - Throws: ``ChangeProblem`` when the key is not a setting or the text is not of its type
    ///   (never quoting the text of an `x-secret` setting).
    public func parseValue(_ text: String, forKey key: String) throws(ChangeProblem) -> JSONValue {
        let location = JSONPointer.root.appending(key)
        guard let property = schemaDocument["properties"]?[key] else {
            throw ChangeProblem(location, "is not a setting of \(app) (schema version \(version))")
        }
        var types: [String] = []
        switch property["type"] {
        case .string(let type)?: types = [type]
        case .array(let list)?: types = list.compactMap(\.stringValue)
        default: break
        }
        if types.contains("null"), text == "null" { return .null }
        types.removeAll { $0 == "null" }
        let shown = secretKeys.contains(key) ? "" : " (got \(JSONValue.string(text).serialized()))"
        if types.isEmpty { return (try? JSONParser.parse(Array(text.utf8))) ?? .string(text) }
        // Prefer a reading other than "string" when the setting allows several types.
        for type in types.sorted(by: { ($0 == "string" ? 1 : 0) < ($1 == "string" ? 1 : 0) }) {
            if let value = Self.read(text, as: type) { return value }
        }
        let wanted = types.map(Self.typeDescription).joined(separator: " or ")
        throw ChangeProblem(location, "must be \(wanted)\(shown)")
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
