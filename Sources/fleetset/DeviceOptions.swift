import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetMetadata
import FleetSettings

#if canImport(Glibc)
import Glibc
#endif

/// `--config` and `--app`, shared by the device-side commands: they find the agent's
/// directories through the agent's own configuration file.
struct DeviceOptions: ParsableArguments {
    @Option(name: .customLong("config"), help: "The agent's configuration file.")
    var configurationPath: String = AgentConfiguration.defaultPath

    @Option(help: "The app (default: the only app configured).")
    var app: String?

    /// The agent's configuration; an unusable one exits with 2.
    ///
    /// Run as root, only a file owned by root or the agent's user (`fleetset`) and writable by
    /// no one else is used (``configurationOwners``): it names the server `explain` and `edit`
    /// send the device's token to, and the directories every command reads and writes as root.
    func configuration() throws -> AgentConfiguration {
        let owners = geteuid() == 0 ? Self.configurationOwners : nil
        do throws(ConfigurationError) {
            return try AgentConfiguration.load(configurationPath, trusting: owners)
        } catch {
            if let problem = error.untrusted, let owners {
                StandardError.write(
                    "fleetset: refusing \(configurationPath): it \(problem.detail); as root, fleetset uses only a "
                        + "configuration owned by \(owners) and writable by no one else: the file names the server that gets this "
                        + "device's token and the directories root reads and writes")
            } else {
                StandardError.write("fleetset: \(error)")
            }
            throw CLIExit.usageOrIO
        }
    }

    /// Root and the agent's system user `fleetset` (root alone when there is no such user).
    static var configurationOwners: TrustedOwners {
        TrustedOwners(user: AccountLookup.userID(of: "fleetset"), userName: "fleetset")
    }

    /// The one app the command is about: `--app`, or the only one configured.
    func selectedApp(in configuration: AgentConfiguration) throws -> AppConfiguration {
        let configured = configuration.apps.map(\.id).joined(separator: ", ")
        if let app {
            guard let found = configuration.app(app) else {
                StandardError.write("fleetset: no app \"\(app)\" in \(configurationPath) (configured: \(configured))")
                throw CLIExit.usageOrIO
            }
            return found
        }
        guard configuration.apps.count == 1 else {
            StandardError.write("fleetset: several apps are configured; choose one with --app (\(configured))")
            throw CLIExit.usageOrIO
        }
        return configuration.apps[0]
    }

    /// `--app`'s app, or every app when it is not given.
    func selectedApps(in configuration: AgentConfiguration) throws -> [AppConfiguration] {
        app == nil ? configuration.apps : [try selectedApp(in: configuration)]
    }

    /// The app's settings on disk and the metadata they were validated with; exits with 1 when
    /// the agent has not written them yet (the metadata tells secrets apart and checks changes,
    /// so no command goes on without it).
    func settings(of app: AppConfiguration, in configuration: AgentConfiguration) throws -> (DeviceSettings, Metadata) {
        let layout = configuration.layout
        let found = SettingsOnDisk.load(layout.settingsFile(app.id), app: app.id)
        guard let settings = found.settings else {
            let why = found.problems.isEmpty ? "the agent has not received any yet" : found.problems.joined(separator: "; ")
            StandardError.write("fleetset: no settings for \(app.id) on this device: \(why)")
            throw CLIExit.invalidInput
        }
        guard let metadata = MetadataOnDisk.load(layout.metadataFile(app.id), version: settings.schemaVersion) else {
            StandardError.write(
                "fleetset: the metadata of \(app.id) version \(settings.schemaVersion) is missing on this device; it comes with the agent's next sync"
            )
            throw CLIExit.invalidInput
        }
        return (settings, metadata)
    }

    /// The app's files and inbox, for the FleetSettings library.
    func fleetApp(_ app: AppConfiguration, _ configuration: AgentConfiguration) -> FleetApp {
        FleetApp(app.id, stateDirectory: configuration.stateDirectory, inboxDirectory: configuration.inboxDirectory)
    }
}
