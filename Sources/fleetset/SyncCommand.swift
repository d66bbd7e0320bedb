import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState

/// `fleetset sync [--app ID]`.
struct SyncCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sync",
        abstract: "Ask the agent to contact the server now.",
        discussion: """
            Leaves a sync request in each app's inbox; the agent \
            picks it up at once and re-sends its settings request. Without --app, every configured \
            app syncs. Exit status: 0 requested, 2 when the inbox cannot be written (is fleetsetd \
            running, and may this user write to its inbox?).
            """)

    @OptionGroup var device: DeviceOptions

    func run() throws {
        let configuration = try device.configuration()
        for app in try device.selectedApps(in: configuration) {
            do {
                try InboxRequest.sync.submit(to: configuration.layout.inboxDirectory(app.id))
            } catch {
                StandardError.write("fleetset sync: \(error)")
                throw CLIExit.usageOrIO
            }
            print("sync requested for \(app.id)")
        }
    }
}
