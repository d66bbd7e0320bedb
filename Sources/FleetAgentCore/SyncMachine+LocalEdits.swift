import FleetDeviceState
import FleetProtocol

/// Settings edited on the device by hand: `settings.json` is the served revision, and only the
/// agent writes it.
///
/// - The driver tells the machine when `settings.json` changed (``SyncMachine/Event/settingsFileChanged``:
///   a watch on the app's folder); the machine waits until the writes have settled
///   (``localEditSettle`` after the last, at most ``localEditSettleLimit`` after the first), so an
///   editor that saves in several steps makes one check. It also checks after every answer to a
///   settings request, and before it writes a new revision.
/// - The check (``AppFiles/settingsFileIsEdited()``) compares the file with the driver's
///   record of what the agent wrote last: the agent's own writes are never an edit, so putting
///   the settings back (itself a write) cannot start another round. A file that cannot be read
///   is not taken for an edit: the next check looks again.
/// - A file that no longer matches is an edit: once nothing else is in flight the served
///   revision is written again (``AppFiles/rewriteSettings(_:)``, which keeps
///   `settings.previous.json` as it is), the hook runs, and the revision is reported again with
///   the detail ``FleetProtocol/StatusReport/Detail/restoredAfterLocalEdit``.
/// - A `settings.json` changed while the agent was stopped cannot be trusted to hold the served
///   values: the revision is fetched again (without `If-None-Match`) and written back from the
///   server's answer.
extension SyncMachine {
    /// Where a change of `settings.json` stands, and how many edits were put back lately.
    struct LocalEdits {
        enum State {
            /// The file changed: it is looked at `at` (``localEditSettle`` after the last change,
            /// ``localEditSettleLimit`` after the `first` at the latest).
            case settling(first: Instant, at: Instant)
            /// The file holds an edit: the served revision is written again once nothing is in flight.
            case found
            /// The file was changed while the agent was stopped: this revision is fetched again
            /// and written back from the server's answer.
            case refetching(revision: Int64)
        }

        var state: State?
        /// When the recent edits were put back (at most ``restoreLimit`` within ``restoreWindow``).
        var recentRestores: [Instant] = []
        /// The refusal to put back more was reported (once per run of refusals).
        var limitReported = false

        var isFound: Bool {
            if case .found? = state { true } else { false }
        }

        var isSettling: Bool {
            if case .settling? = state { true } else { false }
        }

        var settlesAt: Instant? {
            if case .settling(_, let at)? = state { at } else { nil }
        }

        /// The file is replaced whole (a rollback): an edit found in it is gone.
        mutating func forgetFound() {
            if isFound { state = nil }
        }
    }

    /// How long `settings.json` must stay unchanged before it is compared with the record.
    public static var localEditSettle: Duration { .seconds(1) }
    /// The longest a stream of changes puts the check off.
    public static var localEditSettleLimit: Duration { .seconds(10) }

    /// `settings.json` changed: look once the writes have settled. (Once an edit is found, a
    /// change adds nothing.)
    mutating func settingsFileChanged(_ now: Moment) {
        switch localEdits.state {
        case nil:
            localEdits.state = .settling(first: now.instant, at: now.instant.advanced(by: Self.localEditSettle))
        case .settling(let first, _):
            localEdits.state = .settling(
                first: first, at: min(now.instant.advanced(by: Self.localEditSettle), first.advanced(by: Self.localEditSettleLimit)))
        case .found, .refetching:
            break
        }
    }

    /// Look at `settings.json` now (after an answer).
    mutating func checkSettingsSoon(_ now: Moment) {
        switch localEdits.state {
        case nil: localEdits.state = .settling(first: now.instant, at: now.instant)
        case .settling(let first, _): localEdits.state = .settling(first: first, at: now.instant)
        case .found, .refetching: break
        }
    }

    /// Checks the file when the writes have settled.
    mutating func checkSettingsWhenDue(_ now: Moment) {
        guard let at = localEdits.settlesAt, settings != nil, now.instant >= at else { return }
        checkSettingsFile(now)
    }

