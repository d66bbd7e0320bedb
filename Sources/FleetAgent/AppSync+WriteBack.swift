import FleetAgentCore
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The inbox's requests in an app's loop: changes of writable settings, acknowledgements and
/// "sync now".
///
/// A change is checked against the metadata and the settings in use (the key exists, is
/// `x-writable`, the value fits), queued in `changes.json` (durably; only then is its request
/// file removed), and sent as a merge patch of its keys with `If-Match`, oldest first. After the
/// server confirms, the agent downloads the settings again, validates and persists them; the
/// change ends `applied` once `settings.json` holds the confirmed revision. A 409 fetches the
/// new revision, checks the change against it and sends it again; 403, 422 and other refusals
/// end it with the server's reason; network failures leave it queued for the next attempt, also
/// across restarts.
extension AppSync {
    /// The most 409 answers in a row before the loop backs off.
    static let conflictLimit = 5

    // MARK: - The journal

    /// Reads `changes.json`. While it cannot be read, the agent tries again each time the loop
    /// turns, so repairing or removing the file is enough; until then changes wait in the inbox.
    func loadJournal() {
        do {
            journal = try ChangeJournal.load(layout.changesFile(app.id))
            journalOnDisk = journal
            if journalProblem != nil { logger.notice("changes.json readable again", metadata: ["event": "disk-recovered"]) }
            journalProblem = nil
        } catch {
            let problem = "\(layout.changesFile(app.id)): \(error)"
            if journalProblem != problem {
                logger.error(
                    "changes.json unreadable; local changes wait in the inbox until it is repaired or removed",
                    metadata: ["event": "disk-error", "error": "\(error)"])
            }
            journalProblem = problem
        }
    }

    /// Saves `changes.json` when it changed; returns whether the file now matches the journal.
    @discardableResult
    func saveJournal() -> Bool {
        guard journal != journalOnDisk else { return true }
        guard journalProblem == nil else { return false }
        do {
            try journal.save(to: layout.changesFile(app.id), group: readersGroup)
            journalOnDisk = journal
            status.pendingChanges = journal.queued.count
            return true
        } catch {
            logger.error("cannot save changes.json", metadata: ["event": "disk-error", "error": "\(error)"])
            return false
        }
    }

    /// Ends the changes the server confirmed in `revision` or earlier, now that `settings.json`
    /// holds `revision` (or refused it, with `refusal`).
    func settleChanges(upTo revision: Int64, refusal: String? = nil) {
        let outcomes = journal.settle(upTo: revision, refusal: refusal, at: environment.wallClock())
        guard !outcomes.isEmpty else { return }
        for outcome in outcomes {
            logger.notice(
                outcome.state == .applied ? "local change applied" : "local change refused",
                metadata: [
                    "event": outcome.state == .applied ? "change-applied" : "change-refused", "request": "\(outcome.id)",
                    "keys": "\(outcome.keys.joined(separator: ","))", "revision": "\(revision)",
                ])
        }
        saveJournal()
        writeStatus(force: true)
    }

    // MARK: - The inbox

    /// Handles every request the inbox delivered: queues changes, relays acknowledgements,
    /// records refusals; removes each request file once what it asked for is on disk.
    func handleMailbox() {
        if journalProblem != nil { loadJournal() }
        let deliveries = mailbox.takeAll()
        guard !deliveries.isEmpty else { return }  // the common case, on every turn of the loop
        var retained: [AppMailbox.Delivery] = []
        var handled: [AppMailbox.Delivery] = []
        for delivery in deliveries {
            switch delivery.content {
            case .refused(let reason) where journal.lookup(delivery.id) == .unknown:
                journal.refuseUnqueued(id: delivery.id, keys: [], message: "refused by the inbox: \(reason)", at: environment.wallClock())
            case .refused:
                continue
            case .request(.sync):
                logger.info("sync requested", metadata: ["event": "inbox", "request": "sync"])
                handled.append(delivery)
            case .request(.set(let values)):
                if takeChange(delivery.id, values, path: delivery.path) { handled.append(delivery) } else { retained.append(delivery) }
            case .request(.ack(let revision, let state, let message)):
                if relayAck(delivery, revision: revision, state: state, message: message) {
                    handled.append(delivery)
                } else {
                    retained.append(delivery)
                }
            }
        }
        let journalSaved = saveJournal()
        savePending()
        let reportsSaved = pending == pendingOnDisk
        for delivery in handled {
            guard let path = delivery.path else { continue }
            // A request's file goes only once what it asked for is on disk.
            if case .request(.set) = delivery.content, !journalSaved {
                retained.append(delivery)
                continue
            }
            if case .request(.ack) = delivery.content, !reportsSaved {
                retained.append(delivery)
                continue
            }
            do {
                try FileSystem.removeFile(path)
            } catch {
                logger.error("cannot remove a request", metadata: ["event": "inbox", "error": "\(error)"])
            }
        }
        mailbox.putBack(retained)
        writeStatus()
    }

