import FleetJSON
import FleetMetadata
import FleetSchema

/// The on-device settings editor as a value: the metadata's layout as screens of rows, a
/// cursor, the values as edited, and each field checked against the schema as it is typed. It
/// takes keys and returns what to do (save, quit); it reads no terminal and no file, so every
/// rule is tested as a value. ``EditorScreen`` draws it.
///
/// - Groups are titles over their settings; headers are text; a pane and a list open as a
///   screen of their own (Enter or →; Esc or ← goes back).
/// - Only settings marked `x-writable` are edited; the others are shown with where their value
///   comes from. A secret is typed hidden and never shown.
/// - Lists: `a` adds an item, `d` removes the one under the cursor, `[` and `]` move it.
/// - `s` (or Ctrl-S) saves the changed settings (whole top-level values); `q` quits, twice when
///   there are unsaved changes.
public struct SettingsEditor: Sendable {
    /// One screen: the top level, a pane, a list, or one item of a list.
    public enum Screen: Sendable, Equatable {
        case root
        case pane(title: String, items: [LayoutItem], base: JSONPointer)
        case list(key: JSONPointer, title: String, itemLayout: [LayoutItem])
        case item(list: JSONPointer, index: Int, itemLayout: [LayoutItem])
    }

    /// One line of a screen.
    public enum Row: Sendable, Equatable {
        case title(String)
        case header(String)
        case field(Field)
        case opens(title: String, screen: Screen)
        case listItem(list: JSONPointer, index: Int, itemLayout: [LayoutItem])
        case addItem(list: JSONPointer)

        var isSelectable: Bool {
            switch self {
            case .title, .header: false
            default: true
            }
        }
    }

    /// A value a person may see and, when writable, change.
    public struct Field: Sendable, Equatable {
        public var pointer: JSONPointer
        public var label: String
        public var schema: JSONValue
        public var control: SettingControl
        public var editable: Bool
    }

    /// What the keys are doing now.
    public enum Mode: Sendable, Equatable {
        case browsing
        /// Typing the text of a field; `before` is its value when typing began (Esc puts it back).
        case typing(Field, text: String, before: JSONValue?)
        /// Choosing one of a field's options.
        case choosing(Field, index: Int)
    }

    /// What the caller should do after a key.
    public enum Effect: Sendable, Equatable {
        /// Send this merge patch of the changed settings (through the agent's inbox).
        case save(JSONObject)
        case quit
    }

    public let app: String
    public let metadata: Metadata
    public private(set) var revision: Int64
    /// The values on disk when the editor started or last saved.
    public private(set) var original: JSONObject
    /// The values as edited.
    public private(set) var draft: JSONObject
    /// Where each read-only setting's value comes from (`group:lobby`), when the server said.
    public let sources: [String: String]
    public private(set) var stack: [Screen] = [.root]
    /// The selected row of the current screen.
    public private(set) var cursor = 0
    public private(set) var mode: Mode = .browsing
    /// The schema's messages, by the JSON pointer of the value they are about.
    public private(set) var errors: [JSONPointer: String] = [:]
    /// The last thing said to the person (saved, refused, …).
    public var status = ""
    private var quitAsked = false

    public init(app: String, metadata: Metadata, revision: Int64, values: JSONObject, sources: [String: String] = [:]) {
        self.app = app
        self.metadata = metadata
        self.revision = revision
        self.original = values
        self.draft = values
        self.sources = sources
        cursor = rows.firstIndex(where: \.isSelectable) ?? 0
        validate()
    }

    // MARK: - What is shown

    /// The rows of the current screen.
    public var rows: [Row] { rows(of: stack.last ?? .root) }

    /// Where the current screen is: `kiosk › Media › Playlist › item 2`.
    public var breadcrumb: String {
        ([app]
            + stack.dropFirst().map { screen -> String in
                switch screen {
                case .root: app
                case .pane(let title, _, _): title
                case .list(_, let title, _): title
                case .item(_, let index, _): "item \(index + 1)"
                }
            }).joined(separator: " › ")
    }

    /// The top-level settings whose edited value differs from the one on disk.
    public var changedKeys: [String] {
        Set(draft.keys).union(original.keys).filter { draft[$0] != original[$0] }.sorted()
    }

    /// The value at `pointer` as edited.
    public func value(at pointer: JSONPointer) -> JSONValue? { JSONValue.object(draft)[pointer: pointer] }

    /// The field under the cursor, if the cursor is on one.
    public var selectedField: Field? {
        guard rows.indices.contains(cursor), case .field(let field) = rows[cursor] else { return nil }
        return field
    }

