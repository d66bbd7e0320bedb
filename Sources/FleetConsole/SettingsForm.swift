import FleetJSON
import FleetMetadata
import FleetServerCore

/// The settings form of one app at one scope, drawn from the metadata's layout and schema, and
/// the merge patch a submitted form makes.
///
/// Field names carry the JSON pointer of the value they edit: `v:/greeting`, `v:/playlist/0/url`.
/// `reset:/KEY` asks for the setting to be inherited again (a `null` in the patch); a list
/// sends `list:/KEY`, and one `row:/KEY/N` per item with the index it had when the page was
/// drawn (or `new`), which the script renumbers after reordering.
public struct SettingsForm: Sendable {
    /// How a setting is edited.
    typealias Kind = SettingControl

    public let view: ScopeValuesView
    /// Messages by the JSON pointer of the value they are about (`""`: the whole form).
    public var errors: [String: String]
    /// Values submitted that were refused, shown again as entered (by top-level key).
    public var submitted: JSONObject

    public init(view: ScopeValuesView, errors: [String: String] = [:], submitted: JSONObject = [:]) {
        self.view = view
        self.errors = errors
        self.submitted = submitted
    }

    var metadata: Metadata { view.metadata }

    // MARK: - Reading a submitted form

    /// The merge patch a submitted form asks for: only the settings whose value differs from
    /// what the form showed, `null` for those reset to inherited. Values that cannot be read
    /// (a word in a number field, JSON that does not parse) are reported by pointer instead.
    ///
    /// A field left empty (or a box left unticked, or "not set" chosen) where the page showed no
    /// value asks for nothing; secrets are sent only when typed; an object setting edited as
    /// JSON becomes a merge patch from its stored value, so a member removed in the text is
    /// removed (`null`) rather than kept.
    public static func patch(from fields: FormFields, view: ScopeValuesView) -> (patch: JSONObject, errors: [String: String]) {
        var patch = JSONObject()
        var errors: [String: String] = [:]
        let properties = view.metadata.schemaDocument["properties"]?.objectValue ?? [:]
        for key in view.metadata.settingKeys {
            let pointer = JSONPointer.root.appending(key)
            guard let schema = properties[key] else { continue }
            let setHere = view.values[key] != nil
            if fields[resetName(pointer)] != nil {
                if setHere { patch[key] = .null }
                continue
            }
            let kind = kind(of: key, in: view.metadata)
            if kind == .protected { continue }
            let shown = view.values[key] ?? view.inherited[key]
            let value: JSONValue?
            if fields.has(listName(pointer)) {
                guard let itemSchema = schema["items"] else { continue }
                value = readList(fields, at: pointer, itemSchema: itemSchema, shown: shown?.arrayValue ?? [], &errors)
            } else if let text = fields[valueName(pointer)] {
                if kind == .secret {
                    // Blank keeps the secret as it is; it is never shown, so it is never sent back.
                    if !text.isEmpty { patch[key] = .string(text) }
                    continue
                }
                value = read(text, kind: kind, at: pointer, nothingShown: shown == nil, setHere: setHere, &errors)
            } else {
                continue
            }
            guard let value, value != shown else { continue }
            if view.heldAtKeyPaths.contains(key) {
                patch[pointer.description] = value  // the setting whole, in place of the device's places in it
            } else if case .object(let stored)? = view.values[key], case .object(let edited) = value {
                patch[key] = JSONValue.minimalMergePatch(from: .object(stored), to: .object(edited))
            } else {
                patch[key] = value
            }
        }
        return (patch, errors)
    }

    /// A digest of what the form showed (the values at its scope and those it inherits), sent
    /// with it: a form drawn before someone else changed these settings is refused rather than
    /// putting back what it showed.
    public static func drawnDigest(of view: ScopeValuesView) -> String {
        Credentials.shortDigest(
            (JSONValue.object(view.values).serialized(.sortedKeys) + "\n" + JSONValue.object(view.inherited).serialized(.sortedKeys)).utf8)
    }

    /// The field that carries ``drawnDigest(of:)``.
    public static let drawnField = "drawn"

