import FleetDeviceState
import FleetProtocol

/// Which request goes next, when, and what a failure does.
extension SyncMachine {
    /// With nothing in flight: the next request, or nothing until the alarm.
    mutating func decide(_ now: Moment) {
        guard phase == .online else {
            request = .awaitingOnline
            actions.append(.awaitOnline)
            return
        }
        if let hold = timers.holdUntil {
            guard now.instant >= hold else { return }
            timers.holdUntil = nil
        }
        if rotation.isDue(at: now.instant) {
            request = .rotating
            actions.append(.rotateToken)
            return
        }
        let syncNowDue = timers.syncNowAt.map { now.instant >= $0 } ?? false
        // A granted "sync now" starts a new turn: reports that waited for one go again.
        if syncNowDue { reportQueue.newTurn() }
        let timerDue = timers.nextFetchAt.map { now.instant >= $0 } ?? true
        let carried = reportToCarry(now, fetchDue: timerDue || syncNowDue)
        // The report on its way stays in reports.json until the answer: that file must not hold
        // reports delivered since it was saved (a stop would send them again).
        if carried != nil, !reportQueue.record.isSaved { reportQueue.record.wantSave() }
        if carried == nil, let report = reportQueue.nextToDeliver {
            request = .delivering(report)
            actions.append(.deliverReport(report))
            return
        }
        if let outgoing = nextChangeToSend(now) {
            request = .patching(outgoing.change)
            actions.append(.patchSettings(outgoing.patch, basedOn: outgoing.base))
            return
        }
        if syncNowDue { log(.debug, "sync requested", event: "sync-now") }
        // Due or not, the request is handed over now: one on the timer waits in the HTTP
        // client until its time (nothing else wakes for it), and is cancelled if work comes first.
        startFetch(
            .poll(timers.schedule.nextRequest), now, notBefore: timerDue || syncNowDue ? nil : timers.nextFetchAt, carrying: carried)
    }

    /// Starts a settings request, sent at `notBefore` (`nil`: at once), carrying a queued report
    /// when given.
    mutating func startFetch(_ purpose: Fetch.Purpose, _ now: Moment, notBefore: Instant? = nil, carrying: StatusOnPoll.Carried? = nil) {
        let start = notBefore.map { max($0, now.instant) } ?? now.instant
        var fetch = Fetch(purpose: purpose, startedAt: start, carrying: carrying)
        let scheduled = start > now.instant ? start : nil
        let action: Action
        switch purpose {
        case .poll(let poll):
            var asked = false
            if let due = timers.syncNowAt, now.instant >= due {
                // This request is the one "sync now" asked for. One that is not due yet (the
                // 10 s since the last are not over) stays: when it comes, it ends this request.
                timers.syncNowAt = nil
                timers.lastSyncNow = now.instant
                asked = true
            }
            switch poll {
            case .longPoll(let wait):
                action = .fetchSettings(
                    wait: wait, knownRevision: knownRevision, notBefore: scheduled, repeatsWhileUnchanged: [], carrying: carrying)
            case .poll:
                // The plan's last answer comes once the last-sync time on disk is due again
                // (its one-minute refresh), so status.json is as fresh as without plans.
                let sinceWritten = lastSyncWritten(now).map { $0.duration(to: start) } ?? Self.statusRefreshInterval
                let horizon = max(.zero, Self.statusRefreshInterval - sinceWritten)
                let repeats = isIdle && !asked ? timers.schedule.unchangedRepeatDelays(passing: horizon, using: &random) : []
                fetch.repeats = !repeats.isEmpty
                action = .fetchSettings(
                    wait: 0, knownRevision: knownRevision, notBefore: scheduled, repeatsWhileUnchanged: repeats, carrying: carrying)
            }
        case .refresh:
            action = .fetchSettings(wait: 0, knownRevision: nil, notBefore: nil, repeatsWhileUnchanged: [])
        }
        request = .fetching(fetch)
        actions.append(action)
    }

    /// When `status.json`'s last-sync time was written; `now` when this event's end writes it
    /// (the status is looked at after the next request is chosen).
    func lastSyncWritten(_ now: Moment) -> Instant? {
        let due = statusFile.writtenAt.map { $0.duration(to: now.instant) > Self.statusRefreshInterval } ?? true
        if statusFile.checkWanted && due { return now.instant }
        return statusFile.writtenAt
    }

    /// Nothing waits for the next turn (each answered settings request begins one) and the last
    /// request went well: the timer's unchanged answers may be taken by the HTTP client alone,
    /// until `status.json`'s last-sync time is due again, and wake nobody. Whatever comes
    /// meanwhile (a request from the inbox, a reload, an acknowledgement overdue) cancels the
    /// request, as it cancels one the timer scheduled.
    var isIdle: Bool {
        reportQueue.isEmpty && journal.queued.isEmpty && changes.journal.isSaved && changes.problem == nil && inbox.waiting.isEmpty
            && inbox.handled.isEmpty && !statusFile.awaitsReport && !rotation.pending && statusFile.transportError == nil
            && timers.backoff.failures == 0 && !timers.pollOutcomePending && settings != nil
    }

