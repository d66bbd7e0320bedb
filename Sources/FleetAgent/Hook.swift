import ChildProcess
import FleetAgentCore
import FleetDeviceFiles
import FleetJSON
import FleetMetadata

/// The `onChange` command of an app, run after each apply.
///
/// The command gets a fixed, small environment (not the agent's own): `PATH`, `FLEETSET_APP`,
/// `FLEETSET_REVISION`, `FLEETSET_SCHEMA_VERSION` and `FLEETSET_SETTINGS_FILE`. Its output is
/// kept (the last 2 KiB) for the report when it fails, with every secret value of the settings
/// replaced by `********`.
struct Hook: Sendable {
    let command: [String]
    let timeout: Duration

    /// What a run came to: `nil` when it succeeded, else why not; or cancelled.
    enum Outcome: Sendable, Equatable {
        case succeeded
        case failed(String)
        case cancelled
    }

    /// Runs the command for `settings` (written to `settingsFile`); `secrets` are redacted
    /// from its output.
    func run(for settings: DeviceSettings, settingsFile: String, secrets: [String]) async -> Outcome {
        let environment = [
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "FLEETSET_APP=\(settings.app)",
            "FLEETSET_REVISION=\(settings.revision)",
            "FLEETSET_SCHEMA_VERSION=\(settings.schemaVersion)",
            "FLEETSET_SETTINGS_FILE=\(settingsFile)",
        ]
        let result: ChildProcess.Result
        do {
            result = try await ChildProcess.run(command, environment: environment, timeout: timeout)
        } catch {
            return .failed("hook failed: \(error)")
        }
        if result.cancelled { return .cancelled }
        if result.succeeded { return .succeeded }
        var reason: String
        if result.timedOut {
            reason = "hook \(command[0]) did not finish within \(Self.seconds(timeout)) and was stopped"
        } else {
            switch result.termination {
            case .exited(let status): reason = "hook \(command[0]) exited with status \(status)"
            case .signaled(let signal): reason = "hook \(command[0]) was killed by signal \(signal)"
            }
        }
        let output = Self.redact(result.output, secrets: secrets).split(whereSeparator: \.isNewline).suffix(3).joined(separator: " | ")
        if !output.isEmpty { reason += ": " + output }
        return .failed(reason)
    }

    /// `30 s`, `0.5 s`.
    static func seconds(_ duration: Duration) -> String {
        let milliseconds = duration.milliseconds
        return milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(duration.secondsValue) s"
    }

    /// `text` with every occurrence of a secret replaced by `********`.
    static func redact(_ text: String, secrets: [String]) -> String {
        var result = text
        for secret in secrets.sorted(by: { $0.count > $1.count }) where !secret.isEmpty {
            result = result.replacing(secret, with: SettingsValues.mask.stringValue ?? "")
        }
        return result
    }

    /// The string values of the settings marked `x-secret` (top-level strings, and strings inside
    /// secret objects and arrays).
    static func secretStrings(in values: JSONObject, secretKeys: Set<String>) -> [String] {
        var found: [String] = []
        func collect(_ value: JSONValue) {
            switch value {
            case .string(let text): found.append(text)
            case .array(let items): items.forEach(collect)
            case .object(let object): for (_, member) in object { collect(member) }
            default: break
            }
        }
        for key in secretKeys { if let value = values[key] { collect(value) } }
        return found
    }
}
