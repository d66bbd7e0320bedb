import FleetJSON
import FleetMetadata

/// One difference between two metadata versions, as an admin reviews it before an upload.
public enum MetadataDifference: Sendable, Hashable {
    case added(key: String, schema: JSONValue)
    case removed(key: String)
    case changed(key: String, before: JSONValue, after: JSONValue)
    case layoutChanged
    case titleChanged(before: String?, after: String?)

    /// The differences from `old` (`nil`: nothing stored) to `new`, settings in the new
    /// schema's order, then removed ones, then the layout and the title.
    public static func between(_ old: Metadata?, _ new: Metadata) -> [MetadataDifference] {
        let before = old?.schemaDocument["properties"]?.objectValue ?? [:]
        let after = new.schemaDocument["properties"]?.objectValue ?? [:]
        var differences: [MetadataDifference] = []
        for key in new.settingKeys {
            guard let schema = after[key] else { continue }
            if let previous = before[key] {
                if previous != schema { differences.append(.changed(key: key, before: previous, after: schema)) }
            } else {
                differences.append(.added(key: key, schema: schema))
            }
        }
        for key in old?.settingKeys ?? [] where after[key] == nil { differences.append(.removed(key: key)) }
        if let old, old.layout != new.layout { differences.append(.layoutChanged) }
        let oldTitle = old?.document["title"]?.stringValue
        let newTitle = new.document["title"]?.stringValue
        if old != nil, oldTitle != newTitle { differences.append(.titleChanged(before: oldTitle, after: newTitle)) }
        return differences
    }

    /// The difference for a person.
    public var html: HTML {
        switch self {
        case .added(let key, let schema):
            "<span class=\"diff-added\">adds</span> <code>\(key)</code>: <code>\(SettingsForm.short(schema))</code>"
        case .removed(let key):
            "<span class=\"diff-removed\">removes</span> <code>\(key)</code>"
        case .changed(let key, let before, let after):
            """
            <span class="diff-changed">changes</span> <code>\(key)</code>: <del><code>\(SettingsForm.short(before))</code></del> → <ins><code>\(SettingsForm.short(after))</code></ins>
            """
        case .layoutChanged:
            "<span class=\"diff-changed\">changes</span> the layout"
        case .titleChanged(let before, let after):
            "<span class=\"diff-changed\">changes</span> the title from \(before ?? "none") to \(after ?? "none")"
        }
    }
}
