import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// Start-up, the settings the server sends, and applying them: validate, persist, hook, report.
extension SyncMachine {
    // MARK: - Start-up

    /// Serves what is on disk, and finishes a revision whose outcome a stop left open.
    mutating func start(_ loaded: LoadedState, _ now: Moment) {
        guard phase == .created else { return }
        phase = .offline
        reportQueue = ReportQueue(loaded: loaded.reports, detail: reportQueue.detail)
        if let problem = loaded.reportsProblem {
            log(.error, "queued reports unreadable; starting with none", event: "disk-error", ["error": problem])
        }
        changes = ChangeSender(loaded: loaded.journal, problem: loaded.journalProblem)
        if let problem = changes.problem {
            log(
                .error, "changes.json unreadable; local changes wait in the inbox until it is repaired or removed", event: "disk-error",
                ["error": problem])
        }
        var status = AppStatus(app: rules.app)
        if let stored = loaded.status, stored.app == rules.app { status = stored }
        // A revision that waited (for a window, for the app's lock) is fetched and checked again.
        let waited = status.waitingRevision
        status.waitingRevision = nil
        status.waitingReason = nil
        statusFile = StatusFile(status, onDisk: loaded.status)
        restoreAckDeadline(now)
        settings = loaded.settings
        previousSettings = loaded.source == .current ? loaded.previous : nil
        knownRevision = loaded.settings?.revision
        metadata = loaded.metadata
        if let stored = loaded.status, let latest = stored.latestRevision, latest > knownRevision ?? 0, latest != waited,
            stored.state == .error || stored.state == .unsupported
        {
            // A revision refused before the stop stays decided on: it is neither checked nor
            // reported again when the server sends it once more.
            knownRevision = latest
            statusFile.verdictError = stored.lastError
        }
        switch loaded.source {
        case .previous:
            guard let settings else { break }
            let message = SettingsVerdict.message(
                "settings.json was unusable; serving revision \(settings.revision) from settings.previous.json", loaded.problems)
            log(.error, "settings.json unusable, previous generation restored", event: "restored", ["error": message])
            restorePreviousFile()
            statusFile.verdictError = message
            queue(
                StatusReport(
                    revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: message, source: .agent))
            reportQueue.record.wantSave()
        case .none where !loaded.problems.isEmpty:
            let message = SettingsVerdict.message("no usable settings on disk", loaded.problems)
            log(.error, "no usable settings on disk", event: "disk-error", ["error": message])
            statusFile.verdictError = message
        default:
            break
        }
        guard let settings else { return }
        if loaded.editedWhileStopped, loaded.source == .current { distrustLoadedSettings(now) }
        settleChanges(upTo: settings.revision, now)
        log(
            .info, "serving settings from disk", event: "loaded",
            ["revision": "\(settings.revision)", "schema_version": "\(settings.schemaVersion)"])
        actions.append(.showStatus("revision \(settings.revision) from disk"))
        actions.append(.served)
        if StartupRecovery.needsCompletion(settings: settings, status: loaded.status) || loaded.source == .previous {
            beginFinishing(Finishing(settings: settings, kind: .applied(withoutLock: nil)), now)
        }
    }

    /// Enrolled and scanned: requests left while the agent was down go before the first request.
    mutating func goOnline(_ requests: [InboxDelivery], _ now: Moment) {
        guard case .awaitingOnline = request else { return }
        request = nil
        phase = .online
        if !requests.isEmpty { requestsArrived(requests, now) }
    }

    // MARK: - Answers

