import ArgumentParser
import FleetClient
import FleetJSON
import FleetProtocol

/// How an admin write is made: why (for the history), forced past a running rollout, or staged
/// in waves. Shared by `admin set` and `admin clear`.
struct ChangeOptions: ParsableArguments {
    @Option(help: "Why, kept in the history (fleetset admin history).")
    var message: String = ""

    @Flag(help: "Write settings a running rollout stages: the new values go to every device at once.")
    var force = false

    @Option(
        help: ArgumentHelp(
            "Stage the change in waves, e.g. 5%,25%,100%, group:canary,100% or where:os.version=12,25%,100% (the last must be 100%).",
            valueName: "waves"),
        transform: { text in try ChangeOptions.waves(text) })
    var rollout: [RolloutWave]?

    @Option(help: "With --rollout: pause when error and unsupported reports exceed this share of the admitted devices (default 0%).")
    var pauseOnErrors: String?

    @Option(help: "With --rollout: how long each wave has to report, e.g. 90s, 10m, 2h (default 10m).")
    var waveWait: String?

    func validate() throws {
        if rollout == nil, pauseOnErrors != nil || waveWait != nil {
            throw ValidationError("--pause-on-errors and --wave-wait go with --rollout")
        }
        if rollout != nil, force { throw ValidationError("--force writes at once; it cannot be staged with --rollout") }
        _ = try threshold()
        _ = try waveWaitSeconds()
    }

    static func waves(_ text: String) throws -> [RolloutWave] {
        switch RolloutWave.list(text.split(separator: ",", omittingEmptySubsequences: false).map(String.init)) {
        case .success(let waves): return waves
        case .failure(let error): throw ValidationError("--rollout: \(error.message)")
        }
    }

    /// `--pause-on-errors` in basis points.
    func threshold() throws -> Int {
        guard let pauseOnErrors else { return RolloutRequest.defaultPauseOnErrors }
        if pauseOnErrors == "0%" || pauseOnErrors == "0" { return 0 }
        let text = pauseOnErrors.hasSuffix("%") ? pauseOnErrors : pauseOnErrors + "%"
        guard case .share(let basisPoints)? = RolloutWave(text) else {
            throw ValidationError("--pause-on-errors must be a share from 0% to 100%, e.g. 2% or 0.5%")
        }
        return basisPoints
    }

    /// `--wave-wait` in seconds.
    func waveWaitSeconds() throws -> Int64 {
        guard let waveWait else { return RolloutRequest.defaultWaveWait }
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        let unit = waveWait.last.flatMap { units[$0] }
        guard let number = Int64(unit == nil ? waveWait : String(waveWait.dropLast())), number > 0,
            case let seconds = number * (unit ?? 1), RolloutRequest.waveWaits.contains(seconds)
        else {
            throw ValidationError("--wave-wait must be a time from 5s to 7d, e.g. 90s, 10m or 2h")
        }
        return seconds
    }

    /// Sets (`value`) or removes (`nil`) one value inside a setting by key path, at once (a key
    /// path is never staged), and prints the scope's values.
    func apply(_ value: JSONValue?, at keyPath: JSONPointer, to target: ScopeOptions, through server: ServerOptions) async throws {
        guard rollout == nil else {
            StandardError.write(
                "fleetset admin: \(keyPath.keyPath) is inside \(keyPath.topLevelKey ?? "a setting"); a rollout stages whole settings: set \(keyPath.topLevelKey ?? "it") itself"
            )
            throw CLIExit.usageOrIO
        }
        let values = try await server.withClient {
            try await $0.setValue(app: target.app, scope: target.scope, keyPath: keyPath, to: value, message: message, force: force)
        }
        server.output(values.json) { ScopedValuesText.render(values) }
    }

    /// Sends `patch` to the scope (at once, or staged) and prints the outcome.
    func apply(_ patch: JSONObject, to target: ScopeOptions, through server: ServerOptions) async throws {
        guard let waves = rollout else {
            let values = try await server.withClient {
                try await $0.patchValues(app: target.app, scope: target.scope, patch: patch, message: message, force: force)
            }
            server.output(values.json) { ScopedValuesText.render(values) }
            return
        }
        let request = RolloutRequest(
            scope: target.scope, patch: patch, waves: waves, pauseOnErrorsBasisPoints: try threshold(),
            waveWaitSeconds: try waveWaitSeconds(), message: message)
        let view = try await server.withClient { try await $0.startRollout(app: target.app, request) }
        server.output(view.json) { RolloutText.render(view) }
    }
}

