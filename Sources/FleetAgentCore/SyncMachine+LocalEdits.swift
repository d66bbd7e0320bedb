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
/// - The check (``SyncMachine/Action/checkSettingsFile``) compares the file with the driver's
///   record of what the agent wrote last: the agent's own writes are never an edit, so putting
///   the settings back (itself a write) cannot start another round.
/// - A file that no longer matches is an edit: once nothing else is in flight the served
///   revision is written again (``SyncMachine/Action/rewriteSettings(_:)``, which keeps
///   `settings.previous.json` as it is), the hook runs, and the revision is reported again with
///   the detail ``FleetProtocol/StatusReport/Detail/restoredAfterLocalEdit``.
/// - A `settings.json` changed while the agent was stopped cannot be trusted to hold the served
///   values: the revision is fetched again (without `If-None-Match`) and written back from the
///   server's answer.
extension SyncMachine {
    /// Where a change of `settings.json` stands.
    enum LocalEdit {
        /// The file changed: it is looked at `at` (``localEditSettle`` after the last change,
        /// ``localEditSettleLimit`` after the `first` at the latest).
        case settling(first: Instant, at: Instant)
        /// ``Action/checkSettingsFile`` was asked; its answer comes next, before anything else.
        case checking
        /// The file holds an edit: the served revision is written again once nothing is in flight.
        case found
        /// The file was changed while the agent was stopped: this revision is fetched again
        /// and written back from the server's answer.
        case refetching(revision: Int64)

        var isFound: Bool {
            if case .found = self { true } else { false }
        }

        /// A new revision is not written meanwhile: the check's answer, or the restore, comes first.
        var holdsWrites: Bool {
            switch self {
            case .checking, .found: true
            case .settling, .refetching: false
            }
        }
    }

    /// How long `settings.json` must stay unchanged before it is compared with the record.
    public static var localEditSettle: Duration { .seconds(1) }
    /// The longest a stream of changes puts the check off.
    public static var localEditSettleLimit: Duration { .seconds(10) }

    /// `settings.json` changed: look once the writes have settled. (Once an edit is found, or
    /// while the file is checked, a change adds nothing.)
    mutating func settingsFileChanged(_ now: Moment) {
        switch localEdit {
        case nil:
            localEdit = .settling(first: now.instant, at: now.instant.advanced(by: Self.localEditSettle))
        case .settling(let first, _):
            localEdit = .settling(
                first: first, at: min(now.instant.advanced(by: Self.localEditSettle), first.advanced(by: Self.localEditSettleLimit)))
        case .checking, .found, .refetching:
            break
        }
    }

    /// Look at `settings.json` now (after an answer).
    mutating func checkSettingsSoon(_ now: Moment) {
        switch localEdit {
        case nil: localEdit = .settling(first: now.instant, at: now.instant)
        case .settling(let first, _): localEdit = .settling(first: first, at: now.instant)
        case .checking, .found, .refetching: break
        }
    }

    /// Asks for the check when it is due, or at once when a new revision is about to be written
    /// (so that the previous generation it keeps is the agent's own file, not an edit).
    mutating func checkSettingsWhenDue(_ now: Moment) {
        guard case .settling(_, let at)? = localEdit, settings != nil else { return }
        let writing = deferred.map { $0.lockHeld || $0.lockOverridden } ?? false
        guard now.instant >= at || writing else { return }
        localEdit = .checking
        actions.append(.checkSettingsFile)
    }

    /// The most edits put back within ``restoreWindow``: something on the device that keeps
    /// rewriting `settings.json` (a configuration tool, a hook that writes it) is not fought
    /// for ever, each round running the hook and reporting.
    public static var restoreLimit: Int { 5 }
    /// See ``restoreLimit``.
    public static var restoreWindow: Duration { .seconds(600) }

