import ArgumentParser
import FleetIO
import FleetJSON
import FleetVersion

#if canImport(Glibc)
import Glibc
#endif

/// The `fleetset` command: the device CLI for apps, scripts and operators.
///
/// Exit codes, for every subcommand: 0 success; 1 the input is invalid (a schema test failed,
/// a document does not validate); 2 a usage error or a file that cannot be read.
@main
struct Fleetset: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetset",
        abstract: "Manage and check app settings on a fleetset device.",
        discussion: """
            get, show, status, set, ack, watch, sync and explain use the agent's files, found \
            through its configuration (--config, default /etc/fleetset/fleetsetd.json); admin talks \
            to the server. Exit status: 0 on success, 1 when the input is invalid or refused, 2 on \
            usage or I/O errors, 3 when set --wait timed out with the change still pending.
            """,
        version: FleetVersion.current,
        subcommands: [
            GetCommand.self, ShowCommand.self, StatusCommand.self, SetCommand.self, EditCommand.self, AckCommand.self, WatchCommand.self,
            SyncCommand.self,
            ExplainCommand.self, DeviceInfoCommand.self, SchemaCommand.self, MetadataCommand.self, SettingsCommand.self,
            AdminCommand.self,
        ]
    )

    /// Runs the command line, mapping argument errors to exit code 2 (ArgumentParser's own
    /// default, 64, is not what scripts expect from fleetset).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? any AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            guard code == .validationFailure else { exit(withError: error) }
            let message = fullMessage(for: error)
            StandardError.write(message)
            // `admin plan` keeps 2 for "changes": its usage errors are errors, 1.
            let plan = CommandLine.arguments.dropFirst().prefix(2).elementsEqual(["admin", "plan"])
            Glibc.exit(plan ? 1 : CLIExit.usageOrIO.rawValue)
        }
    }
}

/// fleetset's exit codes.
enum CLIExit {
    /// The input is invalid.
    static let invalidInput = ExitCode(1)
    /// A usage error or an unreadable file.
    static let usageOrIO = ExitCode(2)
    /// `set --wait`: the change is still pending when the timeout passed.
    static let pending = ExitCode(3)
    /// `set --wait`: a later change of the same setting took this one's place before it was
    /// sent; what it asked for never reached the server.
    static let superseded = ExitCode(4)
}

/// Writing to the standard streams without Foundation.
enum StandardError {
    /// Writes `text` and a line break. A diagnostic may quote what the server, a device or the
    /// metadata said: it is shown through ``TerminalText/escaped(_:keepingNewlinesAndTabs:)``
    /// (its own line breaks kept).
    static func write(_ text: String) {
        let shown = TerminalText.escaped(text, keepingNewlinesAndTabs: true)
        let line = shown.hasSuffix("\n") ? shown : shown + "\n"
        var bytes = Array(line.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { buffer in
                retryingOnInterrupt { Glibc.write(STDERR_FILENO, buffer.baseAddress, buffer.count) }
            }
            guard written > 0 else { return }
            bytes = bytes.dropFirst(written)
        }
    }
}