    /// Checks a change and queues it (or records its refusal). Returns `false` when it must wait:
    /// no settings or metadata yet to check it against, or `changes.json` unreadable.
    private func takeChange(_ id: String, _ values: JSONObject, path: String?) -> Bool {
        switch journal.lookup(id) {
        case .unknown:
            break
        case .queued(let change) where change.values == values:
            return true  // left behind by a crash after it was queued: already in the queue
        default:
            let reason = "request id \(id) was taken already; give each request a file name of its own (the time and a random number)"
            logger.warning("request refused", metadata: ["event": "inbox-refused", "request": "\(id)", "reason": "\(reason)"])
            if let path { try? Inbox.moveAside(path, reason: reason) }
            return true
        }
        guard journalProblem == nil, let settings, let metadata else { return false }
        let now = environment.wallClock()
        let problems = metadata.problems(ofChange: values, to: settings.values)
        let keys = values.keys.sorted()
        if !problems.isEmpty {
            let message = problems.map(\.description).joined(separator: "; ")
            journal.refuseUnqueued(id: id, keys: keys, message: message, at: now)
            logger.warning(
                "local change refused",
                metadata: ["event": "change-refused", "request": "\(id)", "keys": "\(keys.joined(separator: ","))", "error": "\(message)"])
        } else if journal.queued.count >= ChangeJournal.queueCapacity {
            let message = "\(ChangeJournal.queueCapacity) changes are waiting for the server already"
            journal.refuseUnqueued(id: id, keys: keys, message: message, at: now)
            logger.warning("local change refused", metadata: ["event": "change-refused", "request": "\(id)", "error": "\(message)"])
        } else {
            journal.enqueue(ChangeJournal.Change(id: id, values: values, madeAt: now), at: now)
            logger.info(
                "local change queued", metadata: ["event": "change-queued", "request": "\(id)", "keys": "\(keys.joined(separator: ","))"])
        }
        return true
    }

    /// Queues the app's acknowledgement for the server, or moves it aside when it names a
    /// revision the device never received. Returns `false` when there are no settings yet.
    private func relayAck(_ delivery: AppMailbox.Delivery, revision: Int64, state: StatusReport.State, message: String) -> Bool {
        guard let settings else { return false }
        guard revision <= settings.revision else {
            let reason = "acknowledges revision \(revision), but the newest revision in settings.json is \(settings.revision)"
            logger.warning(
                "acknowledgement refused", metadata: ["event": "inbox-refused", "request": "\(delivery.id)", "reason": "\(reason)"])
            if let path = delivery.path { try? Inbox.moveAside(path, reason: reason) }
            return true
        }
        queue(StatusReport(revision: revision, schemaVersion: settings.schemaVersion, state: state, message: message, source: .app))
        if let awaited = status.awaitingAck, revision >= awaited {
            status.awaitingAck = nil
            status.ackDeadline = nil
        }
        logger.notice(
            "app acknowledged",
            metadata: ["event": "app-ack", "revision": "\(revision)", "state": "\(state.rawValue)", "message": "\(message)"])
        return true
    }

    // MARK: - Sending changes

