import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol

/// `fleetset status [--app ID] [--json]`.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show what the agent last did for each app: revision, state, last sync, last error.",
        discussion: """
            Read from the agent's status.json files. STATE is the outcome of the newest revision \
            the server offered (applied, error, unsupported, or none yet); REVISION is what \
            settings.json holds. A revision that waits to be applied (outside the app's apply \
            windows, or while the app holds its update lock) is shown with the reason. Exit \
            status: 0 when every app shown is applied, 1 otherwise, 2 for usage errors.
            """)

    @OptionGroup var device: DeviceOptions

    @Flag(help: "Print the status documents as a JSON array.")
    var json = false

    func run() throws {
        let configuration = try device.configuration()
        let apps = try device.selectedApps(in: configuration)
        let statuses = apps.map { app in AppStatus.load(configuration.layout.statusFile(app.id)) ?? AppStatus(app: app.id) }
        if json {
            print(TerminalText.serialized(.array(statuses.map(\.json)), .pretty))
        } else {
            var rows = [["APP", "REVISION", "STATE", "LATEST", "LAST SYNC", "REPORTS", "CHANGES", "LAST ERROR"]]
            for status in statuses {
                rows.append([
                    status.app, status.revision.map(String.init) ?? "-", status.state.rawValue,
                    status.latestRevision.map(String.init) ?? "-", status.lastSync.map(Timestamp.format) ?? "never",
                    String(status.pendingReports), String(status.pendingChanges), status.lastError ?? "-",
                ])
            }
            print(Table.render(rows))
            for status in statuses {
                guard let waiting = status.waitingRevision else { continue }
                print("\n" + TerminalText.escaped("\(status.app): revision \(waiting) waits: \(status.waitingReason ?? "-")"))
            }
            for app in apps { printChanges(of: app.id, layout: configuration.layout) }
            printPolicy(apps: apps.map(\.id), configuration: configuration)
        }
        guard statuses.allSatisfy({ $0.state == .applied }) else { throw CLIExit.invalidInput }
    }

    /// The app's queued changes and the most recent outcomes (keys only: values may be secret).
    private func printChanges(of app: String, layout: DeviceLayout) {
        let journal: ChangeJournal
        do {
            journal = try ChangeJournal.load(layout.changesFile(app))
        } catch {
            print("\n" + TerminalText.escaped("\(app): changes.json unreadable: \(error)"))
            return
        }
        let recent = journal.ended.suffix(Self.recentOutcomes)
        guard !journal.queued.isEmpty || !recent.isEmpty else { return }
        var rows = [["REQUEST", "KEYS", "STATE", "DETAIL"]]
        for change in journal.queued {
            rows.append([
                change.id, change.values.keys.map(KeyPathValues.shownName).sorted().joined(separator: ","), "pending",
                change.confirmedRevision.map { "confirmed in revision \($0)" } ?? "queued \(Timestamp.format(change.madeAt))",
            ])
        }
        for outcome in recent.reversed() {
            let detail =
                switch outcome.state {
                case .applied: "revision \(outcome.revision ?? 0)"
                case .refused: outcome.message
                case .superseded: "by \(outcome.supersededBy ?? "-")"
                }
            rows.append([outcome.id, outcome.keys.map(KeyPathValues.shownName).joined(separator: ","), outcome.state.rawValue, detail])
        }
        print("\n\(app): local changes")
        print(Table.render(rows))
    }

    /// The agent policy as the agent settled it (`policy.json`): each key's value and where it
    /// came from (pinned in the configuration file, the server's scope, or the default).
    private func printPolicy(apps: [String], configuration: AgentConfiguration) {
        guard let bytes = try? FileSystem.readFileIfPresent(configuration.layout.policyFile, maximumSize: 1 << 20),
            case .object(let kept)? = try? JSONParser.parse(bytes), case .object(let settled)? = kept["settled"]
        else {
            let pinned = AgentPolicy.Key.allCases.filter(configuration.pinnedPolicy.contains).map(\.rawValue)
            print(
                "\nAgent policy: none from the server yet; "
                    + (pinned.isEmpty
                        ? "every key at its default" : "pinned in \(device.configurationPath): \(pinned.joined(separator: ", "))"))
            return
        }
        func row(_ label: String, _ entry: JSONValue?) -> [String]? {
            guard case .object(let entry)? = entry, let value = entry["value"] else { return nil }
            return [label, value.stringValue ?? value.serialized(), entry["source"]?.stringValue ?? "-"]
        }
        var rows = [["KEY", "VALUE", "FROM"]]
        if let logLevel = row("logLevel", settled["logLevel"]) { rows.append(logLevel) }
        for app in apps {
            guard case .object(let keys)? = settled["apps"]?[app] else { continue }
            for key in AgentPolicy.Key.allCases { if let entry = row("\(app) \(key.rawValue)", keys[key.rawValue]) { rows.append(entry) } }
        }
        print("\nAgent policy (a key set in \(device.configurationPath) is pinned and wins over the server's)")
        print(Table.render(rows))
    }

    /// How many ended changes `status` shows.
    static let recentOutcomes = 5
}
