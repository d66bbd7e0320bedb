import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// The inbox's requests (changes, acknowledgements, "sync now", facts) and the files that
/// record what the loop did: `reports.json`, `changes.json`, `status.json`.
extension SyncMachine {
    /// The inbox's requests the loop holds.
    struct InboxState {
        /// Requests that cannot be handled yet (no settings, `changes.json` unreadable).
        var waiting: [InboxDelivery] = []
        /// Handled requests whose files go once what they asked for is on disk.
        var handled: [HandledRequest] = []
    }

    /// A handled request whose file goes once the changes (`journalVersion`) and reports
    /// (`reportsVersion`) it made are saved.
    struct HandledRequest {
        var path: String
        var journalVersion: Int?
        var reportsVersion: Int?
    }

    mutating func requestsArrived(_ deliveries: [InboxDelivery], _ now: Moment) {
        for delivery in deliveries where !inbox.waiting.contains(where: { $0.id == delivery.id }) {
            inbox.waiting.append(delivery)
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
        reloadJournalIfUnreadable(now)
        var waiting: [InboxDelivery] = []
        for delivery in inbox.waiting {
            let taking: Taking
            switch delivery.content {
            case .refused(let reason):
                if journal.lookup(delivery.id) == .unknown {
                    changes.modify {
                        $0.refuseUnqueued(id: delivery.id, keys: [], message: "refused by the inbox: \(reason)", at: now.wall)
                    }
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
                do {
                    try files.saveAppFacts(facts)
                } catch {
                    log(.error, "cannot save the app's facts", event: "device-info", ["error": error.description])
                }
                taking = .taken(journal: false, reports: false)
            }
            switch taking {
            case .waiting:
                waiting.append(delivery)
            case .taken(let journal, let reports):
                guard let path = delivery.path else { break }
                inbox.handled.append(
                    HandledRequest(
                        path: path, journalVersion: journal ? changes.journal.version : nil,
                        reportsVersion: reports ? reportQueue.record.version : nil))
                if journal { changes.journal.wantSave() }
                if reports { reportQueue.record.wantSave() }
            case .done:
                break
            }
        }
        inbox.waiting = waiting
        statusFile.checkWanted = true
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
            if let path = delivery.path { moveAside(path, reason: reason) }
            return .done
        }
        guard changes.problem == nil, let settings, let metadata else { return .waiting }
        let keys = values.keys.sorted()
        let problems = metadata.problems(ofChange: values, to: settings.values)
        if !problems.isEmpty {
            let message = problems.map(\.description).joined(separator: "; ")
            changes.modify { $0.refuseUnqueued(id: delivery.id, keys: keys, message: message, at: now.wall) }
            log(
                .warning, "local change refused", event: "change-refused",
                ["request": delivery.id, "keys": keys.joined(separator: ","), "error": message])
        } else if journal.queued.count >= ChangeJournal.queueCapacity {
            let message = "\(ChangeJournal.queueCapacity) changes are waiting for the server already"
            changes.modify { $0.refuseUnqueued(id: delivery.id, keys: keys, message: message, at: now.wall) }
            log(.warning, "local change refused", event: "change-refused", ["request": delivery.id, "error": message])
        } else {
            changes.modify { $0.enqueue(ChangeJournal.Change(id: delivery.id, values: values, madeAt: now.wall), at: now.wall) }
            log(.info, "local change queued", event: "change-queued", ["request": delivery.id, "keys": keys.joined(separator: ",")])
        }
        return .taken(journal: true, reports: false)
    }

    /// Queues the app's acknowledgement for the server, or moves it aside when it names a
    /// revision the device never received.
    mutating func relayAck(_ delivery: InboxDelivery, revision: Int64, state: StatusReport.State, message: String) -> Taking {
        guard let settings else { return .waiting }
        guard revision <= settings.revision else {
            let reason = "acknowledges revision \(revision), but the newest revision in settings.json is \(settings.revision)"
            log(.warning, "acknowledgement refused", event: "inbox-refused", ["request": delivery.id, "reason": reason])
            if let path = delivery.path { moveAside(path, reason: reason) }
            return .done
        }
        queue(StatusReport(revision: revision, schemaVersion: settings.schemaVersion, state: state, message: message, source: .app))
        if let awaited = status.awaitingAck, revision >= awaited { stopAwaitingAck() }
        log(
            .notice, "app acknowledged", event: "app-ack", ["revision": "\(revision)", "state": state.rawValue, "message": message])
        if state != .applied, revision == settings.revision, rules.rollbackOnError, !apply.isRollingBack {
            apply.rollbackWanted = (revision, "the app reported \(state.rawValue)" + (message.isEmpty ? "" : ": \(message)"))
        }
        return .taken(journal: false, reports: true)
    }

    /// Moves a request file to `refused/` (a failure is only logged).
    private mutating func moveAside(_ path: String, reason: String) {
        do {
            try files.moveRequestAside(at: path, reason: reason)
        } catch {
            log(.error, "cannot move a request aside", event: "inbox", ["error": error.description])
        }
    }

    /// "Sync now": at once when none was granted in the last ``SyncRules/syncNowInterval``,
    /// else at the end of it (requests in between are one). The backoff still applies.
    mutating func requestSyncNow(_ now: Moment) {
        let earliest = timers.lastSyncNow.map { max(now.instant, $0.advanced(by: rules.syncNowInterval)) } ?? now.instant
        timers.syncNowAt = timers.syncNowAt.map { min($0, earliest) } ?? earliest
    }

    // MARK: - Files

    /// Saves what this event changed, in the order that keeps the records true: the changes and
    /// the reports, then the request files whose effect is on disk, then `status.json`.
    mutating func saveRecords(_ now: Moment) {
        if let error = changes.save(to: &files) {
            log(.error, "cannot save changes.json", event: "disk-error", ["error": error.description])
        }
        flushStatusAfterReports()
        if let error = reportQueue.record.save({ (reports) throws(DiskFailure) in try files.saveReports(reports) }) {
            log(.error, "cannot save queued reports", event: "disk-error", ["error": error.description])
        }
        flushStatusAfterReports()
        removeHandledRequests()
        // An outcome is recorded only once its report is safe (``flushStatusAfterReports()``),
        // and nothing while a revision is being applied: its outcome is written once, at the end.
        if statusFile.checkWanted || statusFile.forced, !statusFile.awaitsReport, !apply.isApplying { writeStatus(now) }
    }

    /// Lets `status.json` record an outcome once its report is safe: delivered, or (when it
    /// cannot be delivered now) in `reports.json`. Until then the status is not written at all.
    mutating func flushStatusAfterReports() {
        guard statusFile.awaitsReport else { return }
        if case .delivering = request { return }
        guard reportQueue.record.isSaved else {
            reportQueue.record.wantSave()  // the status follows the save's success
            return
        }
        statusFile.awaitsReport = false
        statusFile.forced = true
        statusFile.checkWanted = true
    }

    /// Removes the files of handled requests whose effect is on disk.
    mutating func removeHandledRequests() {
        var kept: [HandledRequest] = []
        for handled in inbox.handled {
            let journalDone = handled.journalVersion.map { changes.journal.isOnDisk($0) } ?? true
            let reportsDone = handled.reportsVersion.map { reportQueue.record.isOnDisk($0) } ?? true
            guard journalDone && reportsDone else {
                kept.append(handled)
                continue
            }
            do {
                try files.removeRequest(at: handled.path)
            } catch {
                log(.error, "cannot remove a request", event: "inbox", ["error": error.description])
            }
        }
        inbox.handled = kept
    }
}
