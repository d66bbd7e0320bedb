import FleetAgent
import FleetDeviceFiles
import FleetDeviceState
import FleetLogging
import Logging
import ServiceLifecycle
import SystemdNotify
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// `fleetsetd`: the fleetset agent, one per device, run by systemd (`Type=notify`).
///
/// Its command line is parsed by hand: swift-argument-parser would link FoundationEssentials
/// into the agent (measured: 5 MB of binary and 2 MB of resident memory) for four options.
@main
struct Fleetsetd {
    static let usage = """
        usage: fleetsetd [--config FILE] [--check-config] [--version] [--help]

        Keeps this device's app settings true to the fleetset server: serves each app's settings
        from disk, long-polls the server for changes, validates, persists, runs the app's hook and
        reports the outcome. SIGHUP re-reads the configuration and syncs now; SIGTERM stops. Logs go
        to standard error (with journald priorities under systemd).

          --config FILE    the configuration file (default: \(AgentConfiguration.defaultPath))
          --check-config   check the configuration file and exit (0 when it is valid)
          --version        print the version and exit
          --help           print this and exit

        Exit status: 0 after SIGTERM, 2 for a bad command line or a configuration that cannot be used.
        """

    /// What the command line asks for.
    enum Invocation: Equatable {
        case run(configurationPath: String, checkOnly: Bool)
        case help
        case version
    }

    /// Reads the arguments (without the program name); `nil` when they make no sense.
    static func parse(_ arguments: [String]) -> Invocation? {
        var path = AgentConfiguration.defaultPath
        var checkOnly = false
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            switch argument {
            case "--help", "-h": return .help
            case "--version": return .version
            case "--check-config": checkOnly = true
            case "--config":
                guard let value = rest.popFirst(), !value.isEmpty else { return nil }
                path = value
            default:
                guard argument.hasPrefix("--config="), argument.count > "--config=".count else { return nil }
                path = String(argument.dropFirst("--config=".count))
            }
        }
        return .run(configurationPath: path, checkOnly: checkOnly)
    }

    static func main() async {
        switch parse(Array(CommandLine.arguments.dropFirst())) {
        case nil:
            LogfmtLogHandler.standardError(
                "fleetsetd: unknown arguments \(CommandLine.arguments.dropFirst().joined(separator: " "))\n\n\(usage)\n")
            exit(2)
        case .help:
            print(usage)
        case .version:
            print("fleetsetd \(Agent.version)")
        case .run(let path, let checkOnly):
            exit(await run(configurationPath: path, checkOnly: checkOnly))
        }
    }

    static func run(configurationPath: String, checkOnly: Bool) async -> Int32 {
        let configuration: AgentConfiguration
        do {
            configuration = try AgentConfiguration.load(configurationPath)
        } catch {
            LogfmtLogHandler.standardError("fleetsetd: \(error)\n")
            return 2
        }
        if checkOnly {
            print(
                "\(configurationPath): valid, \(configuration.apps.count) app(s): \(configuration.apps.map(\.id).joined(separator: ", "))")
            return 0
        }
        umask(0o027)
        signal(SIGPIPE, SIG_IGN)
        let level = Logger.Level(rawValue: configuration.logLevel) ?? .info
        let style: LogfmtLogHandler.Style = SystemdNotifier.standardErrorIsJournal() ? .journald : .timestamped
        let levelSwitch = LogLevelSwitch(level)
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(levelSwitch: levelSwitch, style: style) }
        let logger = Logger(label: "fleetsetd")
        let agent = Agent(
            configurationPath: configurationPath, configuration: configuration, notifier: SystemdNotifier.fromEnvironment(),
            watchdogInterval: SystemdNotifier.watchdogInterval(), logger: logger,
            applyLogLevel: { levelSwitch.set(Logger.Level(rawValue: $0) ?? .info) })
        var quiet = Logger(label: "fleetsetd.lifecycle")
        quiet.logLevel = .warning
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [.init(service: agent)], gracefulShutdownSignals: [.sigterm, .sigint], logger: quiet))
        do {
            try await group.run()
            return 0
        } catch {
            logger.critical("stopped by an error", metadata: ["event": "fatal", "error": "\(error)"])
            return 1
        }
    }
}