    mutating func settingsAnswered(_ answer: SettingsAnswer, _ now: Moment) {
        guard case .fetching(let fetch) = request else { return }
        request = nil
        markReached(now)
        settingsAnswerHeard(answer, carried: fetch.carrying?.report)
        if answer.rotationRequested { rotation.requested() }
        switch fetch.purpose {
        case .poll:
            // A new turn: reports that waited go again, changes are retried, requests looked at.
            reportQueue.newTurn()
            changes.conflicts = 0
            checkSettingsSoon(now)
            defer { beginTurn(now) }
            timers.pollOutcomePending = true
            if let nextPoll = answer.nextPoll {
                // Not a failure: the server sheds long-polls and says when to come back.
                log(
                    .info, "the server is busy; the next request waits as it asks", event: "server-busy",
                    ["next_poll": nextPoll.secondsText])
            }
            guard let document = answer.document else {
                pollSucceeded()
                let elapsed = fetch.startedAt.duration(to: now.instant)
                let outcome: PollSchedule.Outcome = answer.nextPoll.map { .deferredByServer($0) } ?? .unchanged(elapsed: elapsed)
                timers.nextFetchAt = now.instant.advanced(by: timers.schedule.delay(after: outcome, using: &random))
                return
            }
            if document.revision == knownRevision {
                // Decided on already (applied or refused): the server ignored If-None-Match.
                // Nothing is done again, nothing reported again, and the next request waits.
                noteRepeated(document)
                timers.nextFetchAt = now.instant.advanced(by: timers.schedule.delay(after: .repeated, using: &random))
                return
            }
            let outcome: PollSchedule.Outcome = answer.nextPoll.map { .deferredByServer($0) } ?? .changed
            timers.nextFetchAt = now.instant.advanced(by: timers.schedule.delay(after: outcome, using: &random))
            receive(document, now)
        case .refresh:
            guard let document = answer.document else { return }
            receive(document, now)
        }
    }

    /// What every turn (each answered settings request) retries.
    mutating func beginTurn(_ now: Moment) {
        changes.journal.retryAfterFailure()
        reportQueue.record.retryAfterFailure()
        if inbox.handled.contains(where: { $0.reportsVersion != nil }) || statusFile.awaitsReport { reportQueue.record.wantSave() }
        if inbox.waiting.isEmpty {
            reloadJournalIfUnreadable(now)
        } else {
            handleWaitingRequests(now)  // which reads changes.json again first
        }
    }

    /// A revision decided on already (applied or refused) came again: nothing is done or
    /// reported again; the request it answered went well.
    mutating func noteRepeated(_ document: SettingsDocument) {
        log(.debug, "the server sent a revision already decided on", event: "repeated", ["revision": "\(document.revision)"])
        pollSucceeded()
    }

    /// Decides on a document the server sent.
    mutating func receive(_ document: SettingsDocument, _ now: Moment) {
        if restoreFromServer(document, now) {
            dropDeferred()
            settleChanges(upTo: document.revision, now)
            return
        }
        if let settings, document.revision == settings.revision, document.schemaVersion == settings.schemaVersion {
            dropDeferred()
            knownRevision = document.revision
            settleChanges(upTo: document.revision, now)
            pollSucceeded()
            return
        }
        if document.revision == knownRevision {
            // Refused already (a download after a change or a conflict brought it again):
            // nothing is done or reported again.
            noteRepeated(document)
            return
        }
        statusFile.record.value.latestRevision = document.revision
        if let metadata, Int64(metadata.version) == document.schemaVersion {
            decide(on: document, with: .success(metadata), now)
            return
        }
        apply.stage = .fetchingMetadata(document, waiting: apply.deferred)
        actions.append(.fetchMetadata(ifNoneMatch: apply.fetchedMetadata?.etag))
    }

    mutating func metadataAnswered(_ answer: MetadataDocument?, _ now: Moment) {
        guard case .fetchingMetadata(let document, _) = apply.stage else { return }
        _ = apply.metadataRequestEnded()
        if let answer {
            apply.fetchedMetadata = answer
            log(.info, "metadata fetched", event: "metadata", ["etag": answer.etag])
        }
        guard let fetchedMetadata = apply.fetchedMetadata else {
            fail(.transient("the server sent no metadata for the app"), now)
            return
        }
        decide(on: document, with: fetchedMetadata.parsed, now)
    }

