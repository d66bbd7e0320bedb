import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// Applying only when it is safe, and undoing what went wrong: apply windows, the app's update
/// lock, and the rollback to the previous generation.
///
/// - A revision that passed its checks is applied inside one of the app's `applyWindows` (local
///   time; none: at any time), and only with the app's update lock taken (an app holding it is
///   busy). Otherwise it waits: `status.json` says why, the server gets one `pending` report
///   for it, and polling goes on (a newer revision replaces it). The window's opening is an
///   alarm; the lock is tried again every ``updateLockRetry``. An app that keeps the lock for
///   ``SyncRules/updateLockMaxHold`` (default 1 h) from the first refusal has the revision
///   applied anyway: a warning is logged (`event=update-lock-overridden`) and the `applied`
///   report says why. A lock that cannot be used at all (its file unreadable) never blocks
///   updates: said in the log, then applied.
/// - With `rollbackOnError`, a revision whose hook fails, or whose app reports `error` or
///   `unsupported`, is undone: the previous generation of `settings.json` is put back, its
///   hook runs again, and the revision is reported `error` with "rolled back to revision N".
///   The revision stays decided on: it is not applied again until a newer one comes. A
///   rollback is never rolled back, and a previous generation of another schema version is not
///   restored (its metadata is not the one in use).
extension SyncMachine {
    /// How often a lock the app holds is tried again.
    public static var updateLockRetry: Duration { .seconds(2) }

    /// Moves the apply pipeline on as far as this instant allows: a rollback asked for, the
    /// check and restore of `settings.json`, a deferred revision's window and lock, writing it,
    /// and the hook once its delay is over.
    mutating func advanceApply(_ now: Moment) {
        rollBackWhenWanted(now)
        checkSettingsWhenDue(now)
        restoreWhenWanted(now)
        checkDeferredWhenDue(now)
        writeDeferredWhenReady(now)
        startHookWhenDue(now)
    }

    /// A deferred revision's time has come: inside a window, try the lock; outside, wait for
    /// the next window.
    mutating func checkDeferredWhenDue(_ now: Moment) {
        guard var deferred = apply.deferred, case .waiting(let checkAt) = deferred.readiness, !apply.holdsRequestSlot,
            now.instant >= checkAt
        else { return }
        guard rules.applyWindows.allowApplying(atLocal: now.local) else {
            let opens = rules.applyWindows.nextOpening(atOrAfterLocal: now.local)
            deferred.readiness = .waiting(checkAt: now.instant.advanced(by: .seconds(opens - now.local)))
            apply.deferred = deferred
            apply.lockRefusedSince = nil  // not trying now: the app may hold its lock as it likes
            let windows = rules.applyWindows.map(\.description).joined(separator: ", ")
            wait(
                deferred,
                reason:
                    "outside the apply windows (\(windows), device local time); the next opens at \(Timestamp.format(now.wall + opens - now.local))",
                now)
            return
        }
        if takeUpdateLock() {
            apply.lockRefusedSince = nil
            apply.holdsUpdateLock = true
            deferred.readiness = .lockHeld
            apply.deferred = deferred
            return
        }
        let since = apply.lockRefusedSince ?? now.instant
        apply.lockRefusedSince = since
        if since.duration(to: now.instant) >= rules.updateLockMaxHold {
            let held = Self.spoken(rules.updateLockMaxHold)
            deferred.readiness = .withoutLock(
                reason: "applied without the update lock: the app held updates.lock for over \(held) (updateLockMaxHold)")
            apply.deferred = deferred
            log(
                .warning, "applying without the update lock", event: "update-lock-overridden",
                ["revision": "\(deferred.settings.revision)", "held_for": held])
            return
        }
        deferred.readiness = .waiting(checkAt: now.instant.advanced(by: Self.updateLockRetry))
        apply.deferred = deferred
        wait(deferred, reason: "the app holds its update lock (updates.lock); applying when it lets go", now)
    }

    /// Tries the app's update lock; one that cannot be used counts as taken.
    private mutating func takeUpdateLock() -> Bool {
        do {
            return try files.takeUpdateLock()
        } catch {
            log(.error, "cannot use the update lock; applying without it", event: "disk-error", ["error": error.description])
            return true
        }
    }

    /// `1 h`, `90 s`: a duration as the log and reports say it.
    static func spoken(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds % 3600 == 0 ? "\(seconds / 3600) h" : seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }

    /// With the lock taken (or overridden) and nothing in flight, writes the deferred revision.
    /// An edit of `settings.json` is looked for and put back first: the previous generation kept
    /// is the agent's own.
    mutating func writeDeferredWhenReady(_ now: Moment) {
        guard apply.isReadyToWrite, isFree else { return }
        if localEdits.isSettling { checkSettingsFile(now) }
        restoreWhenWanted(now)
        guard isFree, let deferred = apply.deferred, deferred.isReadyToWrite, !localEdits.isFound else { return }
        apply.stage = .idle
        clearWaitingStatus()
        write(deferred, now)
    }