    private var properties: JSONObject { metadata.schemaDocument["properties"]?.objectValue ?? [:] }

    private func rows(of screen: Screen) -> [Row] {
        switch screen {
        case .root:
            var rows: [Row] = []
            var placed: Set<String> = []
            for item in metadata.layout { rows += self.rows(of: item, base: .root, schemaProperties: properties, placed: &placed) }
            let rest = metadata.settingKeys.filter { !placed.contains($0) }
            if !rest.isEmpty {
                if !metadata.layout.isEmpty { rows.append(.title("Other")) }
                for key in rest { rows.append(.field(field(key, base: .root, schema: properties[key] ?? [:]))) }
            }
            return rows
        case .pane(_, let items, let base):
            var placed: Set<String> = []
            let scope = base.isRoot ? properties : itemProperties(of: base)
            return items.flatMap { rows(of: $0, base: base, schemaProperties: scope, placed: &placed) }
        case .list(let key, _, let itemLayout):
            let count = value(at: key)?.arrayValue?.count ?? 0
            let writable = isWritable(key)
            return (0..<count).map { Row.listItem(list: key, index: $0, itemLayout: itemLayout) } + (writable ? [.addItem(list: key)] : [])
        case .item(let list, let index, let itemLayout):
            let base = list.appending(index: index)
            let scope = itemProperties(of: base)
            var placed: Set<String> = []
            var rows = itemLayout.flatMap { self.rows(of: $0, base: base, schemaProperties: scope, placed: &placed) }
            for key in scope.keys.sorted() where !placed.contains(key) {
                rows.append(.field(field(key, base: base, schema: scope[key] ?? [:])))
            }
            return rows
        }
    }

    /// The properties of the items of the list `pointer` is an item of (or the list itself).
    private func itemProperties(of pointer: JSONPointer) -> JSONObject {
        guard let key = pointer.tokens.first else { return properties }
        return properties[key]?["items"]?["properties"]?.objectValue ?? [:]
    }

    private func rows(of item: LayoutItem, base: JSONPointer, schemaProperties: JSONObject, placed: inout Set<String>) -> [Row] {
        switch item {
        case .group(let title, let items):
            return [.title(title)] + items.flatMap { rows(of: $0, base: base, schemaProperties: schemaProperties, placed: &placed) }
        case .header(let title):
            return [.header(title)]
        case .setting(let key):
            placed.insert(key)
            return [.field(field(key, base: base, schema: schemaProperties[key] ?? [:]))]
        case .pane(let title, let items):
            items.forEach { Self.collect($0, into: &placed) }
            return [.opens(title: title, screen: .pane(title: title, items: items, base: base))]
        case .list(let key, let items):
            placed.insert(key)
            let title = schemaProperties[key]?["title"]?.stringValue ?? key
            return [.opens(title: title, screen: .list(key: base.appending(key), title: title, itemLayout: items))]
        }
    }

    private static func collect(_ item: LayoutItem, into placed: inout Set<String>) {
        switch item {
        case .setting(let key), .list(let key, _): placed.insert(key)
        case .group(_, let items), .pane(_, let items): items.forEach { collect($0, into: &placed) }
        case .header: break
        }
    }

    private func field(_ key: String, base: JSONPointer, schema: JSONValue) -> Field {
        let pointer = base.appending(key)
        let control: SettingControl
        if base.isRoot {
            control = SettingControl.of(key, in: metadata)
        } else if schema["x-secret"] == .bool(true) {
            control = schema["type"] == .string("string") && schema["enum"] == nil ? .secret : .protected
        } else {
            control = SettingControl.containsSecret(schema) ? .protected : SettingControl.of(schema: schema, secret: false)
        }
        let title = schema["title"]?.stringValue ?? ""
        return Field(
            pointer: pointer, label: title.isEmpty || title == key ? key : "\(title) [\(key)]", schema: schema, control: control,
            editable: isWritable(pointer) && control != .protected)
    }

    /// The schema of each item of the list at `list`.
    public func itemSchema(of list: JSONPointer) -> JSONValue {
        properties[list.tokens.first ?? ""]?["items"] ?? [:]
    }

    /// Whether the device may change the setting `pointer` is inside.
    public func isWritable(_ pointer: JSONPointer) -> Bool {
        pointer.tokens.first.map(metadata.writableKeys.contains) ?? false
    }

    // MARK: - Keys

