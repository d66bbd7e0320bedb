import ArgumentParser
import FleetDeviceFiles
import FleetDeviceState
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
            print(JSONValue.array(statuses.map(\.json)).serialized(.pretty))
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
                print("\n\(status.app): revision \(waiting) waits: \(status.waitingReason ?? "-")")
            }
            for app in apps { printChanges(of: app.id, layout: configuration.layout) }
        }
        guard statuses.allSatisfy({ $0.state == .applied }) else { throw CLIExit.invalidInput }
    }

    /// The app's queued changes and the most recent outcomes (keys only: values may be secret).
    private func printChanges(of app: String, layout: DeviceLayout) {
        let journal: ChangeJournal
        do {
            journal = try ChangeJournal.load(layout.changesFile(app))
        } catch {
            print("\n\(app): changes.json unreadable: \(error)")
            return
        }
        let recent = journal.ended.suffix(Self.recentOutcomes)
        guard !journal.queued.isEmpty || !recent.isEmpty else { return }
        var rows = [["REQUEST", "KEYS", "STATE", "DETAIL"]]
        for change in journal.queued {
            rows.append([
                change.id, change.values.keys.sorted().joined(separator: ","), "pending",
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
            rows.append([outcome.id, outcome.keys.joined(separator: ","), outcome.state.rawValue, detail])
        }
        print("\n\(app): local changes")
        print(Table.render(rows))
    }

    /// How many ended changes `status` shows.
    static let recentOutcomes = 5
}
