import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// `fleetset show [--app ID]`.
struct ShowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "show",
        abstract: "Show an app's settings as the metadata's layout groups them, secrets masked.",
        discussion: """
            Each setting shows as its title, its key in brackets and its value; groups, headers, \
            panes and lists follow the metadata's layout, and settings the layout leaves out come \
            last under "Other". Values of settings marked x-secret show as ********.
            """)

    @OptionGroup var device: DeviceOptions

    func run() throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        let (settings, metadata) = try device.settings(of: app, in: configuration)
        print(SettingsView.render(settings, metadata: metadata))
    }
}

/// Settings as text, arranged by the metadata's layout. Each line is shown through
/// ``TerminalText/escaped(_:keepingNewlinesAndTabs:)``: titles, labels and values come from the
/// metadata and the server.
enum SettingsView {
    static func render(_ settings: DeviceSettings, metadata: Metadata) -> String {
        var lines = [
            "\(settings.app) · revision \(settings.revision) · schema version \(settings.schemaVersion) · synced \(Timestamp.format(settings.syncedAt))"
        ]
        let properties = metadata.schemaDocument["properties"]?.objectValue ?? [:]
        var shown: Set<String> = []
        let values = metadata.masked(settings.values)

        func label(_ key: String, in schemaProperties: JSONObject) -> String {
            let title = schemaProperties[key]?["title"]?.stringValue ?? ""
            return title.isEmpty || title == key ? key : "\(title) [\(key)]"
        }

        func renderItems(_ items: [LayoutItem], depth: Int) {
            let indent = String(repeating: "  ", count: depth)
            for item in items {
                switch item {
                case .group(let title, let children):
                    lines.append(title.isEmpty ? "(untitled group)" : title)
                    renderItems(children, depth: depth + 1)
                case .header(let title):
                    lines.append("\(indent)— \(title) —")
                case .setting(let key):
                    shown.insert(key)
                    lines.append("\(indent)\(label(key, in: properties)): \(text(values[key]))")
                case .pane(let title, let children):
                    lines.append("\(indent)\(title):")
                    renderItems(children, depth: depth + 1)
                case .list(let key, let columns):
                    shown.insert(key)
                    renderList(key, columns: columns, indent: indent)
                }
            }
        }

        func renderList(_ key: String, columns: [LayoutItem], indent: String) {
            let rows = values[key]?.arrayValue ?? []
            lines.append("\(indent)\(label(key, in: properties)): \(rows.count) item\(rows.count == 1 ? "" : "s")")
            let itemSchema = properties[key]?["items"]
            let itemProperties = itemSchema?["properties"]?.objectValue ?? [:]
            let secretColumns = Set(itemProperties.filter { $0.value["x-secret"] == .bool(true) }.map(\.key))
            let columnKeys = columns.compactMap { item -> String? in
                if case .setting(let column) = item { return column }
                return nil
            }
            for (index, row) in rows.enumerated() {
                let object = row.objectValue ?? [:]
                let keys = columnKeys.isEmpty ? object.keys : columnKeys
                let cells = keys.compactMap { column -> String? in
                    guard let value = object[column] else { return nil }
                    return "\(column) = \(secretColumns.contains(column) ? SettingsValues.mask.stringValue ?? "" : text(value))"
                }
                lines.append("\(indent)  \(index + 1). \(cells.joined(separator: ", "))")
            }
        }

        renderItems(metadata.layout, depth: 0)
        let rest = metadata.settingKeys.filter { !shown.contains($0) } + settings.values.keys.filter { properties[$0] == nil }
        if !rest.isEmpty {
            if !metadata.layout.isEmpty { lines.append("Other") }
            let depth = metadata.layout.isEmpty ? "" : "  "
            for key in rest { lines.append("\(depth)\(label(key, in: properties)): \(text(values[key]))") }
        }
        return lines.map { TerminalText.escaped($0) }.joined(separator: "\n")
    }

    private static func text(_ value: JSONValue?) -> String {
        guard let value else { return "(not set)" }
        return value.serialized(maximumLength: 200)
    }
}