    /// Takes one key; returns what the caller should do, if anything.
    public mutating func handle(_ key: EditorKey) -> Effect? {
        switch mode {
        case .typing(let field, let text, let before): return type(key, into: field, text: text, before: before)
        case .choosing(let field, let index): return choose(key, for: field, at: index)
        case .browsing: return browse(key)
        }
    }

    private mutating func browse(_ key: EditorKey) -> Effect? {
        if key != .character("q") { quitAsked = false }
        status = ""
        switch key {
        case .up, .character("k"): moveCursor(by: -1)
        case .down, .character("j"), .tab: moveCursor(by: 1)
        case .pageUp: moveCursor(by: -10)
        case .pageDown: moveCursor(by: 10)
        case .home: moveCursor(by: -rows.count)
        case .end: moveCursor(by: rows.count)
        case .enter, .right, .character(" "): activate(key)
        case .left, .escape: goBack()
        case .character("a"): addItem()
        case .character("d"), .delete: removeItem()
        case .character("["): moveItem(by: -1)
        case .character("]"): moveItem(by: 1)
        case .character("s"), .control("s"): return save()
        case .character("q"), .control("c"):
            if changedKeys.isEmpty || quitAsked || key == .control("c") { return .quit }
            quitAsked = true
            status = "\(changedKeys.count) unsaved change(s): q again leaves without saving, s saves"
        default: break
        }
        return nil
    }

    private mutating func moveCursor(by delta: Int) {
        let selectable = rows.indices.filter { rows[$0].isSelectable }
        guard !selectable.isEmpty else { return }
        let position = selectable.firstIndex(of: cursor) ?? 0
        cursor = selectable[min(max(position + delta, 0), selectable.count - 1)]
    }

    private mutating func activate(_ key: EditorKey) {
        guard rows.indices.contains(cursor) else { return }
        switch rows[cursor] {
        case .field(let field):
            guard field.editable else {
                status = "\(field.label) is read-only here" + (sources[field.pointer.tokens.first ?? ""].map { ": set by \($0)" } ?? "")
                return
            }
            switch field.control {
            case .toggle:
                set(.bool(!(value(at: field.pointer)?.boolValue ?? false)), at: field.pointer)
            case .choice(let options, _):
                mode = .choosing(field, index: options.firstIndex(of: value(at: field.pointer) ?? .null) ?? 0)
            case .secret:
                mode = .typing(field, text: "", before: value(at: field.pointer))
            case .integer, .number, .text, .json:
                guard key != .character(" ") else { return }
                mode = .typing(
                    field, text: Self.text(of: value(at: field.pointer), control: field.control), before: value(at: field.pointer))
            case .protected:
                break
            }
        case .opens(_, let screen):
            open(screen)
        case .listItem(let list, let index, let itemLayout):
            open(.item(list: list, index: index, itemLayout: itemLayout))
        case .addItem:
            addItem()
        case .title, .header:
            break
        }
    }

    private mutating func open(_ screen: Screen) {
        stack.append(screen)
        cursor = rows.firstIndex(where: \.isSelectable) ?? 0
    }

    private mutating func goBack() {
        guard stack.count > 1 else { return }
        let left = stack.removeLast()
        // The cursor goes back to the row that opened the screen.
        cursor =
            rows.firstIndex { row in
                switch (row, left) {
                case (.opens(_, let screen), _): screen == left
                case (.listItem(let list, let index, _), .item(let itemList, let itemIndex, _)): list == itemList && index == itemIndex
                default: false
                }
            } ?? (rows.firstIndex(where: \.isSelectable) ?? 0)
    }

    /// The list the current screen shows, when it is one (and writable).
    private var currentList: JSONPointer? {
        guard case .list(let key, _, _)? = stack.last, isWritable(key) else { return nil }
        return key
    }

    private mutating func addItem() {
        guard let list = currentList, case .list(_, _, let itemLayout)? = stack.last else { return }
        var items = value(at: list)?.arrayValue ?? []
        let itemSchema = properties[list.tokens.first ?? ""]?["items"] ?? [:]
        items.append(itemSchema["default"] ?? (itemSchema["type"] == "object" ? .object([:]) : .string("")))
        set(.array(items), at: list)
        open(.item(list: list, index: items.count - 1, itemLayout: itemLayout))
        status = "item \(items.count) added"
    }

    private mutating func removeItem() {
        guard let list = currentList, case .listItem(_, let index, _) = rows[cursor] else { return }
        var items = value(at: list)?.arrayValue ?? []
        items.remove(at: index)
        set(.array(items), at: list)
        cursor = min(cursor, max(0, rows.count - 1))
        status = "item \(index + 1) removed"
    }

