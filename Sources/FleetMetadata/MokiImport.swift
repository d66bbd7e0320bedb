import FleetJSON

/// Converts a MokiManage `SettingsSchema.json` into a fleetset metadata document.
///
/// | MokiManage | fleetset metadata |
/// |---|---|
/// | `Version` | `version` |
/// | `Groups[].Title` | a layout `group` (kept even when empty) |
/// | `Header` | a layout `header`; no setting |
/// | `TextField` | `{"type": "string", "default": Value}`; `Placeholder` → `x-placeholder` |
/// | `TextField` with class `Password` | the same, plus `"x-secret": true` |
/// | `ToggleSwitch` | `{"type": "boolean", "default": Value}` |
/// | `ComboBox` (class `Single` or none) with `Options` | `{"type": the values' type, "enum": [Option values], "x-enumTitles": [Option titles], "default": Value}` |
/// | `ComboBox` with class `Multiple` | an array of those values, `uniqueItems` |
/// | `Pane` | a layout `pane`; its settings stay top-level keys |
/// | `List` with `ItemTemplate` | `{"type": "array", "items": {"type": "object", "properties": …}}`; item keys are scoped to the item, `Value` (if any) → `default` |
/// | `Title` | `title`; `Key` | the property name, kept exactly as written |
///
/// The settings object and each list item are closed (`additionalProperties: false`): a value
/// the schema does not know is an error, not silently kept. MokiManage has no notion of
/// device-writable settings; name them with `writable` (`x-writable: true`).
public enum MokiImport {
    /// Why a MokiManage file could not be converted, with the JSON pointer into that file.
    public struct ImportError: Error, Sendable, CustomStringConvertible {
        /// Every problem found.
        public let problems: [MetadataError.Problem]

        public var description: String { problems.map(\.description).joined(separator: "\n") }
    }

    /// Converts `document` to a metadata document for `app`.
    ///
    /// - Parameter writable: keys of top-level settings to mark `x-writable`.
    /// - Throws: ``ImportError`` naming each unknown control, missing key, duplicate key or
    ///   mistyped member.
    public static func convert(_ document: JSONValue, app: String, writable: Set<String> = []) throws(ImportError) -> JSONValue {
        var converter = Converter()
        let result = converter.convert(document, app: app, writable: writable)
        if !converter.problems.list.isEmpty { throw ImportError(problems: converter.problems.list) }
        return result
    }
}

private struct Converter {
    var problems = MetadataProblems()

    /// The settings of one scope (the root, or one list's item) while they are collected.
    struct Scope {
        var properties = JSONObject()
        var seen: [String: JSONPointer] = [:]
    }

    mutating func convert(_ document: JSONValue, app: String, writable: Set<String>) -> JSONValue {
        guard case .object(let root) = document else {
            problems.add(.root, "a MokiManage settings schema must be an object with Version and Groups")
            return .null
        }
        var version: JSONValue = 1
        switch root["Version"] {
        case .number(let number)? where number.isInteger && number.doubleValue >= 1: version = .number(number)
        case nil: problems.add(JSONPointer.root.appending("Version"), "is missing")
        case .some(let other): problems.add(JSONPointer.root.appending("Version"), "must be a positive integer (got \(other.serialized()))")
        }
        var scope = Scope()
        var layout: [JSONValue] = []
        let groupsPointer = JSONPointer.root.appending("Groups")
        guard case .array(let groups)? = root["Groups"] else {
            problems.add(groupsPointer, "must be an array of groups")
            return .null
        }
        for (position, group) in groups.enumerated() {
            let pointer = groupsPointer.appending(index: position)
            guard case .string(let title)? = group["Title"] else {
                problems.add(pointer.appending("Title"), "must be a string")
                continue
            }
            let items = controls(group["Settings"] ?? .array([]), into: &scope, at: pointer.appending("Settings"))
            layout.append(["group": .string(title), "items": .array(items)])
        }
        for key in writable.sorted() {
            guard case .object(var property)? = scope.properties[key] else {
                problems.add(.root, "cannot mark \(JSONValue.string(key).serialized()) writable: there is no such top-level setting")
                continue
            }
            property["x-writable"] = true
            scope.properties[key] = .object(property)
        }
        let schema: JSONValue = [
            "type": "object", "properties": .object(scope.properties), "additionalProperties": false,
        ]
        return ["app": .string(app), "version": version, "schema": schema, "layout": .array(layout)]
    }

    /// Converts a `Settings` or `ItemTemplate` array; returns its layout items.
    mutating func controls(_ value: JSONValue, into scope: inout Scope, at pointer: JSONPointer) -> [JSONValue] {
        guard case .array(let elements) = value else {
            problems.add(pointer, "must be an array of controls")
            return []
        }
        var layout: [JSONValue] = []
        for (position, element) in elements.enumerated() {
            if let item = control(element, into: &scope, at: pointer.appending(index: position)) { layout.append(item) }
        }
        return layout
    }