    /// Refuses the document, or persists it.
    mutating func decide(on document: SettingsDocument, with candidate: Result<Metadata, MetadataError>, _ now: Moment) {
        switch SettingsVerdict.evaluate(document, app: rules.app, metadata: candidate) {
        case .needsMetadata(let version):
            apply.fetchedMetadata = nil
            fail(
                .transient(
                    "the settings name schema version \(document.schemaVersion) but the server's metadata is version \(version); fetching again"
                ), now)
        case .refuse(let state, let message):
            dropDeferred()
            knownRevision = document.revision
            statusFile.verdictError = message
            statusFile.record.value.state = state == .unsupported ? .unsupported : .error
            log(
                .warning, "revision refused", event: "refused",
                [
                    "revision": "\(document.revision)", "schema_version": "\(document.schemaVersion)", "state": state.rawValue,
                    "message": message,
                ])
            actions.append(.showStatus("revision \(document.revision) \(state.rawValue), serving \(servedText)"))
            stopAwaitingAck()
            settleChanges(upTo: document.revision, refusal: message, now)
            pollSucceeded()
            queueOutcome(
                StatusReport(
                    revision: document.revision, schemaVersion: document.schemaVersion, state: state, message: message, source: .agent))
        case .apply:
            guard case .success(let newMetadata) = candidate else { return }
            let received = DeviceSettings(document, syncedAt: now.wall)
            let metadataBytes = metadata?.version != newMetadata.version ? apply.fetchedMetadata?.bytes : nil
            // Applied when allowed: inside an apply window, with the app's update lock taken. A
            // newer revision replacing one that waits for the lock waits as long in all.
            let refusedSince = apply.lockRefusedSince
            dropDeferred()
            apply.lockRefusedSince = refusedSince
            knownRevision = document.revision
            apply.deferred = DeferredApply(
                settings: received, metadata: newMetadata, metadataBytes: metadataBytes, readiness: .waiting(checkAt: now.instant))
        }
    }

    /// Writes a deferred revision whose time has come (the lock taken or overridden, nothing in
    /// flight), and begins finishing it.
    mutating func write(_ deferred: DeferredApply, _ now: Moment) {
        let received = deferred.settings
        do {
            try files.persist(received, metadata: deferred.metadataBytes)
        } catch {
            releaseUpdateLock()
            // Not decided on: the server's revision is fetched and tried again after the backoff.
            knownRevision = settings?.revision
            let message = "cannot write the settings: \(error)"
            queueOutcome(
                StatusReport(
                    revision: received.revision, schemaVersion: received.schemaVersion, state: .error, message: message, source: .agent))
            fail(.transient(message), now)
            return
        }
        let changed = SettingsValues.changedKeys(settings?.values ?? [:], received.values)
        metadata = deferred.metadata
        if let settings, settings.revision != received.revision { previousSettings = settings }
        settings = received
        knownRevision = received.revision
        pollSucceeded()
        settleChanges(upTo: received.revision, now)
        log(
            .notice, "settings applied", event: "applied",
            [
                "revision": "\(received.revision)", "schema_version": "\(received.schemaVersion)",
                "changed": changed.joined(separator: ","),
            ])
        actions.append(.showStatus("revision \(received.revision) written"))
        actions.append(.served)
        var withoutLock: String?
        if case .withoutLock(let reason) = deferred.readiness { withoutLock = reason }
        beginFinishing(Finishing(settings: received, kind: .applied(withoutLock: withoutLock)), now)
        if !inbox.waiting.isEmpty { handleWaitingRequests(now) }
    }

    // MARK: - Hook and outcome

    /// Runs the hook after a random delay of up to `jitter` (so a fleet does not restart its
    /// apps in the same second), or finishes at once without one.
    mutating func beginFinishing(_ finishing: Finishing, _ now: Moment) {
        let hookAt = rules.hasHook ? now.instant.advanced(by: RetryBackoff.uniform(upTo: timers.schedule.jitter, using: &random)) : nil
        if let withoutHook = apply.finish(finishing, hookAt: hookAt) { finish(withoutHook, .succeeded, now) }
    }

