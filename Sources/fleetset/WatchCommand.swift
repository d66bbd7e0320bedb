import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetSettings

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset watch [--app ID]`.
struct WatchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Print one JSON line per new revision of the settings, until interrupted.",
        discussion: """
            Each line: {"app", "revision", "previousRevision", "schemaVersion", "changed": [keys], \
            "values": {key: new value}}, the values of x-secret settings masked. Without --app, \
            every configured app is watched. Lines are flushed at once, for pipes.
            """)

    @OptionGroup var device: DeviceOptions

    func run() async throws {
        let configuration = try device.configuration()
        let apps = try device.selectedApps(in: configuration).map { device.fleetApp($0, configuration) }
        for app in apps {
            // Watching a file this user cannot read would print nothing, forever.
            let path = configuration.layout.settingsFile(app.id).path
            if access(path, F_OK) == 0, access(path, R_OK) != 0 {
                StandardError.write("fleetset watch: cannot read \(path) (join the app's readers group)")
                throw CLIExit.usageOrIO
            }
        }
        await withTaskGroup(of: Void.self) { group in
            for app in apps {
                group.addTask {
                    let start = try? app.settings()
                    for await change in app.changes(after: start?.revision) {
                        Self.printLine(Self.line(for: change, maskedValues: app.maskedValues(of: change.settings)))
                    }
                }
            }
        }
    }

    /// The JSON line for a change, from the new values with their secrets masked.
    static func line(for change: SettingsChange, maskedValues: JSONObject) -> JSONValue {
        var values = JSONObject()
        for key in change.changedKeys { values[key] = maskedValues[key] ?? .null }
        return [
            "app": .string(change.settings.app), "revision": .number(.integer(change.settings.revision)),
            "previousRevision": change.previousRevision.map { .number(.integer($0)) } ?? .null,
            "schemaVersion": .number(.integer(change.settings.schemaVersion)),
            "changed": .array(change.changedKeys.map(JSONValue.string)), "values": .object(values),
        ]
    }

    static func printLine(_ line: JSONValue) {
        print(TerminalText.serialized(line))
        fflush(nil)
    }
}