    /// The most edits put back within ``restoreWindow``: something on the device that keeps
    /// rewriting `settings.json` (a configuration tool, a hook that writes it) is not fought
    /// for ever, each round running the hook and reporting.
    public static var restoreLimit: Int { 5 }
    /// See ``restoreLimit``.
    public static var restoreWindow: Duration { .seconds(600) }

    /// Compares `settings.json` with the record of what the agent wrote last.
    mutating func checkSettingsFile(_ now: Moment) {
        localEdits.state = nil
        let edited: Bool
        do {
            edited = try files.settingsFileIsEdited()
        } catch {
            // Not taken for an edit: the next check (the next answer at the latest) looks again.
            log(.error, "cannot read settings.json to check it", event: "disk-error", ["error": error.description])
            return
        }
        guard edited, let settings else { return }
        localEdits.recentRestores.removeAll { $0.advanced(by: Self.restoreWindow) <= now.instant }
        guard localEdits.recentRestores.count < Self.restoreLimit else {
            // Left as it is until the window lets another restore in (the next check: a change
            // of the file, an answer, a new revision); reported once per run of refusals.
            guard !localEdits.limitReported else { return }
            localEdits.limitReported = true
            let message =
                "settings.json keeps being changed on the device: put back \(Self.restoreLimit) times in \(Self.restoreWindow.components.seconds / 60) minutes; left as it is for now (what else writes it?)"
            log(.error, "settings.json keeps being changed; not putting it back for now", event: "local-edit-limit", ["error": message])
            queue(
                StatusReport(
                    revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: message, source: .agent))
            return
        }
        localEdits.recentRestores.append(now.instant)
        localEdits.limitReported = false
        localEdits.state = .found
        log(
            .warning, "settings.json was changed on the device; putting the served revision back", event: "local-edit",
            ["revision": "\(settings.revision)"])
    }

    /// With nothing in flight, writes the served revision over an edit; the hook runs and the
    /// revision is reported again, with what happened.
    mutating func restoreWhenWanted(_ now: Moment) {
        guard localEdits.isFound, isFree, let settings else { return }
        localEdits.state = nil
        do {
            try files.rewriteSettings(settings)
        } catch {
            // Tried again at the next check (the next answer at the latest); the report says why.
            let message = "settings.json was changed on the device and cannot be put back: \(error)"
            log(.error, "cannot put the served revision back", event: "disk-error", ["error": message])
            queue(
                StatusReport(
                    revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: message, source: .agent))
            return
        }
        log(.notice, "served revision put back", event: "restored-after-local-edit", ["revision": "\(settings.revision)"])
        actions.append(.showStatus("revision \(settings.revision) put back after a local edit"))
        actions.append(.served)
        beginFinishing(Finishing(settings: settings, kind: .restoredAfterEdit), now)
    }

    /// `settings.json` was changed while the agent was stopped: its values are not the
    /// server's, so the revision is fetched again and written back from the answer.
    mutating func distrustLoadedSettings(_ now: Moment) {
        guard let settings else { return }
        localEdits.state = .refetching(revision: settings.revision)
        knownRevision = nil
        log(
            .warning, "settings.json was changed while the agent was stopped; fetching the served revision to put it back",
            event: "local-edit", ["revision": "\(settings.revision)"])
    }

    /// The server's answer to the request made for ``distrustLoadedSettings(_:)``: the same
    /// revision is written back from it. Returns whether the document was taken that way.
    mutating func restoreFromServer(_ document: SettingsDocument, _ now: Moment) -> Bool {
        guard case .refetching(let revision)? = localEdits.state else { return false }
        localEdits.state = nil
        guard let settings, document.revision == revision, document.revision == settings.revision,
            document.schemaVersion == settings.schemaVersion, document.app == rules.app
        else {
            return false  // a newer revision: written as any other, over the edit
        }
        knownRevision = document.revision
        pollSucceeded()
        self.settings = DeviceSettings(document, syncedAt: settings.syncedAt)
        localEdits.state = .found
        return true
    }
}