    /// Sends queued changes, oldest first, until none is left or one must wait.
    ///
    /// - Throws: a network failure or a server error worth retrying (the change stays queued).
    func pushChanges(_ client: FleetClient) async throws {
        var conflicts = 0
        while let change = journal.nextToSend, !Task.isCancelled {
            guard let settings, let metadata, let base = knownRevision else { return }
            let problems = metadata.problems(ofChange: change.values, to: settings.values)
            guard problems.isEmpty else {
                endChange(
                    change,
                    refusal: "no longer applies to revision \(settings.revision): " + problems.map(\.description).joined(separator: "; "))
                continue
            }
            var patch = JSONObject()
            for (key, value) in change.values where value == .null || settings.values[key] != value { patch[key] = value }
            if patch.isEmpty, base == settings.revision {
                // Nothing to send: every value is already in place.
                journal.confirm(change.id, revision: settings.revision)
                settleChanges(upTo: settings.revision)
                continue
            }
            environment.board.beginStep(app.id, limit: .seconds(200))
            do {
                let confirmed = try await client.patchSettings(app: app.id, patch: patch.isEmpty ? change.values : patch, basedOn: base)
                journal.confirm(change.id, revision: confirmed.revision)
                saveJournal()
                logger.info(
                    "local change confirmed",
                    metadata: [
                        "event": "change-confirmed", "request": "\(change.id)", "keys": "\(patch.keys.sorted().joined(separator: ","))",
                        "revision": "\(confirmed.revision)",
                    ])
                // Download again: the server may have coerced values; only validated settings reach the file.
                if let fresh = try await client.settings(app: app.id, knownRevision: nil) { try await handle(fresh, client: client) }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                let failure = SyncFailure.classifying(error)
                switch failure.kind {
                case .conflict:
                    conflicts += 1
                    logger.info(
                        "local change based on a stale revision; fetching the new one",
                        metadata: ["event": "change-conflict", "request": "\(change.id)"])
                    guard conflicts <= Self.conflictLimit else { throw failure }
                    if let fresh = try await client.settings(app: app.id, knownRevision: nil) { try await handle(fresh, client: client) }
                case .final:
                    endChange(change, refusal: failure.summary)
                case .transient, .authentication, .throttled:
                    throw failure
                }
            }
        }
    }

    private func endChange(_ change: ChangeJournal.Change, refusal message: String) {
        journal.refuse(change.id, message: message, at: environment.wallClock())
        logger.warning(
            "local change refused",
            metadata: [
                "event": "change-refused", "request": "\(change.id)", "keys": "\(change.values.keys.sorted().joined(separator: ","))",
                "error": "\(message)",
            ])
        saveJournal()
        writeStatus(force: true)
    }

    // MARK: - Waiting for the app's acknowledgement

    /// With `expectAck`, starts waiting for the app to acknowledge `revision`.
    func awaitAck(for revision: Int64) {
        guard app.expectAck else { return }
        status.awaitingAck = revision
        status.ackDeadline = environment.wallClock() + Int64((app.ackTimeout / .milliseconds(1) / 1000).rounded(.up))
    }

    /// How long until the awaited acknowledgement is overdue; `nil` when none is awaited.
    var untilAckDeadline: Duration? {
        guard status.awaitingAck != nil, let deadline = status.ackDeadline else { return nil }
        return .seconds(max(0, deadline - environment.wallClock()))
    }

    /// Stops waiting for an acknowledgement: a newer revision's outcome replaces it.
    func stopAwaitingAck() {
        status.awaitingAck = nil
        status.ackDeadline = nil
    }

    /// Reports an app that did not acknowledge in time as `unsupported`.
    func expireAwaitedAck() {
        guard status.awaitingAck != nil, app.expectAck else {
            stopAwaitingAck()
            return
        }
        guard let revision = status.awaitingAck, let deadline = status.ackDeadline, environment.wallClock() >= deadline else { return }
        let message = "no acknowledgement from the app"
        logger.warning("no acknowledgement from the app", metadata: ["event": "ack-timeout", "revision": "\(revision)"])
        queue(
            StatusReport(
                revision: revision, schemaVersion: settings?.schemaVersion ?? status.schemaVersion ?? 0, state: .unsupported,
                message: message,
                source: .agent))
        savePending()
        stopAwaitingAck()
        if status.revision == revision { status.state = .unsupported }
        writeStatus(force: true)
    }
}
