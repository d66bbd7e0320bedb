import FleetJSON
import FleetMetadata

/// Draws a ``SettingsEditor`` as lines of text for a terminal of a given size (80×24 and up):
///
/// ```
/// fleetset edit · kiosk · revision 12 · 1 unsaved
/// kiosk › Media
/// > Greeting [greeting]                    Welcome to the lobby
///   Volume [volume]                        7
///   ...
/// ! /volume: must be at most 10
/// saved: revision 13
/// ↑↓ move  Enter edit/open  Esc back  a/d/[/] list  s save  q quit
/// ```
///
/// Plain text only (the cursor is `>`, the field being edited `*`), so it reads the same in any
/// terminal, over SSH, and in `tmux capture-pane`. Secrets are never drawn: `********` when set.
/// What the metadata, the values and the server say (titles, labels, `x-enumTitles`, messages)
/// is shown through ``TerminalText/escaped(_:keepingNewlinesAndTabs:)``, a line at a time: no
/// control character of theirs reaches the terminal, and each line is clipped by its shown width.
public enum EditorScreen {
    /// The lines of the screen, each at most `width` characters; `height` lines in all.
    public static func render(_ editor: SettingsEditor, width: Int = 80, height: Int = 24) -> [String] {
        let width = max(40, width)
        let height = max(10, height)
        var lines: [String] = []
        let unsaved = editor.changedKeys.count
        lines.append(
            "fleetset edit · \(editor.app) · revision \(editor.revision)" + (unsaved > 0 ? " · \(unsaved) unsaved" : ""))
        lines.append(editor.breadcrumb)
        let body = height - 5
        let rows = editor.rows
        // Scroll so the cursor shows, a little before the middle.
        let first = min(max(0, editor.cursor - body / 2), max(0, rows.count - body))
        for index in first..<min(rows.count, first + body) {
            lines.append(line(rows[index], selected: index == editor.cursor, editor: editor, width: width))
        }
        while lines.count < height - 3 { lines.append("") }
        lines.append(detail(editor))
        lines.append(editor.status)
        lines.append(help(editor))
        return lines.map { clip(TerminalText.escaped($0), width) }
    }

    private static func line(_ row: SettingsEditor.Row, selected: Bool, editor: SettingsEditor, width: Int) -> String {
        let mark = selected ? "> " : "  "
        switch row {
        case .title(let title): return "== \(title) =="
        case .header(let title): return "  -- \(title) --"
        case .opens(let title, let screen):
            var count = ""
            if case .list(let key, _, _) = screen { count = " (\(editor.value(at: key)?.arrayValue?.count ?? 0) items)" }
            return mark + title + count + " ..."
        case .listItem(let list, let index, _):
            return mark + "\(index + 1). " + summary(editor.value(at: list.appending(index: index)), schema: editor.itemSchema(of: list))
        case .addItem:
            return mark + "+ add an item (a)"
        case .field(let field):
            let typing: String?
            if case .typing(let edited, let text, _) = editor.mode, edited.pointer == field.pointer {
                typing = field.control == .secret ? String(repeating: "*", count: text.count) + "_" : text + "_"
            } else {
                typing = nil
            }
            // The label and the value are escaped before padding: the column is counted on what is drawn.
            var value = TerminalText.escaped(typing ?? shown(field, editor.value(at: field.pointer)))
            if !field.editable {
                value += "  (read-only" + (editor.sources[field.pointer.tokens.first ?? ""].map { ", from \($0)" } ?? "") + ")"
            }
            if editor.error(at: field.pointer) != nil { value += "  !" }
            let label = (typing != nil ? "* " : mark) + TerminalText.escaped(field.label)
            let column = max(34, min(44, width / 2))
            return label.count < column ? label + String(repeating: " ", count: column - label.count) + value : label + "  " + value
        }
    }

    /// A value as a person reads it in a row.
    static func shown(_ field: SettingsEditor.Field, _ value: JSONValue?) -> String {
        switch field.control {
        case .secret, .protected:
            return value == nil ? "not set" : "********"
        case .toggle:
            return value?.boolValue == true ? "[x] on" : "[ ] off"
        case .choice(let options, let titles):
            guard let value else { return "not set" }
            return options.firstIndex(of: value).map { titles[$0] } ?? value.serialized()
        default:
            guard let value else { return "not set" }
            if case .string(let text) = value { return text }
            return value.serialized(maximumLength: 60)
        }
    }

    /// An item of a list in one line; members whose schema holds a secret read `********`.
    private static func summary(_ item: JSONValue?, schema: JSONValue) -> String {
        guard let item else { return "" }
        if SettingControl.containsSecret(schema), !(schema["properties"]?.objectValue.map { !$0.isEmpty } ?? false) { return "********" }
        if case .object(let members) = item {
            return members.keys.sorted().map { key in
                let memberSchema = schema["properties"]?[key] ?? [:]
                let text =
                    SettingControl.containsSecret(memberSchema) ? "********" : members[key]?.stringValue ?? members[key]?.serialized() ?? ""
                return "\(key): " + text
            }
            .joined(separator: ", ")
        }
        return item.stringValue ?? item.serialized()
    }

    /// The line about the selected field: what is wrong with it, else its choices while
    /// choosing, else its constraints.
    private static func detail(_ editor: SettingsEditor) -> String {
        if case .choosing(let field, let index) = editor.mode, case .choice(_, let titles) = field.control {
            return "choose: " + titles.enumerated().map { $0.offset == index ? "[\($0.element)]" : $0.element }.joined(separator: " ")
        }
        guard let field = editor.selectedField else { return "" }
        if let error = editor.error(at: field.pointer) { return "! \(field.pointer.keyPath): \(error)" }
        let constraints = SettingControl.constraints(of: field.schema)
        let kind = field.editable ? "writable" : "read-only"
        return constraints.isEmpty ? kind : "\(kind); \(constraints)"
    }

    private static func help(_ editor: SettingsEditor) -> String {
        switch editor.mode {
        case .typing: return "type the value  Enter done  Esc undo"
        case .choosing: return "up/down choose  Enter take  Esc back"
        case .browsing:
            if case .list? = editor.stack.last { return "up/down move  Enter open  a add  d remove  [ ] move item  Esc back  s save" }
            return "up/down move  Enter edit/open  Esc back  s save  q quit"
        }
    }

    private static func clip(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(width - 1)) + "…"
    }
}
