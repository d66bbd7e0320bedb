import FleetJSON

/// How a generated settings view arranges the settings: groups (tabs or sections), headers,
/// panes (boxes of related settings) and lists (the editor for an array-of-objects setting).
///
/// The layout only arranges; values stay flat. In JSON, `layout` is an array of:
///
/// | element | JSON | where |
/// |---|---|---|
/// | group | `{"group": "Home Screen", "items": [...]}` | top level only |
/// | header | `{"header": "Select Content to Display"}` | anywhere |
/// | setting | `{"setting": "duration"}` | a property of the enclosing scope |
/// | pane | `{"pane": "Media Settings", "items": [...]}` | anywhere |
/// | list | `{"list": "playlist", "items": [...]}` | an array setting; its items name the item object's properties |
public indirect enum LayoutItem: Sendable, Hashable {
    case group(title: String, items: [LayoutItem])
    case header(title: String)
    case setting(key: String)
    case pane(title: String, items: [LayoutItem])
    case list(key: String, items: [LayoutItem])

    /// The JSON form.
    public var json: JSONValue {
        switch self {
        case .group(let title, let items): ["group": .string(title), "items": .array(items.map(\.json))]
        case .header(let title): ["header": .string(title)]
        case .setting(let key): ["setting": .string(key)]
        case .pane(let title, let items): ["pane": .string(title), "items": .array(items.map(\.json))]
        case .list(let key, let items): ["list": .string(key), "items": .array(items.map(\.json))]
        }
    }

    /// Reads a `layout` member; problems go to `problems` with their pointers. `settings` is the
    /// schema whose `properties` the `setting` elements name.
    static func read(_ value: JSONValue?, settings: JSONValue, at pointer: JSONPointer, _ problems: inout MetadataProblems) -> [LayoutItem]
    {
        guard let value else { return [] }
        return readItems(value, scope: settings, topLevel: true, at: pointer, &problems)
    }

    private static func readItems(
        _ value: JSONValue, scope: JSONValue, topLevel: Bool, at pointer: JSONPointer, _ problems: inout MetadataProblems
    ) -> [LayoutItem] {
        guard case .array(let elements) = value else {
            problems.add(pointer, "must be an array of layout elements")
            return []
        }
        var items: [LayoutItem] = []
        for (position, element) in elements.enumerated() {
            if let item = readItem(element, scope: scope, topLevel: topLevel, at: pointer.appending(index: position), &problems) {
                items.append(item)
            }
        }
        return items
    }

    private static func readItem(
        _ element: JSONValue, scope: JSONValue, topLevel: Bool, at pointer: JSONPointer, _ problems: inout MetadataProblems
    ) -> LayoutItem? {
        guard case .object(let object) = element else {
            problems.add(pointer, "must be an object: {\"group\"|\"header\"|\"setting\"|\"pane\"|\"list\": …}")
            return nil
        }
        let kinds = ["group", "header", "setting", "pane", "list"].filter { object[$0] != nil }
        guard kinds.count == 1, let kind = kinds.first else {
            problems.add(pointer, "must have exactly one of group, header, setting, pane or list")
            return nil
        }
        guard case .string(let name)? = object[kind] else {
            problems.add(pointer.appending(kind), "must be a string")
            return nil
        }
        let allowedMembers: Set<String> = kind == "header" || kind == "setting" ? [kind] : [kind, "items"]
        for key in object.keys where !allowedMembers.contains(key) {
            problems.add(pointer.appending(key), "is not a member of a \(kind) element")
        }
        let children = object["items"] ?? .array([])
        switch kind {
        case "group":
            if !topLevel { problems.add(pointer, "a group may appear only at the top level of the layout") }
            return .group(title: name, items: readItems(children, scope: scope, topLevel: false, at: pointer.appending("items"), &problems))
        case "header":
            return .header(title: name)
        case "pane":
            return .pane(title: name, items: readItems(children, scope: scope, topLevel: false, at: pointer.appending("items"), &problems))
        case "setting":
            if scope["properties"]?[name] == nil {
                problems.add(pointer.appending("setting"), "\(JSONValue.string(name).serialized()) is not a property of the schema here")
            }
            return .setting(key: name)
        default:
            guard let property = scope["properties"]?[name] else {
                problems.add(pointer.appending("list"), "\(JSONValue.string(name).serialized()) is not a property of the schema here")
                return .list(key: name, items: [])
            }
            guard property["type"] == .string("array"), let itemSchema = property["items"] else {
                problems.add(
                    pointer.appending("list"), "\(JSONValue.string(name).serialized()) must be an array setting with an items schema")
                return .list(key: name, items: [])
            }
            return .list(
                key: name, items: readItems(children, scope: itemSchema, topLevel: false, at: pointer.appending("items"), &problems))
        }
    }
}
