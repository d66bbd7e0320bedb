import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// Reports, the device's changes and the app's acknowledgements, as the loop uses them.
extension SyncMachine {
    // MARK: - Reports

    /// Adds a report to the queue in memory.
    mutating func queue(_ report: StatusReport) {
        reportQueue.queue(report)
        statusFile.checkWanted = true
    }

    /// Queues the report of an outcome. `status.json` records the outcome only once the report
    /// is delivered or saved, so a crash in between repeats the report rather than losing it.
    mutating func queueOutcome(_ report: StatusReport) {
        queue(report)
        statusFile.awaitsReport = true
    }

    mutating func reportDelivered() {
        guard case .delivering(let report) = request else { return }
        request = nil
        reportQueue.delivered(report)
        statusFile.checkWanted = true
    }

    /// A report fleetset's server refuses for good is dropped rather than block the queue; on
    /// any other failure the queue waits for the next turn, after the backoff. A report with a
    /// ``FleetProtocol/StatusReport/detail`` goes once more without it first: a server of 0.7.0
    /// refuses the member, and still takes the rest of the report.
    mutating func reportFailed(_ failure: SyncFailure, _ now: Moment) {
        switch reportQueue.deliveryFailed(failure) {
        case .retryWithoutDetail(let report):
            log(
                .warning, "status report refused with its detail; sending it without", event: "report-refused",
                ["revision": "\(report.revision)", "error": failure.summary])
        case .dropped:
            log(.error, "status report refused; dropped", event: "report-refused", ["error": failure.summary])
            statusFile.checkWanted = true
        case .waits:
            // The rest wait for the next turn (the settings request still goes), and every
            // request waits for the backoff first.
            fail(failure, now)
        }
    }

    // MARK: - The device's changes

    /// The oldest change that needs a request (see ``ChangeSender/next(served:metadata:base:at:)``),
    /// logging the ones that ended without one.
    mutating func nextChangeToSend(_ now: Moment) -> ChangeSender.Outgoing? {
        let (outgoing, ended) = changes.next(served: settings, metadata: metadata, base: knownRevision, at: now.wall)
        for end in ended {
            switch end {
            case .refused(let change, let message): logRefusal(change, message)
            case .settled(let outcomes, let revision): logSettled(outcomes, revision: revision)
            }
        }
        return outgoing
    }

    /// The server took the change: download again (the server may have coerced values; only
    /// validated settings reach the file). It ends `applied` once `settings.json` holds it.
    mutating func changeConfirmed(_ revision: Int64, _ now: Moment) {
        guard case .patching(let change) = request else { return }
        request = nil
        changes.confirmed(change, revision: revision)
        statusFile.checkWanted = true
        log(
            .info, "local change confirmed", event: "change-confirmed",
            ["request": change.id, "keys": change.values.keys.sorted().joined(separator: ","), "revision": "\(revision)"])
        startFetch(.refresh, now)
    }

    /// A 409 fetches the new revision and tries again (the change is checked against it), up to
    /// ``SyncRules/conflictLimit`` times in a row, then backs off; a final refusal ends the
    /// change with the server's reason; anything else keeps it queued and backs off.
    mutating func changeFailed(_ change: ChangeJournal.Change, _ failure: SyncFailure, _ now: Moment) {
        if failure.kind == .conflict {
            log(.info, "local change based on a stale revision; fetching the new one", event: "change-conflict", ["request": change.id])
        }
        switch changes.failed(change, failure, at: now.wall) {
        case .refetch: startFetch(.refresh, now)
        case .ended(let message): logRefusal(change, message)
        case .backOff: fail(failure, now)
        }
    }

    private mutating func logRefusal(_ change: ChangeJournal.Change, _ message: String) {
        statusFile.forced = true
        statusFile.checkWanted = true
        log(
            .warning, "local change refused", event: "change-refused",
            ["request": change.id, "keys": change.values.keys.sorted().joined(separator: ","), "error": message])
    }

    /// Ends the changes the server confirmed in `revision` or earlier, now that `settings.json`
    /// holds `revision` (or refused it, with `refusal`).
    mutating func settleChanges(upTo revision: Int64, refusal: String? = nil, _ now: Moment) {
        logSettled(changes.settle(upTo: revision, refusal: refusal, at: now.wall), revision: revision)
    }

    private mutating func logSettled(_ outcomes: [ChangeJournal.Outcome], revision: Int64) {
        guard !outcomes.isEmpty else { return }
        statusFile.forced = true
        statusFile.checkWanted = true
        for outcome in outcomes {
            let applied = outcome.state == .applied
            log(
                .notice, applied ? "local change applied" : "local change refused", event: applied ? "change-applied" : "change-refused",
                ["request": outcome.id, "keys": outcome.keys.joined(separator: ","), "revision": "\(revision)"])
        }
    }

    /// Reads `changes.json` again while it cannot be read (at every turn, and when a request
    /// waits for it).
    mutating func reloadJournalIfUnreadable(_ now: Moment) {
        guard let problem = changes.problem else { return }
        let loaded: ChangeJournal
        do {
            loaded = try files.loadJournal()
        } catch {
            if error.description != problem {
                log(
                    .error, "changes.json unreadable; local changes wait in the inbox until it is repaired or removed",
                    event: "disk-error", ["error": error.description])
                changes.problem = error.description
            }
            return
        }
        log(.notice, "changes.json readable again", event: "disk-recovered")
        changes.reloaded(loaded)
    }

    // MARK: - The app's acknowledgement

    /// With `expectAck`, starts waiting for the app to acknowledge `revision`.
    mutating func awaitAck(for revision: Int64, _ now: Moment) {
        guard rules.expectAck else { return }
        statusFile.record.value.awaitingAck = revision
        statusFile.record.value.ackDeadline = now.wall + Int64((rules.ackTimeout / .milliseconds(1) / 1000).rounded(.up))
        ackDeadline = now.instant.advanced(by: rules.ackTimeout)
    }

    /// Stops waiting: a newer outcome, or the app's own acknowledgement, replaces it.
    mutating func stopAwaitingAck() {
        if status.awaitingAck != nil || status.ackDeadline != nil {
            statusFile.record.value.awaitingAck = nil
            statusFile.record.value.ackDeadline = nil
        }
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
        if status.revision == revision { statusFile.record.value.state = .unsupported }
    }
}
