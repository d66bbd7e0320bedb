import FleetJSON

/// How a setting is edited by a person, from its schema: the console's form and the device's
/// `fleetset edit` both draw their controls from this.
public enum SettingControl: Sendable, Equatable {
    case toggle
    /// One of the schema's `enum` values, each with its title (`x-enumTitles`, else the value).
    case choice(options: [JSONValue], titles: [String])
    case integer
    case number
    case text
    /// A string marked `x-secret`: typed hidden, never shown.
    case secret
    /// Anything else: its JSON.
    case json
    /// A setting that is or holds a secret that cannot be edited without showing it (a secret
    /// that is not a plain string, a list or object with secrets inside): shown as "set" or
    /// "not set", never edited here.
    case protected

    /// How the top-level setting `key` is edited.
    public static func of(_ key: String, in metadata: Metadata) -> SettingControl {
        let schema = metadata.schemaDocument["properties"]?[key] ?? [:]
        if metadata.secretKeys.contains(key) {
            return schema["type"] == .string("string") && schema["enum"] == nil ? .secret : .protected
        }
        return containsSecret(schema) ? .protected : of(schema: schema, secret: false)
    }

    /// Whether a subschema marks anything inside as `x-secret` (or refers elsewhere, where an
    /// editor cannot see: `$ref`, `$dynamicRef`).
    public static func containsSecret(_ schema: JSONValue) -> Bool {
        switch schema {
        case .object(let object):
            if object["x-secret"] == .bool(true) || object["$ref"] != nil || object["$dynamicRef"] != nil { return true }
            return object.contains { containsSecret($0.value) }
        case .array(let items):
            return items.contains(where: containsSecret)
        default:
            return false
        }
    }

    /// How the value `schema` describes is edited.
    public static func of(schema: JSONValue, secret: Bool) -> SettingControl {
        if case .array(let options)? = schema["enum"] {
            let titles = schema["x-enumTitles"]?.arrayValue?.compactMap(\.stringValue) ?? []
            return .choice(
                options: options, titles: titles.count == options.count ? titles : options.map { $0.stringValue ?? $0.serialized() })
        }
        switch schema["type"]?.stringValue {
        case "boolean": return .toggle
        case "integer": return .integer
        case "number": return .number
        case "string": return secret ? .secret : .text
        default: return .json
        }
    }

    /// The schema's constraints as a person reads them: `0–10`, `at most 32 characters`,
    /// `pattern ^[0-9]{4}$`; empty when there are none.
    public static func constraints(of schema: JSONValue) -> String {
        var parts: [String] = []
        let minimum = schema["minimum"].map { $0.serialized() }
        let maximum = schema["maximum"].map { $0.serialized() }
        switch (minimum, maximum) {
        case (let low?, let high?): parts.append("\(low)–\(high)")
        case (let low?, nil): parts.append("at least \(low)")
        case (nil, let high?): parts.append("at most \(high)")
        default: break
        }
        if let exclusive = schema["exclusiveMinimum"] { parts.append("above \(exclusive.serialized())") }
        if let exclusive = schema["exclusiveMaximum"] { parts.append("below \(exclusive.serialized())") }
        switch (schema["minLength"]?.serialized(), schema["maxLength"]?.serialized()) {
        case (let low?, let high?): parts.append("\(low) to \(high) characters")
        case (let low?, nil): parts.append("at least \(low) characters")
        case (nil, let high?): parts.append("at most \(high) characters")
        default: break
        }
        if let pattern = schema["pattern"]?.stringValue { parts.append("pattern \(pattern)") }
        if let items = schema["maxItems"] { parts.append("at most \(items.serialized()) items") }
        return parts.joined(separator: ", ")
    }
}
