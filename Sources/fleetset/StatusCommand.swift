import ArgumentParser
import FleetDeviceFiles
import FleetJSON
import FleetProtocol

/// `fleetset status [--app ID] [--json]`.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what the agent last did for each app: revision, state, last sync, last error.",
        discussion: """
            Read from the agent's status.json files. STATE is the outcome of the newest revision \
            the server offered (applied, error, unsupported, or none yet); REVISION is what \
            settings.json holds. Exit status: 0 when every app shown is applied, 1 otherwise, 2 \
            for usage errors.
            """)

    @OptionGroup var device: DeviceOptions

    @Flag(help: "Print the status documents as a JSON array.")
    var json = false

    func run() throws {
        let configuration = try device.configuration()
        let apps = try device.selectedApps(in: configuration)
        let statuses = apps.map { app in AppStatus.load(configuration.layout.statusFile(app.id)) ?? AppStatus(app: app.id) }
        if json {
            print(JSONValue.array(statuses.map(\.json)).serialized(.pretty))
        } else {
            var rows = [["APP", "REVISION", "STATE", "LATEST", "LAST SYNC", "PENDING", "LAST ERROR"]]
            for status in statuses {
                rows.append([
                    status.app, status.revision.map(String.init) ?? "-", status.state.rawValue,
                    status.latestRevision.map(String.init) ?? "-", status.lastSync.map(Timestamp.format) ?? "never",
                    String(status.pendingReports), status.lastError ?? "-",
                ])
            }
            print(Table.render(rows))
        }
        guard statuses.allSatisfy({ $0.state == .applied }) else { throw CLIExit.invalidInput }
    }
}
