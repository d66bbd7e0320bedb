import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore

extension SettingsForm {
    /// The form: the layout's groups, headers, panes, settings and lists, then every setting
    /// the layout does not place. Posts to `action` with the session's CSRF token.
    public func render(action: String, csrf: String) -> HTML {
        var placed: Set<String> = []
        var body = items(metadata.layout, placed: &placed)
        let rest = metadata.settingKeys.filter { !placed.contains($0) }
        if !rest.isEmpty {
            let fields = HTML.joined(rest.map { setting($0) })
            body = body + (metadata.layout.isEmpty ? fields : "<section class=\"group\"><h2>Other settings</h2>\(fields)</section>")
        }
        return """
            <form method="post" action="\(action)" class="settings" data-settings-form>
            <input type="hidden" name="csrf" value="\(csrf)"><input type="hidden" name="\(Self.drawnField)" value="\(Self.drawnDigest(of: view))">
            \(errorSummary)\(body)
            <div class="actions"><button type="submit" class="primary">Save</button> <span class="form-status" role="status" aria-live="polite"></span></div>
            </form>
            """
    }

    private var errorSummary: HTML {
        let lines = errors.sorted { $0.key < $1.key }.map { pointer, message -> HTML in
            pointer.isEmpty ? "<li>\(message)</li>" : "<li><a href=\"#\(Self.fieldID(pointer))\">\(pointer)</a>: \(message)</li>"
        }
        return """
            <div class="error-summary" role="alert" tabindex="-1"\(flag: "hidden", errors.isEmpty)><h2>The settings were not saved</h2><ul>\(HTML.joined(lines))</ul></div>
            """
    }

    private var properties: JSONObject { metadata.schemaDocument["properties"]?.objectValue ?? [:] }

    private func items(_ layout: [LayoutItem], placed: inout Set<String>) -> HTML {
        var html = HTML.empty
        for item in layout {
            switch item {
            case .group(let title, let children):
                html = html + "<section class=\"group\"><h2>\(title)</h2>\(items(children, placed: &placed))</section>"
            case .header(let title):
                html = html + "<h3 class=\"header\">\(title)</h3>"
            case .pane(let title, let children):
                html = html + "<fieldset class=\"pane\"><legend>\(title)</legend>\(items(children, placed: &placed))</fieldset>"
            case .setting(let key):
                placed.insert(key)
                html = html + setting(key)
            case .list(let key, let children):
                placed.insert(key)
                html = html + (Self.kind(of: key, in: metadata) == .protected ? setting(key) : list(key, itemLayout: children))
            }
        }
        return html
    }

    // MARK: - One setting

    private func setting(_ key: String) -> HTML {
        let schema = properties[key] ?? [:]
        let kind = Self.kind(of: key, in: metadata)
        if kind == .json, schema["type"] == .string("array"), let itemSchema = schema["items"], itemSchema["type"] == .string("object") {
            return list(key, itemLayout: [])
        }
        let pointer = JSONPointer.root.appending(key)
        let setHere = view.values[key] != nil
        let shown = submitted[key] ?? view.values[key] ?? view.inherited[key]
        let hidden = kind == .secret || kind == .protected
        let control = control(kind, schema: schema, pointer: pointer, value: shown, secretIsSet: setHere || inheritsSecret(key))
        return field(pointer: pointer, schema: schema, control: control, origin: origin(key, setHere: setHere, secret: hidden))
    }

    /// Whether the secret `key` inherits a value: one from a scope below, or a default that is
    /// not empty (inherited values arrive masked, so the default is read from the schema).
    private func inheritsSecret(_ key: String) -> Bool {
        switch view.inheritedSources[key] {
        case nil: return false
        case .defaults?:
            guard let value = properties[key]?["default"] else { return false }
            return value != .string("")
        case .some: return true
        }
    }

    /// Where the value comes from, and the reset to inherited.
    private func origin(_ key: String, setHere: Bool, secret: Bool) -> HTML {
        let pointer = JSONPointer.root.appending(key)
        let source = view.inheritedSources[key].map(Self.scopeName) ?? "nothing (no default)"
        let inheritedValue: HTML =
            secret
            ? (inheritsSecret(key) ? "a secret (set)" : "no secret (not set)")
            : view.inherited[key].map { "<code>\(Self.short($0))</code>" } ?? "no value"
        let writable: HTML = metadata.writableKeys.contains(key) ? " <span class=\"badge\">devices may change this</span>" : ""
        guard setHere else {
            return "<p class=\"origin\">Inherited from \(source)\(writable)</p>"
        }
        return """
            <p class="origin"><span class="badge set">set at \(view.scope.description)</span>\(writable) \
            <label class="reset"><input type="checkbox" name="\(Self.resetName(pointer))" value="1"> Reset to inherited: \(inheritedValue) from \(source)</label></p>
            """
    }