    mutating func startHookWhenDue(_ now: Moment) {
        guard case .hookDelay(let finishing, let until, let waiting) = apply.stage, now.instant >= until else { return }
        apply.stage = .hook(finishing, waiting: waiting)
        actions.append(.runHook(finishing.settings, secrets: metadata?.secretScalars(in: finishing.settings.values) ?? []))
    }

    mutating func hookFinished(_ outcome: HookOutcome, _ now: Moment) {
        guard case .hook(let finishing, let waiting) = apply.stage else { return }
        apply.stage = waiting.map { .deferred($0) } ?? .idle
        finish(finishing, outcome, now)
    }

    /// Records the outcome of settings just written: the report, the app's acknowledgement to
    /// wait for, and `status.json`. A cancelled hook records nothing: the next start finishes it.
    mutating func finish(_ finishing: Finishing, _ outcome: HookOutcome, _ now: Moment) {
        let applied = finishing.settings
        var state = StatusReport.State.applied
        var message = ""
        switch outcome {
        case .cancelled:
            releaseUpdateLock()
            return
        case .failed(let reason):
            state = .error
            message = reason
            log(.error, "hook failed", event: "hook", ["revision": "\(applied.revision)", "error": reason])
        case .succeeded:
            if rules.hasHook { log(.info, "hook ran", event: "hook", ["revision": "\(applied.revision)"]) }
        }
        var detail: StatusReport.Detail?
        switch finishing.kind {
        case .rollback(let from, let reason):
            finishRollback(from: from, reason: reason, restored: applied, hookFailure: state == .error ? message : nil, now)
            return
        case .applied(let withoutLock):
            if state == .applied, let withoutLock { message = withoutLock }
        case .restoredAfterEdit:
            detail = .restoredAfterLocalEdit
            if state == .applied { message = "settings.json was changed on the device; revision \(applied.revision) was put back" }
        }
        if state == .error, startRollback(from: applied, reason: "the hook failed: \(message)", now) { return }
        // The lock taken for a revision still waiting to be written (an edit was put back
        // first) is kept for it.
        if !apply.isReadyToWrite { releaseUpdateLock() }
        statusFile.verdictError = state == .applied ? nil : message
        if state == .applied { awaitAck(for: applied.revision, now) } else { stopAwaitingAck() }
        statusFile.record.value.revision = applied.revision
        statusFile.record.value.schemaVersion = applied.schemaVersion
        statusFile.record.value.state = state == .applied ? .applied : .error
        statusFile.record.value.latestRevision = max(status.latestRevision ?? applied.revision, applied.revision)
        queueOutcome(
            StatusReport(
                revision: applied.revision, schemaVersion: applied.schemaVersion, state: state, message: message, source: .agent,
                detail: detail))
        actions.append(.showStatus("revision \(applied.revision) \(state.rawValue)"))
    }

    // MARK: - Reaching the server

    mutating func markReached(_ now: Moment) {
        statusFile.record.value.lastSync = now.wall
        statusFile.checkWanted = true
        guard statusFile.transportError != nil else { return }
        statusFile.transportError = nil
        log(.notice, "server reached again", event: "reconnected")
        actions.append(.showStatus(settings.map { "revision \($0.revision) \(status.state.rawValue)" } ?? "no settings yet"))
    }

    /// New polling and reporting values (``Event/retune(_:)``): from the next request and report
    /// on; a request in flight ends as it was sent.
    mutating func retune(_ tuning: PollTuning) {
        timers.schedule.retune(longPollWait: tuning.longPollWait, pollInterval: tuning.pollInterval, jitter: tuning.jitter)
        reportQueue.detail = tuning.reportDetail
        log(
            .info, "polling retuned", event: "policy",
            [
                "long_poll_wait": "\(tuning.longPollWait)", "poll_interval": "\(tuning.pollInterval)",
                "jitter": "\(tuning.jitter)", "status_reports": tuning.reportDetail.rawValue,
            ])
    }
}
