import ChildProcess
import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata

/// The `onChange` command of an app, run after each apply.
///
/// The command gets a fixed, small environment (not the agent's own): `PATH`, `FLEETSET_APP`,
/// `FLEETSET_REVISION`, `FLEETSET_SCHEMA_VERSION` and `FLEETSET_SETTINGS_FILE`. Its output is
/// kept (the last 2 KiB) for the report when it fails, with every secret value of the settings
/// replaced by `********`.
struct Hook: Sendable {
    /// How much of a failing hook's output is kept, after redaction.
    static let outputLimit = 2048

    let command: [String]
    let timeout: Duration

    /// Runs the command for `settings` (written to `settingsFile`); `secrets` (the text of every
    /// scalar inside a secret) are redacted from its output before it is cut to size.
    func run(for settings: DeviceSettings, settingsFile: String, secrets: [String]) async -> HookOutcome {
        let environment = [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "FLEETSET_APP=\(settings.app)",
            "FLEETSET_REVISION=\(settings.revision)",
            "FLEETSET_SCHEMA_VERSION=\(settings.schemaVersion)",
            "FLEETSET_SETTINGS_FILE=\(settingsFile)",
        ]
        let result: ChildProcess.Result
        do {
            result = try await ChildProcess.run(
                command, environment: environment, timeout: timeout,
                outputLimit: OutputRedaction.bytesToKeep(limit: Self.outputLimit, secrets: secrets))
        } catch {
            return .failed("hook failed: \(error)")
        }
        if result.cancelled { return .cancelled }
        if result.succeeded { return .succeeded }
        var reason: String
        if result.timedOut {
            reason = "hook \(command[0]) did not finish within \(timeout.secondsText) and was stopped"
        } else {
            switch result.termination {
            case .exited(let status): reason = "hook \(command[0]) exited with status \(status)"
            case .signaled(let signal): reason = "hook \(command[0]) was killed by signal \(signal)"
            }
        }
        let output = OutputRedaction.redact(result.outputBytes, secrets: secrets, limit: Self.outputLimit, wasCut: result.outputWasCut)
            .split(whereSeparator: \.isNewline).suffix(3).joined(separator: " | ")
        if !output.isEmpty { reason += ": " + output }
        return .failed(reason)
    }
}
