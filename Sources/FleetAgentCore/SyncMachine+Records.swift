import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// Reports, the device's changes, the app's acknowledgements, the inbox's requests, and the
/// files that record them: `reports.json`, `changes.json`, `status.json`.
extension SyncMachine {
    // MARK: - Reports

    /// Adds a report to the queue in memory.
    mutating func queue(_ report: StatusReport) {
        var report = report
        report.message = Self.reportMessage(report.message, detail: reportDetail)
        reports.append(report)
        reportsVersion += 1
        statusCheckWanted = true
    }

    /// `message` as a report carries it: every character the server refuses in a message (a
    /// control character but `\n` and `\t`, a bidirectional control; a hook's output or an app's
    /// acknowledgement may hold any) shown as its escape (``TerminalText``), then at most
    /// ``StatusReport/maximumMessageLength`` characters; for ``AgentPolicy/ReportDetail/brief``,
    /// its first line (the first problem) and at most ``AgentPolicy/briefMessageLength``.
    public static func reportMessage(_ message: String, detail: AgentPolicy.ReportDetail) -> String {
        var text = Substring(TerminalText.escaped(message, keepingNewlinesAndTabs: true))
        var limit = StatusReport.maximumMessageLength
        var cut = false
        if detail == .brief {
            limit = AgentPolicy.briefMessageLength
            if let end = text.firstIndex(where: { $0 == "\n" || $0 == ";" }) {
                text = text[..<end]
                cut = true
            }
        }
        if text.unicodeScalars.count > limit { return String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit - 1))) + "…" }
        return cut ? String(text) + " …" : String(text)
    }

    /// Queues the report of an outcome. `status.json` records the outcome only once the report
    /// is delivered or saved, so a crash in between repeats the report rather than losing it.
    mutating func queueOutcome(_ report: StatusReport) {
        queue(report)
        statusAwaitsReport = true
    }

    /// Lets `status.json` record an outcome once its report is safe: delivered, or (when it
    /// cannot be delivered now) in `reports.json`. Until then the status is not written at all.
    mutating func flushStatusAfterReports(_ now: Moment) {
        guard statusAwaitsReport else { return }
        if case .delivering = slot { return }
        guard reports == reportsOnDisk else {
            if !reportsSaveFailed { reportsSaveWanted = true }  // the status follows the save's success
            return
        }
        statusAwaitsReport = false
        statusForced = true
        statusCheckWanted = true
    }

    mutating func reportDelivered(_ now: Moment) {
        guard case .delivering = slot else { return }
        slot = .free
        reports.removeFirst(1)
        reportsLeft()
    }

    /// A report left the queue (delivered or dropped): `reports.json` follows once the queue is
    /// empty (until then the next delivery is near).
    mutating func reportsLeft() {
        reportsVersion += 1
        if reports.isEmpty, reports != reportsOnDisk { reportsSaveWanted = true }
        statusCheckWanted = true
    }

    /// A report fleetset's server refuses for good is dropped rather than block the queue; on
    /// any other failure the queue waits for the next turn, after the backoff. A report with a
    /// ``FleetProtocol/StatusReport/detail`` goes once more without it first: a server of 0.7.0
    /// refuses the member, and still takes the rest of the report.
    mutating func reportFailed(_ failure: SyncFailure, _ now: Moment) {
        if failure.kind == .final, var first = reports.reports.first, first.detail != nil {
            log(
                .warning, "status report refused with its detail; sending it without", event: "report-refused",
                ["revision": "\(first.revision)", "error": failure.summary])
            first.detail = nil
            reports.replaceFirst(with: first)
            reportsVersion += 1
            if reports != reportsOnDisk { reportsSaveWanted = true }
            return
        }
        if failure.kind == .final {
            log(.error, "status report refused; dropped", event: "report-refused", ["error": failure.summary])
            reports.removeFirst(1)
            reportsLeft()
            return
        }
        // The rest wait for the next turn (the settings request still goes), and every request
        // waits for the backoff first.
        reportsDeferred = true
        if reports != reportsOnDisk { reportsSaveWanted = true }
        fail(failure, now)
    }

    // MARK: - The device's changes

    /// The oldest change that needs a request, with its patch and base revision. Changes ahead
    /// of it that no longer apply end refused, and ones whose values are all in place already
    /// end applied, with nothing sent. `nil` when none must be sent (or none can be yet).
    mutating func nextChangeToSend(_ now: Moment) -> (change: ChangeJournal.Change, patch: JSONObject, base: Int64)? {
        while let change = journal.nextToSend {
            guard journalProblem == nil, let settings, let metadata, let base = knownRevision else { return nil }
            let problems = metadata.problems(ofChange: change.values, to: settings.values)
            guard problems.isEmpty else {
                endChange(
                    change,
                    refusal: "no longer applies to revision \(settings.revision): " + problems.map(\.description).joined(separator: "; "),
                    now)
                continue
            }
            var patch = JSONObject()
            for (key, value) in change.values where value == .null || KeyPathValues.value(at: key, in: settings.values) != value {
                patch[key] = value
            }
            if patch.isEmpty, base == settings.revision {
                journal.confirm(change.id, revision: settings.revision)
                journalChanged()
                settleChanges(upTo: settings.revision, now)
                continue
            }
            return (change, patch.isEmpty ? change.values : patch, base)
        }
        return nil
    }

    /// Sends the next change that needs a request; returns whether one started.
    mutating func sendNextChange(_ now: Moment) -> Bool {
        guard let next = nextChangeToSend(now) else { return false }
        slot = .patching(next.change)
        actions.append(.patchSettings(next.patch, basedOn: next.base))
        return true
    }

    /// The server took the change: download again (the server may have coerced values; only
    /// validated settings reach the file). It ends `applied` once `settings.json` holds it.
    mutating func changeConfirmed(_ revision: Int64, _ now: Moment) {
        guard case .patching(let change) = slot else { return }
        slot = .free
        journal.confirm(change.id, revision: revision)
        journalChanged()
        conflicts = 0
        log(
            .info, "local change confirmed", event: "change-confirmed",
            ["request": change.id, "keys": change.values.keys.sorted().joined(separator: ","), "revision": "\(revision)"])
        startFetch(.refresh, now)
    }

    /// A 409 fetches the new revision and tries again (the change is checked against it), up to
    /// ``SyncRules/conflictLimit`` times in a row, then backs off; a final refusal ends the
    /// change with the server's reason; anything else keeps it queued and backs off.
    mutating func changeFailed(_ change: ChangeJournal.Change, _ failure: SyncFailure, _ now: Moment) {
        switch failure.kind {
        case .conflict:
            conflicts += 1
            log(.info, "local change based on a stale revision; fetching the new one", event: "change-conflict", ["request": change.id])
            if conflicts > SyncRules.conflictLimit {
                conflicts = 0
                fail(failure, now)
            } else {
                startFetch(.refresh, now)
            }
        case .final:
            endChange(change, refusal: failure.summary, now)
        case .transient, .authentication, .throttled:
            fail(failure, now)
        }
    }

    mutating func endChange(_ change: ChangeJournal.Change, refusal message: String, _ now: Moment) {
        journal.refuse(change.id, message: message, at: now.wall)
        journalChanged()
        statusForced = true
        log(
            .warning, "local change refused", event: "change-refused",
            ["request": change.id, "keys": change.values.keys.sorted().joined(separator: ","), "error": message])
    }

    /// Ends the changes the server confirmed in `revision` or earlier, now that `settings.json`
    /// holds `revision` (or refused it, with `refusal`).
    mutating func settleChanges(upTo revision: Int64, refusal: String? = nil, _ now: Moment) {
        let outcomes = journal.settle(upTo: revision, refusal: refusal, at: now.wall)
        guard !outcomes.isEmpty else { return }
        journalChanged()
        statusForced = true
        for outcome in outcomes {
            let applied = outcome.state == .applied
            log(
                .notice, applied ? "local change applied" : "local change refused", event: applied ? "change-applied" : "change-refused",
                ["request": outcome.id, "keys": outcome.keys.joined(separator: ","), "revision": "\(revision)"])
        }
    }

    mutating func journalChanged() {
        journalVersion += 1
        journalSaveWanted = true
        statusCheckWanted = true
    }

    // MARK: - The app's acknowledgement

    /// With `expectAck`, starts waiting for the app to acknowledge `revision`.
    mutating func awaitAck(for revision: Int64, _ now: Moment) {
        guard rules.expectAck else { return }
        status.awaitingAck = revision
        status.ackDeadline = now.wall + Int64((rules.ackTimeout / .milliseconds(1) / 1000).rounded(.up))
        ackDeadline = now.instant.advanced(by: rules.ackTimeout)
    }

    /// Stops waiting: a newer outcome, or the app's own acknowledgement, replaces it.
    mutating func stopAwaitingAck() {
        status.awaitingAck = nil
        status.ackDeadline = nil
        ackDeadline = nil
    }

    /// After a restart, the deadline `status.json` recorded, as a monotonic instant: never
    /// further away than `ackTimeout`, so a wall clock set back cannot stretch it.
    mutating func restoreAckDeadline(_ now: Moment) {
        guard status.awaitingAck != nil else { return }
        guard rules.expectAck else {
            stopAwaitingAck()
            return
        }
        let timeout = Int64((rules.ackTimeout / .milliseconds(1) / 1000).rounded(.up))
        let remaining = min(max(0, (status.ackDeadline ?? now.wall) - now.wall), timeout)
        ackDeadline = now.instant.advanced(by: .seconds(remaining))
    }

    /// Reports an app that did not acknowledge in time as `unsupported`.
    mutating func expireAwaitedAck(_ now: Moment) {
        guard let revision = status.awaitingAck, let deadline = ackDeadline, now.instant >= deadline else { return }
        log(.warning, "no acknowledgement from the app", event: "ack-timeout", ["revision": "\(revision)"])
        queueOutcome(
            StatusReport(
                revision: revision, schemaVersion: settings?.schemaVersion ?? status.schemaVersion ?? 0, state: .unsupported,
                message: "no acknowledgement from the app", source: .agent))
        stopAwaitingAck()
        if status.revision == revision { status.state = .unsupported }
    }

    // MARK: - The inbox

    mutating func requestsArrived(_ deliveries: [InboxDelivery], _ now: Moment) {
        for delivery in deliveries where !waitingRequests.contains(where: { $0.id == delivery.id }) {
            waitingRequests.append(delivery)
        }
        handleWaitingRequests(now)
    }

    /// What became of one request.
    enum Taking {
        /// Done: its file goes once what it asked for is on disk.
        case taken(journal: Bool, reports: Bool)
        /// Not yet: no settings to check it against, or `changes.json` unreadable.
        case waiting
        /// Moved to `refused/` (or nothing to keep).
        case done
    }

    /// Handles every waiting request in order: queues changes, relays acknowledgements, notes
    /// "sync now", records refusals.
    mutating func handleWaitingRequests(_ now: Moment) {
        if journalProblem != nil, !journalLoading {
            journalLoading = true
            actions.append(.loadJournal)
        }
        var waiting: [InboxDelivery] = []
        for delivery in waitingRequests {
            let taking: Taking
            switch delivery.content {
            case .refused(let reason):
                if journal.lookup(delivery.id) == .unknown {
                    journal.refuseUnqueued(id: delivery.id, keys: [], message: "refused by the inbox: \(reason)", at: now.wall)
                    journalChanged()
                }
                taking = .done
            case .request(.sync):
                log(.info, "sync requested", event: "inbox", ["request": "sync"])
                requestSyncNow(now)
                taking = .taken(journal: false, reports: false)
            case .request(.set(let values)):
                taking = takeChange(delivery, values, now)
            case .request(.ack(let revision, let state, let message)):
                taking = relayAck(delivery, revision: revision, state: state, message: message)
            case .request(.facts(let facts)):
                log(.info, "app facts set", event: "inbox", ["request": "facts", "facts": facts.keys.sorted().joined(separator: ",")])
                actions.append(.saveAppFacts(facts))
                taking = .taken(journal: false, reports: false)
            }
            switch taking {
            case .waiting:
                waiting.append(delivery)
            case .taken(let journal, let reports):
                guard let path = delivery.path else { break }
                handledRequests.append(
                    HandledRequest(
                        path: path, journalVersion: journal ? journalVersion : nil, reportsVersion: reports ? reportsVersion : nil))
                if journal { journalSaveWanted = true }
                if reports { reportsSaveWanted = true }
            case .done:
                break
            }
        }
        waitingRequests = waiting
        flushRemovals()
        statusCheckWanted = true
    }

    /// Checks a change and queues it, or records its refusal.
    mutating func takeChange(_ delivery: InboxDelivery, _ values: JSONObject, _ now: Moment) -> Taking {
        switch journal.lookup(delivery.id) {
        case .unknown:
            break
        case .queued(let change) where change.values == values:
            return .taken(journal: true, reports: false)  // left behind by a crash after it was queued
        default:
            let reason =
                "request id \(delivery.id) was taken already; give each request a file name of its own (the time and a random number)"
            log(.warning, "request refused", event: "inbox-refused", ["request": delivery.id, "reason": reason])
            if let path = delivery.path { actions.append(.moveRequestAside(path: path, reason: reason)) }
            return .done
        }
        guard journalProblem == nil, let settings, let metadata else { return .waiting }
        let keys = values.keys.sorted()
        let problems = metadata.problems(ofChange: values, to: settings.values)
        if !problems.isEmpty {
            let message = problems.map(\.description).joined(separator: "; ")
            journal.refuseUnqueued(id: delivery.id, keys: keys, message: message, at: now.wall)
            log(
                .warning, "local change refused", event: "change-refused",
                ["request": delivery.id, "keys": keys.joined(separator: ","), "error": message])
        } else if journal.queued.count >= ChangeJournal.queueCapacity {
            let message = "\(ChangeJournal.queueCapacity) changes are waiting for the server already"
            journal.refuseUnqueued(id: delivery.id, keys: keys, message: message, at: now.wall)
            log(.warning, "local change refused", event: "change-refused", ["request": delivery.id, "error": message])
        } else {
            journal.enqueue(ChangeJournal.Change(id: delivery.id, values: values, madeAt: now.wall), at: now.wall)
            log(.info, "local change queued", event: "change-queued", ["request": delivery.id, "keys": keys.joined(separator: ",")])
        }
        journalChanged()
        return .taken(journal: true, reports: false)
    }

    /// Queues the app's acknowledgement for the server, or moves it aside when it names a
    /// revision the device never received.
    mutating func relayAck(_ delivery: InboxDelivery, revision: Int64, state: StatusReport.State, message: String) -> Taking {
        guard let settings else { return .waiting }
        guard revision <= settings.revision else {
            let reason = "acknowledges revision \(revision), but the newest revision in settings.json is \(settings.revision)"
            log(.warning, "acknowledgement refused", event: "inbox-refused", ["request": delivery.id, "reason": reason])
            if let path = delivery.path { actions.append(.moveRequestAside(path: path, reason: reason)) }
            return .done
        }
        queue(StatusReport(revision: revision, schemaVersion: settings.schemaVersion, state: state, message: message, source: .app))
        if let awaited = status.awaitingAck, revision >= awaited { stopAwaitingAck() }
        log(
            .notice, "app acknowledged", event: "app-ack", ["revision": "\(revision)", "state": state.rawValue, "message": message])
        if state != .applied, revision == settings.revision, rules.rollbackOnError, rollback == nil {
            rollbackWanted = (revision, "the app reported \(state.rawValue)" + (message.isEmpty ? "" : ": \(message)"))
        }
        return .taken(journal: false, reports: true)
    }

    /// "Sync now": at once when none was granted in the last ``SyncRules/syncNowInterval``,
    /// else at the end of it (requests in between are one). The backoff still applies.
    mutating func requestSyncNow(_ now: Moment) {
        let earliest = lastSyncNow.map { max(now.instant, $0.advanced(by: rules.syncNowInterval)) } ?? now.instant
        syncNowAt = syncNowAt.map { min($0, earliest) } ?? earliest
    }

    mutating func journalLoaded(_ loaded: ChangeJournal?, _ problem: String?, _ now: Moment) {
        journalLoading = false
        guard let loaded else {
            let problem = problem ?? "changes.json cannot be read"
            if problem != journalProblem {
                log(
                    .error, "changes.json unreadable; local changes wait in the inbox until it is repaired or removed",
                    event: "disk-error", ["error": problem])
            }
            journalProblem = problem
            return
        }
        if journalProblem != nil { log(.notice, "changes.json readable again", event: "disk-recovered") }
        journalProblem = nil
        journal = loaded
        journalOnDisk = loaded
        journalVersion += 1
        journalSavedVersion = journalVersion
        if !waitingRequests.isEmpty { handleWaitingRequests(now) }
    }

    // MARK: - Files

    /// Asks for the saves wanted by this event, in the order that keeps the records true: the
    /// changes and the reports, then `status.json`.
    mutating func emitSaves(_ now: Moment) {
        // One save of each kind at a time: its result names exactly what is on disk.
        if journalSaveWanted, journalBeingSaved == nil {
            journalSaveWanted = false
            if journal == journalOnDisk {
                journalSavedVersion = journalVersion
            } else if journalProblem == nil {
                // Never over a changes.json that could not be read.
                journalBeingSaved = (journal, journalVersion)
                actions.append(.saveJournal(journal))
            }
        }
        if reportsSaveWanted, reportsBeingSaved == nil {
            reportsSaveWanted = false
            if reports == reportsOnDisk {
                reportsSavedVersion = reportsVersion
            } else {
                reportsBeingSaved = (reports, reportsVersion)
                actions.append(.saveReports(reports))
            }
        }
        flushRemovals()
        // An outcome is recorded only once its report is safe (``flushStatusAfterReports(_:)``),
        // and nothing while a revision is being applied: its outcome is written once, at the end.
        if statusCheckWanted || statusForced, !statusAwaitsReport, !isApplying, statusBeingWritten == nil { checkStatus(now) }
    }

    /// Removes the files of handled requests whose effect is on disk.
    mutating func flushRemovals() {
        var kept: [HandledRequest] = []
        for request in handledRequests {
            let journalDone = request.journalVersion.map { journalSavedVersion >= $0 } ?? true
            let reportsDone = request.reportsVersion.map { reportsSavedVersion >= $0 } ?? true
            if journalDone && reportsDone {
                actions.append(.removeRequest(path: request.path))
            } else {
                kept.append(request)
            }
        }
        handledRequests = kept
    }

    mutating func journalSaved(_ error: String?) {
        guard let (saved, version) = journalBeingSaved else { return }
        journalBeingSaved = nil
        if let error {
            log(.error, "cannot save changes.json", event: "disk-error", ["error": error])
            return
        }
        journalOnDisk = saved
        journalSavedVersion = max(journalSavedVersion, version)
        if journal != journalOnDisk { journalSaveWanted = true }  // changed meanwhile
        statusCheckWanted = true
    }

    mutating func reportsSaved(_ error: String?) {
        guard let (saved, version) = reportsBeingSaved else { return }
        reportsBeingSaved = nil
        if let error {
            log(.error, "cannot save queued reports", event: "disk-error", ["error": error])
            reportsSaveFailed = true
            return
        }
        reportsSaveFailed = false
        reportsOnDisk = saved
        reportsSavedVersion = max(reportsSavedVersion, version)
        if reports != reportsOnDisk, statusAwaitsReport || handledRequests.contains(where: { $0.reportsVersion != nil }) {
            reportsSaveWanted = true  // changed meanwhile, and something waits for it
        }
    }

    /// Writes `status.json` when something but the time of the last sync changed, or when that
    /// time is more than ``statusRefreshInterval`` newer than the file's (to spare flash storage
    /// on quiet devices), or when forced (an outcome).
    mutating func checkStatus(_ now: Moment) {
        let forced = statusForced
        statusCheckWanted = false
        statusForced = false
        status.lastError = transportError ?? verdictError
        status.pendingReports = reports.reports.count
        status.pendingChanges = journal.queued.count
        var comparable = status
        var onDisk = statusOnDisk
        comparable.lastSync = nil
        comparable.updatedAt = 0
        onDisk?.lastSync = nil
        onDisk?.updatedAt = 0
        let stale = statusWrittenAt.map { $0.duration(to: now.instant) > Self.statusRefreshInterval } ?? true
        guard forced || comparable != onDisk || (stale && status.lastSync != statusOnDisk?.lastSync) else { return }
        status.updatedAt = now.wall
        statusBeingWritten = status
        actions.append(.writeStatus(status))
    }

    mutating func statusWritten(_ error: String?, _ now: Moment) {
        guard let written = statusBeingWritten else { return }
        statusBeingWritten = nil
        if let error {
            log(.error, "cannot write status.json", event: "disk-error", ["error": error])
            return
        }
        statusOnDisk = written
        statusWrittenAt = now.instant
        if status != written { statusCheckWanted = true }  // changed meanwhile
    }
}
