import ChildProcess
import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `onChange` command of an app, run after each apply.
///
/// A hook runs with the agent's rights: it can read the device's token and every app's
/// settings and write every inbox. So before each run the program is checked as sshd's
/// `StrictModes` checks a user's files (``TrustedPath``): the program, every directory above
/// it and every link on the way must be owned by root or the agent's user and writable by no
/// one else. One that is not is not run; the revision is reported `error` with the path and
/// what is wrong, as a failed hook is.
///
/// The command gets a small environment of its own, nothing else of the agent's: `PATH` (a
/// fixed minimal one), the agent's `LANG` and `LC_*` when set, `FLEETSET_APP`,
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
        if let refusal = Self.refusal(of: command, trusting: .rootAndEffectiveUser()) { return .failed(refusal) }
        let environment = Self.environment(for: settings, settingsFile: settingsFile, locale: Self.agentLocale)
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

    /// The `PATH` a hook gets.
    static let path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

    /// Why `command` must not run with the agent's rights, `nil` when it may: its program, and
    /// every argument that is an absolute path to an existing regular file (a script given to an
    /// interpreter, `["/bin/sh", "/opt/kiosk/reload.sh"]`), each checked as a program is.
    static func refusal(of command: [String], trusting owners: TrustedOwners) -> String? {
        guard let program = command.first else { return nil }
        if let refusal = refusal(of: program, trusting: owners) { return refusal }
        for argument in command.dropFirst() where argument.hasPrefix("/") {
            var status = stat()
            guard stat(argument, &status) == 0, status.st_mode & S_IFMT == S_IFREG else { continue }
            if let refusal = refusal(of: argument, trusting: owners) { return refusal }
        }
        return nil
    }

    /// Why `program` must not run with the agent's rights, `nil` when it may. A program that
    /// cannot be found is reported as a failed start is (`hook failed: cannot run …: No such
    /// file or directory`).
    static func refusal(of program: String, trusting owners: TrustedOwners) -> String? {
        do {
            _ = try TrustedPath.resolveProgram(program, trusting: owners)
            return nil
        } catch {
            switch error {
            case .unresolvable(let failure):
                return "hook failed: cannot run \(program): \(String(cString: strerror(failure.code)))"
            case .untrusted(let problem):
                return "hook \(program): \(problem); a hook runs with the agent's rights, so it and every directory above it "
                    + "must be owned by \(owners) and writable by no one else"
            case .notAbsolute, .notARegularFile:
                return "hook failed: cannot run \(program): \(error)"
            }
        }
    }

    /// The hook's whole environment: the fixed `PATH`, `locale` (the agent's locale variables),
    /// and the `FLEETSET_*` variables that describe the apply.
    static func environment(for settings: DeviceSettings, settingsFile: String, locale: [String]) -> [String] {
        ["PATH=\(path)"] + locale + [
            "FLEETSET_APP=\(settings.app)",
            "FLEETSET_REVISION=\(settings.revision)",
            "FLEETSET_SCHEMA_VERSION=\(settings.schemaVersion)",
            "FLEETSET_SETTINGS_FILE=\(settingsFile)",
        ]
    }

    /// The variables of `environment` (`NAME=value` strings) a hook inherits: `LANG` and
    /// `LC_*`. Nothing else of the agent's passes (no `NOTIFY_SOCKET`, `CREDENTIALS_DIRECTORY`,
    /// `INVOCATION_ID`, proxy settings, …).
    static func localeVariables(in environment: [String]) -> [String] {
        environment.filter { variable in
            guard let equals = variable.firstIndex(of: "=") else { return false }
            let name = variable[..<equals]
            return name == "LANG" || name.hasPrefix("LC_")
        }
    }

    /// The agent's locale variables, read from its environment once.
    static let agentLocale: [String] = {
        var variables: [String] = []
        var entry = environ
        while let variable = entry.pointee {
            variables.append(String(cString: variable))
            entry += 1
        }
        return localeVariables(in: variables)
    }()
}