    private func field(pointer: JSONPointer, schema: JSONValue, control: HTML, origin: HTML) -> HTML {
        let id = Self.fieldID(pointer.description)
        let title = schema["title"]?.stringValue ?? pointer.tokens.last ?? pointer.description
        let help = schema["description"]?.stringValue.map { text -> HTML in "<p class=\"help\" id=\"\(id)-help\">\(text)</p>" }
        let error = errors[pointer.description]
        return """
            <div class="field\(error == nil ? "" : " invalid")" data-pointer="\(pointer.description)">
            <label for="\(id)">\(title)</label>
            \(control)\(help)\(origin)
            <p class="field-error" id="\(id)-error"\(flag: "hidden", error == nil)>\(error ?? "")</p>
            </div>
            """
    }

    /// The input for one value.
    private func control(_ kind: Kind, schema: JSONValue, pointer: JSONPointer, value: JSONValue?, secretIsSet: Bool) -> HTML {
        let id = Self.fieldID(pointer.description)
        let name = Self.valueName(pointer)
        let invalid = errors[pointer.description] != nil
        let described: HTML =
            "\(attribute: "aria-describedby", "\(id)-error" + (schema["description"] == nil ? "" : " \(id)-help"))\(flag: "aria-invalid=\"true\"", invalid)"
        switch kind {
        case .toggle:
            return """
                <input type="hidden" name="\(name)" value="false"><input type="checkbox" class="switch" id="\(id)" name="\(name)" value="true"\(flag: "checked", value == .bool(true))\(described)>
                """
        case .choice(let options, let titles):
            let choices = zip(options, titles).map { option, title -> HTML in
                "<option value=\"\(option.serialized())\"\(flag: "selected", option == value)>\(title)</option>"
            }
            // With no value yet, "not set" is chosen: saving the form sets nothing.
            let notSet: HTML = value == nil ? "<option value=\"\" selected>not set</option>" : .empty
            return "<select id=\"\(id)\" name=\"\(name)\"\(described)>\(notSet)\(HTML.joined(choices))</select>"
        case .integer, .number:
            return """
                <input type="number" id="\(id)" name="\(name)" inputmode="\(kind == .integer ? "numeric" : "decimal")"\(numberAttributes(schema, integer: kind == .integer))\(attribute: "value", value?.numberValue.map { "\($0)" })\(described)>
                """
        case .text:
            return """
                <input type="text" id="\(id)" name="\(name)"\(attribute: "value", value?.stringValue)\(attribute: "placeholder", schema["x-placeholder"]?.stringValue)\(attribute: "minlength", schema["minLength"]?.numberValue?.int64Value.map(String.init))\(attribute: "maxlength", schema["maxLength"]?.numberValue?.int64Value.map(String.init))\(described)>
                """
        case .secret:
            return """
                <input type="password" id="\(id)" name="\(name)" autocomplete="new-password" placeholder="\(secretIsSet ? "set; type to replace" : "not set")"\(described)> <span class="badge secret">\(secretIsSet ? "set" : "not set")</span>
                """
        case .protected:
            return """
                <p class="protected" id="\(id)"><span class="badge secret">\(secretIsSet ? "set" : "not set")</span> \
                It is or holds a secret, which the console never shows: change it with <code>fleetset admin set</code>.</p>
                """
        case .json:
            return """
                <textarea id="\(id)" name="\(name)" rows="3" spellcheck="false" class="json"\(described)>\(value.map { $0.serialized() } ?? "")</textarea>
                """
        }
    }

    /// `min`, `max` and `step` where the schema's constraints mean the same in HTML.
    private func numberAttributes(_ schema: JSONValue, integer: Bool) -> HTML {
        let minimum = schema["minimum"]?.numberValue
        let maximum = schema["maximum"]?.numberValue
        var step = integer ? "1" : "any"
        if let multiple = schema["multipleOf"]?.numberValue, minimum == nil || minimum?.doubleValue == 0 {
            step = "\(multiple)"
        }
        return "\(attribute: "min", minimum.map { "\($0)" })\(attribute: "max", maximum.map { "\($0)" }) step=\"\(step)\""
    }

    // MARK: - Lists

    private func list(_ key: String, itemLayout: [LayoutItem]) -> HTML {
        let schema = properties[key] ?? [:]
        let pointer = JSONPointer.root.appending(key)
        let title = schema["title"]?.stringValue ?? key
        let itemSchema = schema["items"] ?? [:]
        let setHere = view.values[key] != nil
        let rows = (submitted[key] ?? view.values[key] ?? view.inherited[key])?.arrayValue ?? []
        let itemProperties = itemSchema["properties"]?.objectValue ?? [:]
        let origin = origin(key, setHere: setHere, secret: false)
        if itemProperties.contains(where: { $0.value["x-secret"] == .bool(true) }) {
            return """
                <fieldset class="list" data-pointer="\(pointer.description)"><legend>\(title)</legend>
                <p class="help">Its items hold secrets, which the console never shows: change it with <code>fleetset admin set</code>.</p>\(origin)</fieldset>
                """
        }
        let layout = itemLayout.isEmpty ? itemProperties.keys.map { LayoutItem.setting(key: $0) } : itemLayout
        let existing = rows.enumerated().map { index, item in
            listRow(pointer, index: "\(index)", origin: "\(index)", item: item.objectValue ?? [:], schema: itemSchema, layout: layout)
        }
        let blank = Metadata.defaults(of: itemSchema)
        let newRow = listRow(pointer, index: "\(rows.count)", origin: nil, item: blank, schema: itemSchema, layout: layout)
        let template = listRow(pointer, index: "__N__", origin: "new", item: blank, schema: itemSchema, layout: layout)
        let error = errors[pointer.description]
        return """
            <fieldset class="list" data-list="\(pointer.description)" data-pointer="\(pointer.description)"><legend>\(title)</legend>
            <input type="hidden" name="\(Self.listName(pointer))" value="1">
            <ol class="list-items">\(HTML.joined(existing))</ol>
            <noscript><ol class="list-items" start="\(rows.count + 1)">\(newRow)</ol></noscript>
            <template class="list-new-row">\(template)</template>
            <p class="field-error" id="\(Self.fieldID(pointer.description))-error"\(flag: "hidden", error == nil)>\(error ?? "")</p>
            \(origin)</fieldset>
            """
    }

    private func listRow(
        _ list: JSONPointer, index: String, origin: String?, item: JSONObject, schema: JSONValue, layout: [LayoutItem]
    ) -> HTML {
        let rowPointer = list.appending(index)
        let properties = schema["properties"]?.objectValue ?? [:]
        func rowItems(_ layout: [LayoutItem]) -> HTML {
            HTML.joined(
                layout.map { element -> HTML in
                    switch element {
                    case .setting(let key), .list(let key, _):
                        let property = properties[key] ?? [:]
                        let pointer = rowPointer.appending(key)
                        let control = control(
                            Self.kind(of: property, secret: false), schema: property, pointer: pointer, value: item[key], secretIsSet: false
                        )
                        return field(pointer: pointer, schema: property, control: control, origin: .empty)
                    case .header(let title): return "<h4 class=\"header\">\(title)</h4>"
                    case .pane(let title, let children), .group(let title, let children):
                        return "<fieldset class=\"pane\"><legend>\(title)</legend>\(rowItems(children))</fieldset>"
                    }
                })
        }
        let marker: HTML =
            if let origin {
                """
                <input type="hidden" name="\(Self.rowName(list))/\(index)" value="\(origin)">\
                <label class="remove"><input type="checkbox" name="\(Self.removeName(rowPointer))" value="1"> Remove this item</label>
                """
            } else {
                "<label class=\"add\"><input type=\"checkbox\" name=\"\(Self.rowName(list))/\(index)\" value=\"new\"> Add this item</label>"
            }
        return "<li class=\"list-item\" data-row=\"\(index)\">\(rowItems(layout))\(marker)</li>"
    }

    // MARK: - Text

    /// An element id for the field of `pointer` (unique per pointer; `__N__` stays as it is for
    /// the script to number new list items).
    static func fieldID(_ pointer: String) -> String {
        var id = "f"
        for scalar in pointer.unicodeScalars {
            if ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar) || scalar == "_" {
                id.unicodeScalars.append(scalar)
            } else {
                id += "-" + String(scalar.value, radix: 16) + "-"
            }
        }
        return id
    }

    /// How a scope is named to a person.
    static func scopeName(_ scope: Scope) -> String {
        switch scope {
        case .defaults: "the metadata's default"
        case .app: "the app scope"
        case .group(let name): "group \(name)"
        case .device(let id): "device \(id)"
        }
    }

    /// A value's JSON, cut at 80 characters.
    static func short(_ value: JSONValue) -> String {
        let text = value.serialized()
        return text.count > 80 ? String(text.prefix(79)) + "…" : text
    }
}