    private mutating func moveItem(by delta: Int) {
        guard let list = currentList, case .listItem(_, let index, _) = rows[cursor] else { return }
        var items = value(at: list)?.arrayValue ?? []
        let target = index + delta
        guard items.indices.contains(target) else { return }
        items.swapAt(index, target)
        set(.array(items), at: list)
        cursor += delta
        status = "item \(index + 1) moved to \(target + 1)"
    }

    private mutating func type(_ key: EditorKey, into field: Field, text: String, before: JSONValue?) -> Effect? {
        var text = text
        switch key {
        case .character(let character): text.append(character)
        case .backspace: if !text.isEmpty { text.removeLast() }
        case .escape:
            set(before, at: field.pointer)
            mode = .browsing
            return nil
        case .enter, .tab:
            if errors[field.pointer] == nil { mode = .browsing }
            return nil
        default: return nil
        }
        mode = .typing(field, text: text, before: before)
        // Checked as it is typed: a value that reads goes into the draft and the schema judges it.
        switch Self.read(text, control: field.control) {
        case .success(let value):
            set(value, at: field.pointer)
        case .failure(let problem):
            errors[field.pointer] = problem.message
        }
        return nil
    }

    private mutating func choose(_ key: EditorKey, for field: Field, at index: Int) -> Effect? {
        guard case .choice(let options, _) = field.control else { return nil }
        switch key {
        case .up, .character("k"): mode = .choosing(field, index: max(0, index - 1))
        case .down, .character("j"): mode = .choosing(field, index: min(options.count - 1, index + 1))
        case .enter, .character(" "):
            set(options[index], at: field.pointer)
            mode = .browsing
        case .escape, .left: mode = .browsing
        default: break
        }
        return nil
    }

    private mutating func save() -> Effect? {
        let changed = changedKeys
        guard !changed.isEmpty else {
            status = "nothing to save"
            return nil
        }
        guard errors.isEmpty else {
            status = "not saved: \(errors.count) value(s) do not fit their schema"
            return nil
        }
        var patch = JSONObject()
        // Only the places edited become the device's own (key-path values); the rest of each
        // setting keeps following the fleet.
        for key in changed {
            for (name, value) in KeyPathValues.changes(from: original[key], to: draft[key], setting: key) { patch[name] = value }
        }
        status = "saving \(changed.joined(separator: ", "))…"
        return .save(patch)
    }

    /// The server confirmed the change and the agent wrote `values` at `revision`.
    public mutating func saved(revision: Int64, values: JSONObject) {
        self.revision = revision
        original = values
        draft = values
        validate()
        status = "saved: revision \(revision)"
    }

    // MARK: - Values

    private mutating func set(_ value: JSONValue?, at pointer: JSONPointer) {
        if let updated = try? JSONValue.object(draft).setting(value, at: pointer), case .object(let object) = updated {
            draft = object
        } else if value == nil, pointer.tokens.count == 1 {
            draft[pointer.tokens[0]] = nil
        }
        validate()
    }

    private mutating func validate() {
        errors = [:]
        for error in metadata.validate(values: .object(draft)) where errors[error.instanceLocation] == nil {
            errors[error.instanceLocation] = error.message
        }
    }

    /// The message for `pointer`: its own, or one about a value inside it.
    public func error(at pointer: JSONPointer) -> String? {
        if let own = errors[pointer] { return own }
        return errors.first { $0.key.tokens.starts(with: pointer.tokens) }.map { "\($0.key.keyPath): \($0.value)" }
    }

    /// A value as it is typed.
    static func text(of value: JSONValue?, control: SettingControl) -> String {
        guard let value else { return "" }
        if case .text = control, case .string(let text) = value { return text }
        return value.serialized()
    }

    struct ReadProblem: Error { let message: String }

    /// What typed text means for a field of `control`.
    static func read(_ text: String, control: SettingControl) -> Result<JSONValue, ReadProblem> {
        switch control {
        case .text, .secret: return .success(.string(text))
        case .integer:
            guard let number = Int64(text) else { return .failure(ReadProblem(message: "must be a whole number")) }
            return .success(.number(.integer(number)))
        case .number:
            guard let number = Double(text), number.isFinite else { return .failure(ReadProblem(message: "must be a number")) }
            return .success(.number(.double(number)))
        case .json, .toggle, .choice, .protected:
            guard let value = try? JSONParser.parse(Array(text.utf8)) else { return .failure(ReadProblem(message: "must be JSON")) }
            return .success(value)
        }
    }
}