/// `fleetset admin history --app A [--scope S] [--limit N]`.
struct AdminHistory: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "List the writes of an app's values and metadata: who, when, why, and what changed.",
        discussion: """
            Each write is an ENTRY of the app's history, numbered 1, 2, 3, … per app; fleetset \
            admin revert --to ENTRY makes the values what they were after one. An entry is not a \
            device's revision: a device counts the changes of the values it gets (fleetset status, \
            explain and the server log show those), and a write to other devices or of metadata \
            makes none. Secrets are shown as ********.
            """)

    @OptionGroup var server: ServerOptions

    @Option(help: "The app id.")
    var app: String

    @Option(help: "Only writes of this scope: app, group:NAME or device:ID.")
    var scope: String?

    @Option(help: "Only the newest N writes.")
    var limit: Int?

    @Option(help: "Only entries numbered below ENTRY: the page before one shown (with --limit).")
    var before: Int64?

    func run() async throws {
        let history = try await server.withClient { try await $0.history(app: app, scope: scope, before: before, limit: limit) }
        server.output(history.json) {
            guard !history.entries.isEmpty else { return TerminalText.escaped("\(history.app): no writes yet") }
            var rows = [["ENTRY", "WHEN", "WHO", "KIND", "CHANGE", "MESSAGE"]]
            for entry in history.entries {
                rows.append([
                    "\(entry.number)", Timestamp.format(entry.at), entry.actor, entry.kind, entry.changeSummary, entry.message,
                ])
            }
            return Table.render(rows)
        }
    }
}

/// `fleetset admin revert --app A --to ENTRY [--scope S] [--message M] [--force]`.
struct AdminRevert: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revert", abstract: "Make an app's values what they were after an earlier history entry (as a new entry).",
        discussion: """
            Every scope (or only --scope) gets the values it had after ENTRY; history is never \
            rewritten. The values are checked against the current metadata. While a rollout of \
            the app runs, --force is needed, and aborts it.
            """)

    @OptionGroup var server: ServerOptions

    @Option(help: "The app id.")
    var app: String

    @Option(help: ArgumentHelp("The history entry whose values to restore (see fleetset admin history).", valueName: "ENTRY"))
    var to: Int64

    @Option(help: "Only this scope: app, group:NAME or device:ID.")
    var scope: String?

    @Option(help: "Why, kept in the history.")
    var message: String = ""

    @Flag(help: "Revert even though a rollout of the app runs (it is aborted).")
    var force = false

    func run() async throws {
        let request = RevertRequest(to: to, scope: scope, message: message, force: force)
        let entry = try await server.withClient { try await $0.revert(app: app, request) }
        server.output(entry.json) {
            TerminalText.escaped("\(app): entry \(entry.number) has the values of entry \(to): \(entry.changeSummary)")
        }
    }
}

/// `fleetset admin rollout status|resume|abort APP`.
struct AdminRollout: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rollout", abstract: "Show, resume or abort an app's staged rollout.",
        subcommands: [Status.self, Resume.self, Abort.self])

    /// The server and the app every rollout subcommand takes, and how each shows its answer.
    struct Target: ParsableArguments {
        @OptionGroup var server: ServerOptions
        @Argument(help: "The app id.") var app: String

        /// Sends `call` for the app and prints the rollout it answers.
        func show(_ call: (FleetClient, String) async throws -> RolloutView) async throws {
            let view = try await server.withClient { try await call($0, app) }
            server.output(view.json) { RolloutText.render(view) }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show the app's active or latest rollout, wave by wave.")
        @OptionGroup var target: Target
        func run() async throws { try await target.show { try await $0.rollout(app: $1) } }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Resume a paused rollout: accept the current wave as it is and admit the next one.")
        @OptionGroup var target: Target
        func run() async throws { try await target.show { try await $0.resumeRollout(app: $1) } }
    }

    struct Abort: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Abort the active rollout: every device returns to the previous values.")
        @OptionGroup var target: Target
        func run() async throws { try await target.show { try await $0.abortRollout(app: $1) } }
    }
}

/// A rollout as text: its state, then a line per admitted wave, then the devices not done. Each
/// line is shown through ``TerminalText/escaped(_:keepingNewlinesAndTabs:)``: a device's report
/// in it is one line, whatever it holds.
enum RolloutText {
    static func render(_ view: RolloutView) -> String {
        let keys = view.patch.map { "\($0.key)=\($0.value.serialized(maximumLength: 40))" }.joined(separator: " ")
        var lines = [
            "\(view.app) rollout \(view.id) at \(view.scope): \(keys)",
            "  \(view.phase.rawValue), wave \(view.currentWave + 1) of \(view.waves.count) (\(view.waves.map(\.description).joined(separator: ", "))); pause on errors above \(RolloutWave.percentText(basisPoints: view.pauseOnErrorsBasisPoints)); \(RolloutRequest.durationText(seconds: view.waveWaitSeconds)) per wave",
        ]
        if !view.reason.isEmpty { lines.append("  \(view.phase == .paused ? "paused" : "ended"): \(view.reason)") }
        for (index, wave) in view.progress.enumerated() {
            lines.append(
                "  wave \(index + 1) (\(wave.wave)): \(wave.devices) device(s), \(wave.applied) applied, \(wave.failed) failed, \(wave.waiting) waiting"
            )
        }
        for device in view.devices {
            lines.append("    \(device.device) (wave \(device.wave + 1)): \(device.outcome.rawValue), \(device.detail)")
        }
        return lines.map { TerminalText.escaped($0) }.joined(separator: "\n")
    }
}