    private static func readList(
        _ fields: FormFields, at pointer: JSONPointer, itemSchema: JSONValue, shown: [JSONValue], _ errors: inout [String: String]
    ) -> JSONValue? {
        let prefix = rowName(pointer) + "/"
        let rows = fields.names(withPrefix: prefix).compactMap { name -> (index: Int, name: String)? in
            Int(name.dropFirst(prefix.count)).map { ($0, name) }
        }.sorted { $0.index < $1.index }
        let itemProperties = itemSchema["properties"]?.objectValue ?? [:]
        var items: [JSONValue] = []
        var failed = false
        for row in rows {
            let rowPointer = pointer.appending(index: row.index)
            if fields.has(removeName(rowPointer)) { continue }
            let origin = fields[row.name].flatMap { Int($0) }
            var item = origin.flatMap { shown.indices.contains($0) ? shown[$0].objectValue : nil } ?? JSONObject()
            for (property, schema) in itemProperties {
                let fieldPointer = rowPointer.appending(property)
                guard let text = fields[valueName(fieldPointer)] else { continue }
                let before = errors.count
                let absent = item[property] == nil
                if let value = read(
                    text, kind: kind(of: schema, secret: false), at: fieldPointer, nothingShown: absent, setHere: !absent, &errors)
                {
                    item[property] = value
                }
                if errors.count != before { failed = true }
            }
            items.append(.object(item))
        }
        return failed ? nil : .array(items)
    }

    /// One field's text as a value of its kind; `nil` (and no error) when it asks for nothing:
    /// an empty field or an unticked box where nothing was shown, "not set", an emptied number
    /// that was not set at this scope.
    private static func read(
        _ text: String, kind: Kind, at pointer: JSONPointer, nothingShown: Bool, setHere: Bool, _ errors: inout [String: String]
    ) -> JSONValue? {
        switch kind {
        case .toggle:
            if text != "true" && nothingShown { return nil }
            return .bool(text == "true")
        case .text, .secret:
            if text.isEmpty && nothingShown { return nil }
            return .string(text)
        case .choice:
            if text.isEmpty { return nil }
            guard let value = try? JSONParser.parse(Array(text.utf8)) else {
                errors[pointer.description] = "choose one of the listed values"
                return nil
            }
            return value
        case .integer, .number:
            let trimmed = text.trimmingCharacters(in: " ")
            if trimmed.isEmpty {
                if setHere { errors[pointer.description] = "enter a number, or reset the setting to its inherited value" }
                return nil
            }
            guard case .number(let number)? = try? JSONParser.parse(Array(trimmed.utf8)) else {
                errors[pointer.description] = "\(JSONValue.string(text).serialized()) is not a number"
                return nil
            }
            if kind == .integer && !number.isInteger {
                errors[pointer.description] = "must be a whole number (got \(trimmed))"
                return nil
            }
            return .number(number)
        case .json:
            if text.trimmingCharacters(in: " \n\r\t").isEmpty && nothingShown { return nil }
            do {
                return try JSONParser.parse(Array(text.utf8))
            } catch {
                errors[pointer.description] = "is not JSON: \(error)"
                return nil
            }
        case .protected:
            return nil
        }
    }

    /// How the top-level setting `key` is edited: a plain-string secret is write-only; any other
    /// secret, and any setting with a secret inside, is protected.
    static func kind(of key: String, in metadata: Metadata) -> Kind { SettingControl.of(key, in: metadata) }

    static func kind(of schema: JSONValue, secret: Bool) -> Kind { SettingControl.of(schema: schema, secret: secret) }

    static func valueName(_ pointer: JSONPointer) -> String { "v:" + pointer.description }
    static func resetName(_ pointer: JSONPointer) -> String { "reset:" + pointer.description }
    static func listName(_ pointer: JSONPointer) -> String { "list:" + pointer.description }
    static func rowName(_ pointer: JSONPointer) -> String { "row:" + pointer.description }
    static func removeName(_ pointer: JSONPointer) -> String { "remove:" + pointer.description }
}