    /// Forgets a deferred revision (a newer one replaces it or was refused, or the server is
    /// back on the one served), letting go of the lock taken for it.
    mutating func dropDeferred() {
        guard let deferred = apply.deferred else { return }
        if case .lockHeld = deferred.readiness { releaseUpdateLock() }
        apply.lockRefusedSince = nil
        apply.deferred = nil
        clearWaitingStatus()
    }

    private mutating func clearWaitingStatus() {
        guard status.waitingRevision != nil else { return }
        statusFile.record.value.waitingRevision = nil
        statusFile.record.value.waitingReason = nil
        statusFile.checkWanted = true
    }

    /// Records why `deferred` waits: in `status.json`, the log and the status line when the
    /// reason is new, and in one `pending` report per revision.
    private mutating func wait(_ deferred: DeferredApply, reason: String, _ now: Moment) {
        let revision = deferred.settings.revision
        if status.waitingRevision != revision || status.waitingReason != reason {
            statusFile.record.value.waitingRevision = revision
            statusFile.record.value.waitingReason = reason
            statusFile.checkWanted = true
            log(.notice, "revision waits", event: "deferred", ["revision": "\(revision)", "reason": reason])
            actions.append(.showStatus("revision \(revision) waits: \(reason); serving \(servedText)"))
        }
        pollSucceeded()  // an outcome for now: the request that brought it went well
        if apply.pendingReported != revision {
            apply.pendingReported = revision
            queue(
                StatusReport(
                    revision: revision, schemaVersion: deferred.settings.schemaVersion, state: .pending, message: reason, source: .agent))
        }
    }

    mutating func releaseUpdateLock() {
        guard apply.holdsUpdateLock else { return }
        apply.holdsUpdateLock = false
        files.releaseUpdateLock()
    }

    // MARK: - Rollback

    /// Starts rolling `applied` back to the previous generation, when the configuration asks
    /// for it and there is one to go back to. Returns whether it started.
    mutating func startRollback(from applied: DeviceSettings, reason: String, _ now: Moment) -> Bool {
        guard rules.rollbackOnError, !apply.isRollingBack, let previous = previousSettings, previous.revision != applied.revision else {
            return false
        }
        guard previous.schemaVersion == applied.schemaVersion else {
            log(
                .warning, "not rolled back: the previous generation has another schema version", event: "rollback",
                ["revision": "\(applied.revision)", "to": "\(previous.revision)", "reason": reason])
            return false
        }
        log(
            .warning, "rolling back to the previous generation", event: "rollback",
            ["revision": "\(applied.revision)", "to": "\(previous.revision)", "reason": reason])
        restorePreviousFile()
        localEdits.forgetFound()  // the file is replaced whole
        settings = previous
        // settings.previous.json now holds the same generation: nothing older to go back to.
        previousSettings = nil
        stopAwaitingAck()
        actions.append(.showStatus("revision \(applied.revision) failed; rolling back to revision \(previous.revision)"))
        beginFinishing(Finishing(settings: previous, kind: .rollback(from: applied, reason: reason)), now)
        return true
    }

    /// Puts `settings.previous.json` back as `settings.json` (a failure is only logged).
    mutating func restorePreviousFile() {
        do {
            try files.restorePrevious()
        } catch {
            log(.error, "cannot restore settings.json", event: "disk-error", ["error": error.description])
        }
    }

    /// The app reported an error on the revision in `settings.json`: roll back once nothing is
    /// in flight (the revision must still be the one served).
    mutating func rollBackWhenWanted(_ now: Moment) {
        guard let wanted = apply.rollbackWanted, isFree else { return }
        apply.rollbackWanted = nil
        guard let settings, settings.revision == wanted.revision else { return }
        if let deferred = apply.deferred, deferred.isReadyToWrite {
            // A newer revision is being applied: it replaces the one the app refused.
            log(
                .notice, "no rollback: a newer revision is being applied", event: "rollback",
                ["revision": "\(wanted.revision)", "newer": "\(deferred.settings.revision)", "reason": wanted.reason])
            return
        }
        _ = startRollback(from: settings, reason: wanted.reason, now)
    }

    /// The previous generation's hook ran: the revision rolled back from is reported `error`.
    mutating func finishRollback(from: DeviceSettings, reason: String, restored: DeviceSettings, hookFailure: String?, _ now: Moment) {
        var message = "\(reason); rolled back to revision \(restored.revision)"
        if let hookFailure { message += ", whose hook failed too: \(hookFailure)" }
        statusFile.verdictError = message
        statusFile.record.value.revision = restored.revision
        statusFile.record.value.schemaVersion = restored.schemaVersion
        statusFile.record.value.state = .error
        statusFile.record.value.latestRevision = max(status.latestRevision ?? from.revision, from.revision)
        log(.error, "rolled back", event: "rolled-back", ["revision": "\(from.revision)", "to": "\(restored.revision)", "error": message])
        queueOutcome(
            StatusReport(revision: from.revision, schemaVersion: from.schemaVersion, state: .error, message: message, source: .agent))
        actions.append(.showStatus("revision \(from.revision) error, rolled back to revision \(restored.revision)"))
        releaseUpdateLock()
    }
}