    mutating func control(_ element: JSONValue, into scope: inout Scope, at pointer: JSONPointer) -> JSONValue? {
        guard case .object(let control) = element else {
            problems.add(pointer, "must be an object describing a control")
            return nil
        }
        guard case .string(let type)? = control["Type"] else {
            problems.add(pointer.appending("Type"), "must be a string naming the control")
            return nil
        }
        let title = control["Title"]?.stringValue
        switch type {
        case "Header":
            return ["header": .string(title ?? "")]
        case "Pane":
            let items = controls(control["Settings"] ?? .array([]), into: &scope, at: pointer.appending("Settings"))
            return ["pane": .string(title ?? ""), "items": .array(items)]
        case "TextField", "ToggleSwitch", "ComboBox", "List":
            guard let key = settingKey(control, at: pointer, in: &scope) else { return nil }
            guard var property = propertySchema(type, control, at: pointer) else { return nil }
            if let title { property["title"] = .string(title) }
            var layout: JSONValue = ["setting": .string(key)]
            if type == "List", case .object(var items)? = property["items"] {
                // The item layout travelled inside the item schema; it belongs in the layout.
                layout = ["list": .string(key), "items": items["x-layout"] ?? .array([])]
                items["x-layout"] = nil
                property["items"] = .object(items)
            }
            scope.properties[key] = .object(property)
            return layout
        default:
            problems.add(
                pointer.appending("Type"),
                "unknown control \(JSONValue.string(type).serialized()); known: Header, TextField, ToggleSwitch, ComboBox, Pane, List")
            return nil
        }
    }

    mutating func settingKey(_ control: JSONObject, at pointer: JSONPointer, in scope: inout Scope) -> String? {
        guard case .string(let key)? = control["Key"], !key.isEmpty else {
            problems.add(pointer.appending("Key"), "a \(control["Type"]?.stringValue ?? "") control needs a non-empty string Key")
            return nil
        }
        if let earlier = scope.seen[key] {
            problems.add(pointer.appending("Key"), "the key \(JSONValue.string(key).serialized()) is already used at \(earlier)")
            return nil
        }
        scope.seen[key] = pointer.appending("Key")
        return key
    }

    mutating func propertySchema(_ type: String, _ control: JSONObject, at pointer: JSONPointer) -> JSONObject? {
        var property = JSONObject()
        let classes = (control["Class"]?.arrayValue ?? []).compactMap(\.stringValue)
        if control["Class"] != nil, control["Class"]?.arrayValue == nil {
            problems.add(pointer.appending("Class"), "must be an array of class names")
        }
        switch type {
        case "TextField":
            property["type"] = "string"
            if classes.contains("Password") { property["x-secret"] = true }
            if let placeholder = control["Placeholder"] { property["x-placeholder"] = placeholder }
            property["default"] = typedDefault(control["Value"], expected: "string", at: pointer) ?? ""
        case "ToggleSwitch":
            property["type"] = "boolean"
            property["default"] = typedDefault(control["Value"], expected: "boolean", at: pointer) ?? false
        case "ComboBox":
            guard let options = comboOptions(control["Options"], at: pointer.appending("Options")) else { return nil }
            var single: JSONObject = [:]
            if let type = Self.commonType(of: options.values) { single["type"] = .string(type) }
            single["enum"] = .array(options.values)
            single["x-enumTitles"] = .array(options.titles)
            if classes.contains("Multiple") {
                property["type"] = "array"
                property["items"] = .object(single)
                property["uniqueItems"] = true
            } else {
                property = single
            }
            if let value = control["Value"] { property["default"] = value }
        default:  // List
            var itemScope = Scope()
            guard let template = control["ItemTemplate"] else {
                problems.add(pointer.appending("ItemTemplate"), "a List needs an ItemTemplate array of controls")
                return nil
            }
            let itemLayout = controls(template, into: &itemScope, at: pointer.appending("ItemTemplate"))
            property["type"] = "array"
            property["items"] = [
                "type": "object", "properties": .object(itemScope.properties), "additionalProperties": false,
                "x-layout": .array(itemLayout),
            ]
            property["default"] = control["Value"] ?? .array([])
        }
        if !classes.isEmpty { property["x-moki-class"] = .array(classes.map(JSONValue.string)) }
        return property
    }

    /// The JSON Schema type all `values` share (`number` for a mix of integers and numbers).
    static func commonType(of values: [JSONValue]) -> String? {
        let types = Set(values.map(\.typeName))
        if types.count == 1 { return types.first }
        if types == ["integer", "number"] { return "number" }
        return nil
    }

    mutating func typedDefault(_ value: JSONValue?, expected: String, at pointer: JSONPointer) -> JSONValue? {
        guard let value else { return nil }
        guard value.typeName == expected else {
            problems.add(pointer.appending("Value"), "must be a \(expected) for this control (got \(value.serialized()))")
            return nil
        }
        return value
    }

    mutating func comboOptions(_ value: JSONValue?, at pointer: JSONPointer) -> (values: [JSONValue], titles: [JSONValue])? {
        guard case .array(let options)? = value, !options.isEmpty else {
            problems.add(pointer, "a ComboBox needs a non-empty Options array")
            return nil
        }
        var values: [JSONValue] = []
        var titles: [JSONValue] = []
        for (position, option) in options.enumerated() {
            guard let optionValue = option["Value"] else {
                problems.add(pointer.appending(index: position).appending("Value"), "is missing")
                continue
            }
            if values.contains(optionValue) {
                problems.add(pointer.appending(index: position).appending("Value"), "\(optionValue.serialized()) is listed twice")
                continue
            }
            values.append(optionValue)
            titles.append(option["Title"] ?? .string(optionValue.stringValue ?? optionValue.serialized()))
        }
        return (values, titles)
    }
}
