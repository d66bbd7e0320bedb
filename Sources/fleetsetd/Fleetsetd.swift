import ArgumentParser
import FleetAgent
import FleetDeviceFiles
import FleetLogging
import Logging
import ServiceLifecycle
import SystemdNotify
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// `fleetsetd`: the fleetset agent, one per device, run by systemd (`Type=notify`).
@main
struct Fleetsetd: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetsetd",
        abstract: "Keep this device's app settings true to the fleetset server.",
        discussion: """
            Reads its configuration from --config (see Config/fleetsetd.json), serves each app's \
            settings from disk, then long-polls the server for changes, validates, persists, runs \
            the app's hook and reports the outcome. SIGHUP re-reads the configuration and syncs \
            now; SIGTERM stops. Logs go to standard error (with journald priorities under systemd). \
            Exit status: 0 after SIGTERM, 2 for a configuration that cannot be used.
            """,
        version: Agent.version)

    @Option(name: .customLong("config"), help: "The configuration file.")
    var configurationPath: String = AgentConfiguration.defaultPath

    @Flag(help: "Check the configuration file and exit (0 when it is valid).")
    var checkConfig = false

    func run() async throws {
        let configuration: AgentConfiguration
        do {
            configuration = try AgentConfiguration.load(configurationPath)
        } catch {
            LogfmtLogHandler.standardError("fleetsetd: \(error)\n")
            throw ExitCode(2)
        }
        if checkConfig {
            print("\(configurationPath): valid, \(configuration.apps.count) app(s): \(configuration.apps.map(\.id).joined(separator: ", "))")
            return
        }
        umask(0o027)
        signal(SIGPIPE, SIG_IGN)
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let style: LogfmtLogHandler.Style = SystemdNotifier.standardErrorIsJournal() ? .journald : .timestamped
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: level, style: style) }
        let logger = Logger(label: "fleetsetd")
        let notifier = SystemdNotifier.fromEnvironment()
        let agent = Agent(
            configurationPath: configurationPath, configuration: configuration, notifier: notifier,
            watchdogInterval: SystemdNotifier.watchdogInterval(), logger: logger)
        var quiet = Logger(label: "fleetsetd.lifecycle")
        quiet.logLevel = .warning
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: agent)], gracefulShutdownSignals: [.sigterm, .sigint], logger: quiet))
        try await group.run()
    }
}
