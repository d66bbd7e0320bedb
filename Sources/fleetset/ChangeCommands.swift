import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetSettings

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset set [--app ID] KEY=VALUE… [--wait [--timeout S]]`.
struct SetCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set",
        abstract: "Change settings this device may change (x-writable), through the agent.",
        discussion: """
            \(ValueTyping.help) A KEY may be a key path into a setting (playlist/0/content=Hello; \
            ~1 for a / in a name): only that value becomes the device's own, and the rest of the \
            setting keeps following the fleet (an append with - makes the device hold the whole \
            setting); --reset with a key path gives that place the fleet's value again. \
            --stdin KEY reads KEY's value from standard input instead (for \
            secrets: a command line is visible to every user in ps). --reset KEY removes the \
            device's own value, so the fleet's \
            applies again; KEY=null on a nullable setting does the same (a merge patch cannot \
            store null). \
            The change is checked here (the keys exist and are x-writable, the values fit), then \
            left in the app's inbox: the agent queues it durably and sends it to the server, also \
            after a restart or while the network is down. With --wait, waits until the server \
            confirmed it and settings.json holds it. Exit status: 0 queued (or, with --wait, \
            applied); 1 refused, with the reason; 2 usage or I/O errors; 3 still pending when \
            --timeout passed (the change stays queued); 4 superseded: a later change of the same \
            setting took its place before it was sent, so this value never reached the server (the \
            message names that change, what became of it and what settings.json holds).
            """)

    @OptionGroup var device: DeviceOptions

    @Argument(help: "KEY=VALUE pairs.", transform: Assignment.parse)
    var assignments: [Assignment] = []

    @Option(name: .customLong("reset"), help: "Remove the device's own value of KEY (repeatable).")
    var resets: [String] = []

    @Option(
        name: .customLong("stdin"),
        help: "Read KEY's value from standard input (its first line), so that a secret never appears in the command line.")
    var standardInputKey: String?

    @Flag(help: "Wait for the outcome.")
    var wait = false

    @Option(help: "With --wait: seconds to wait before giving up with exit status 3.")
    var timeout: Double = 30

    func validate() throws {
        guard !assignments.isEmpty || !resets.isEmpty || standardInputKey != nil else {
            throw ValidationError("give at least one KEY=VALUE, --stdin KEY or --reset KEY")
        }
        guard timeout > 0, timeout <= 86_400 else { throw ValidationError("--timeout must be more than 0 and at most 86400 seconds") }
    }

    func run() async throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        let (settings, metadata) = try device.settings(of: app, in: configuration)
        var values = JSONObject()
        var problems: [String] = []
        for assignment in assignments {
            do {
                let path = try assignment.location()
                let value = try metadata.readValue(assignment.valueText, at: path)
                // Inside a setting, only that place is the device's own (a key-path value); a
                // setting itself, by its value.
                let name = path.tokens.count > 1 ? path.description : assignment.key
                guard values[name] == nil else {
                    // Two appends (-) would be one; two values for one place, one lost.
                    problems.append("\(assignment.key) is given twice; give each change of one place its own fleetset set")
                    continue
                }
                values[name] = value
            } catch {
                problems.append("\(error)")  // a malformed key path, or a value the place cannot take
            }
        }
        if let key = standardInputKey {
            do {
                values[key] = try metadata.parseValue(readLine(strippingNewline: true) ?? "", forKey: key)
            } catch {
                problems.append(error.description)
            }
        }
        for key in resets {
            do {
                let path = try KeyPath.location(of: key)
                values[path.tokens.count > 1 ? path.description : key] = .null
            } catch {
                problems.append(error.description)
            }
        }
        guard problems.isEmpty else {
            StandardError.write("fleetset set: refused: " + problems.joined(separator: "; "))
            throw CLIExit.invalidInput
        }
        let fleetApp = device.fleetApp(app, configuration)
        let request: ChangeRequest
        do {
            request = try fleetApp.submit(values, checkedAgainst: settings.values, metadata: metadata)
        } catch {
            StandardError.write("fleetset set: \(error)")
            if case .refused = error { throw CLIExit.invalidInput }
            throw CLIExit.usageOrIO
        }
        let keys = values.keys.map(KeyPathValues.shownName).sorted().joined(separator: ", ")
        guard wait else {
            print("queued \(request.id) for \(app.id): \(keys)")
            return
        }
        switch await request.outcome(waitingUpTo: .milliseconds(Int64(timeout * 1000))) {
        case .applied(let revision):
            print("applied in revision \(revision): \(keys)")
        case .refused(let reason):
            StandardError.write("fleetset set: refused: \(reason)")
            throw CLIExit.invalidInput
        case .pending:
            StandardError.write(
                "fleetset set: still pending after \(timeout) s; the agent keeps \(request.id) queued (see fleetset status --app \(app.id))"
            )
            throw CLIExit.pending
        case .unknown:
            StandardError.write(
                "fleetset set: \(request.id) left the inbox but is not in changes.json: refused by the inbox (see the agent's log) or long forgotten"
            )
            throw CLIExit.invalidInput
        case .superseded(let successor, let outcome):
            StandardError.write(
                "fleetset set: \(Self.supersession(of: values, by: successor, outcome: outcome, app: app, configuration: configuration))")
            throw CLIExit.superseded
        }
    }

    /// `superseded by <id>, a later change of duration, which was applied in revision 7: duration=2`:
    /// what the change asked for never went to the server; what did, and what came of it. The
    /// values shown are the ones `settings.json` holds now (secrets masked).
    static func supersession(
        of values: JSONObject, by successor: String, outcome: ChangeOutcome, app: AppConfiguration, configuration: AgentConfiguration
    ) -> String {
        let keys = values.keys.sorted()
        let names = keys.map(KeyPathValues.shownName)
        let fate: String
        switch outcome {
        case .applied(let revision): fate = "which was applied in revision \(revision)"
        case .refused(let reason): fate = "which was refused: \(reason)"
        case .pending, .superseded: fate = "which is still pending"
        case .unknown: fate = "of which nothing more is known"
        }
        var text = "superseded by \(successor), a later change of \(names.joined(separator: ", ")), \(fate)"
        let found = SettingsOnDisk.load(configuration.layout.settingsFile(app.id), app: app.id)
        if let settings = found.settings {
            let metadata = MetadataOnDisk.load(configuration.layout.metadataFile(app.id), version: settings.schemaVersion)
            let shown = metadata?.masked(settings.values) ?? [:]
            let now = keys.compactMap { key in
                KeyPathValues.value(at: key, in: shown).map { "\(KeyPathValues.shownName(key))=\($0.serialized(maximumLength: 200))" }
            }
            if !now.isEmpty { text += "; settings.json holds " + now.joined(separator: ", ") + " (revision \(settings.revision))" }
        }
        return text
    }
}

/// `fleetset ack [--app ID] --revision N --state S [--message M]`.
struct AckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ack",
        abstract: "Tell the server what the app made of a revision (relayed by the agent).",
        discussion: """
            STATE is applied, error or unsupported; the message says why (at most 4096 characters). \
            The agent relays it with source "app"; the server logs it and shows it in its device \
            list. With expectAck in the agent's configuration, an app that does not acknowledge a \
            revision within ackTimeout is reported unsupported. Exit status: 0 queued; 2 usage or \
            I/O errors.
            """)

    @OptionGroup var device: DeviceOptions

    @Option(help: "The revision (settings.json's \"revision\").")
    var revision: Int64

    @Option(help: "applied, error or unsupported.")
    var state: AcknowledgementState

    @Option(help: "Why (for error and unsupported).")
    var message: String = ""

    func run() throws {
        let configuration = try device.configuration()
        let app = try device.selectedApp(in: configuration)
        do {
            try device.fleetApp(app, configuration).acknowledge(revision: revision, state: state, message: message)
        } catch {
            StandardError.write("fleetset ack: \(error)")
            throw CLIExit.usageOrIO
        }
        print("acknowledgement of revision \(revision) (\(state.rawValue)) queued for \(app.id)")
    }
}

extension AcknowledgementState: ExpressibleByArgument {}