    /// The answer to ``Action/checkSettingsFile``.
    mutating func settingsFileChecked(edited: Bool, _ now: Moment) {
        guard case .checking? = localEdit else { return }
        localEdit = nil
        guard edited, let settings else { return }
        recentRestores.removeAll { $0.advanced(by: Self.restoreWindow) <= now.instant }
        guard recentRestores.count < Self.restoreLimit else {
            // Left as it is until the window lets another restore in (the next check: a change
            // of the file, an answer, a new revision); reported once per run of refusals.
            guard !restoreLimitReported else { return }
            restoreLimitReported = true
            let message =
                "settings.json keeps being changed on the device: put back \(Self.restoreLimit) times in \(Self.restoreWindow.components.seconds / 60) minutes; left as it is for now (what else writes it?)"
            log(.error, "settings.json keeps being changed; not putting it back for now", event: "local-edit-limit", ["error": message])
            queue(
                StatusReport(
                    revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: message, source: .agent))
            return
        }
        recentRestores.append(now.instant)
        restoreLimitReported = false
        localEdit = .found
        log(
            .warning, "settings.json was changed on the device; putting the served revision back", event: "local-edit",
            ["revision": "\(settings.revision)"])
    }

    /// With nothing in flight, writes the served revision over an edit.
    mutating func restoreWhenWanted(_ now: Moment) {
        guard case .found? = localEdit, slot.isFree, rollback == nil, let settings else { return }
        localEdit = nil
        slot = .rewriting(settings)
        actions.append(.rewriteSettings(settings))
    }

    /// The answer to ``Action/rewriteSettings(_:)``: the hook runs and the revision is reported
    /// again, with what happened.
    mutating func settingsRewritten(_ error: String?, _ now: Moment) {
        guard case .rewriting(let restored) = slot else { return }
        slot = .free
        if let error {
            // Tried again at the next check (the next answer at the latest); the report says why.
            let message = "settings.json was changed on the device and cannot be put back: \(error)"
            log(.error, "cannot put the served revision back", event: "disk-error", ["error": message])
            queue(
                StatusReport(
                    revision: restored.revision, schemaVersion: restored.schemaVersion, state: .error, message: message, source: .agent
                ))
            return
        }
        log(.notice, "served revision put back", event: "restored-after-local-edit", ["revision": "\(restored.revision)"])
        actions.append(.showStatus("revision \(restored.revision) put back after a local edit"))
        actions.append(.served)
        restoredRevision = restored.revision
        beginFinishing(restored, now)
    }

    /// `settings.json` was changed while the agent was stopped: its values are not the
    /// server's, so the revision is fetched again and written back from the answer.
    mutating func distrustLoadedSettings(_ now: Moment) {
        guard let settings else { return }
        localEdit = .refetching(revision: settings.revision)
        knownRevision = nil
        log(
            .warning, "settings.json was changed while the agent was stopped; fetching the served revision to put it back",
            event: "local-edit", ["revision": "\(settings.revision)"])
    }

    /// The server's answer to the request made for ``distrustLoadedSettings(_:)``: the same
    /// revision is written back from it. Returns whether the document was taken that way.
    mutating func restoreFromServer(_ document: SettingsDocument, _ now: Moment) -> Bool {
        guard case .refetching(let revision)? = localEdit else { return false }
        localEdit = nil
        guard let settings, document.revision == revision, document.revision == settings.revision,
            document.schemaVersion == settings.schemaVersion, document.app == rules.app
        else {
            return false  // a newer revision: written as any other, over the edit
        }
        knownRevision = document.revision
        pollSucceeded()
        self.settings = DeviceSettings(document, syncedAt: settings.syncedAt)
        localEdit = .found
        return true
    }

    /// The detail and message of the outcome of `applied`, when it was put back after an edit.
    mutating func restoredOutcome(of applied: DeviceSettings) -> (detail: StatusReport.Detail, message: String)? {
        guard let restored = restoredRevision else { return nil }
        restoredRevision = nil
        guard restored == applied.revision else { return nil }
        return (.restoredAfterLocalEdit, "settings.json was changed on the device; revision \(applied.revision) was put back")
    }
}