    /// Ends a long-poll in flight, or a request the timer scheduled that has not gone yet, when
    /// something must go to the server now.
    mutating func cancelLongPollForUrgentWork(_ now: Moment) {
        guard case .fetching(var fetch) = request, case .poll(let poll) = fetch.purpose, !fetch.cancelAsked else { return }
        if case .poll = poll, !fetch.isWaiting(at: now.instant) { return }  // a short request: it ends soon by itself
        let urgent =
            rotation.isDue(at: now.instant) || reportQueue.needAnotherRequest(than: fetch.carrying) || nextChangeToSend(now) != nil
            || (timers.syncNowAt.map { now.instant >= $0 } ?? false) || apply.isReadyToWrite || apply.rollbackWanted != nil
            || localEdits.isFound
        guard urgent else { return }
        fetch.cancelAsked = true
        request = .fetching(fetch)
        actions.append(.cancelRequest)
    }

    /// The earliest instant the machine must look again, sent when it changed.
    mutating func updateAlarm(_ now: Moment) {
        var candidates: [Instant] = []
        if let ackDeadline { candidates.append(ackDeadline) }
        if let checkAt = apply.deferredCheckAt { candidates.append(checkAt) }
        if let at = localEdits.settlesAt, settings != nil { candidates.append(at) }
        if let until = apply.hookDelayUntil { candidates.append(until) }
        switch request {
        case nil where phase == .online && !apply.holdsRequestSlot:
            if let holdUntil = timers.holdUntil, holdUntil > now.instant {
                candidates.append(holdUntil)
            } else {
                if let nextFetchAt = timers.nextFetchAt { candidates.append(nextFetchAt) }
                if let syncNowAt = timers.syncNowAt { candidates.append(syncNowAt) }
            }
        case .fetching?:
            if let syncNowAt = timers.syncNowAt { candidates.append(syncNowAt) }
        default:
            break
        }
        let next = candidates.min()
        guard next != timers.alarmAt else { return }
        timers.alarmAt = next
        actions.append(.wake(at: next))
    }

    // MARK: - Failures

    /// A request failed: every request to the server waits for the backoff.
    mutating func fail(_ failure: SyncFailure, _ now: Moment) {
        let delay = timers.backoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
        timers.holdUntil = now.instant.advanced(by: delay)
        timers.pollOutcomePending = false
        statusFile.transportError = failure.summary
        log(.warning, "sync failed", event: "sync-failed", ["error": failure.summary, "retry_in": delay.secondsText])
        actions.append(.showStatus("serving \(servedText); sync failed: \(failure.summary)"))
        statusFile.checkWanted = true
    }

    mutating func requestFailed(_ failure: SyncFailure, _ now: Moment) {
        guard let failed = request else {
            if apply.metadataRequestEnded() { fail(failure, now) }  // the metadata's; a hook does not fail this way
            return
        }
        request = nil
        switch failed {
        case .fetching(let fetch):
            if let carried = fetch.carrying, carriedReportRefused(carried.report, failure) { return }
            if case .poll(let poll) = fetch.purpose, poll != .poll, failure.refusesLongPoll {
                log(.warning, "the server refuses long-polls; polling on the timer", event: "long-poll-refused")
                timers.nextFetchAt = now.instant.advanced(by: timers.schedule.delay(after: .longPollRefused, using: &random))
                reportQueue.newTurn()
            } else {
                fail(failure, now)
            }
        case .patching(let change):
            changeFailed(change, failure, now)
        case .delivering:
            reportFailed(failure, now)
        case .rotating:
            rotationFailed(failure, now)
        case .awaitingOnline:
            request = failed  // enrollment is waited for, not failed
        }
    }

    mutating func requestCancelled() {
        if case .fetching = request { request = nil }
    }

    mutating func tokenRotated() {
        guard case .rotating = request else { return }
        request = nil
        rotation.rotated()
    }

    /// A failed rotation never stops the loop (see ``TokenRotation``).
    mutating func rotationFailed(_ failure: SyncFailure, _ now: Moment) {
        switch rotation.failed(failure, at: now.instant, using: &random) {
        case .holdEverything:
            fail(failure, now)
        case .retryAfter(let delay):
            log(
                .warning, "token rotation failed; the current token keeps working", event: "token-rotation-failed",
                ["error": failure.summary, "retry_in": delay.secondsText])
        }
    }

    /// The regular request's outcome is known and was no failure: the backoff starts over.
    mutating func pollSucceeded() {
        guard timers.pollOutcomePending else { return }
        timers.pollOutcomePending = false
        timers.backoff.reset()
    }
}
