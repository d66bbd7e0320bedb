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
///   report says why.
/// - With `rollbackOnError`, a revision whose hook fails, or whose app reports `error` or
///   `unsupported`, is undone: the previous generation of `settings.json` is put back, its
///   hook runs again, and the revision is reported `error` with "rolled back to revision N".
///   The revision stays decided on: it is not applied again until a newer one comes. A
///   rollback is never rolled back, and a previous generation of another schema version is not
///   restored (its metadata is not the one in use).
extension SyncMachine {
    /// A revision checked and waiting to be applied.
    public struct DeferredApply: Sendable where Instant: Sendable {
        public var settings: DeviceSettings
        var metadata: Metadata
        var metadataBytes: [UInt8]?
        /// When to look again (a window opens, the update lock is tried again).
        var checkAt: Instant
        /// ``SyncMachine/Action/takeUpdateLock`` was asked; its answer comes next.
        var awaitingLock = false
        /// The lock is taken: the revision is written as soon as nothing else is in flight.
        var lockHeld = false
        /// The app held the lock past ``SyncRules/updateLockMaxHold``: written without it.
        var lockOverridden = false
    }

    /// A rollback under way.
    struct Rollback {
        /// The revision rolled back from.
        var from: DeviceSettings
        /// Why: the hook failed, or the app reported an error.
        var reason: String
    }

    /// Between a revision's arrival and its outcome: its checks, the update lock, writing it,
    /// its hook (`status.json` is written once it is decided).
    var isApplying: Bool {
        slot.isApplying || deferred?.awaitingLock == true || deferred?.lockHeld == true || deferred?.lockOverridden == true
    }

    /// How often a lock the app holds is tried again.
    public static var updateLockRetry: Duration { .seconds(2) }

    /// A deferred revision's time has come: inside a window, try the lock; outside, wait for
    /// the next window.
    mutating func checkDeferredWhenDue(_ now: Moment) {
        guard var deferred, !deferred.awaitingLock, !deferred.lockHeld, !deferred.lockOverridden, !slot.isApplying, rollback == nil else {
            return
        }
        guard now.instant >= deferred.checkAt else { return }
        guard rules.applyWindows.allowApplying(atLocal: now.local) else {
            let opens = rules.applyWindows.nextOpening(atOrAfterLocal: now.local)
            deferred.checkAt = now.instant.advanced(by: .seconds(opens - now.local))
            self.deferred = deferred
            updateLockRefusedSince = nil  // not trying now: the app may hold its lock as it likes
            let windows = rules.applyWindows.map(\.description).joined(separator: ", ")
            wait(
                deferred,
                reason:
                    "outside the apply windows (\(windows), device local time); the next opens at \(Timestamp.format(now.wall + opens - now.local))",
                now)
            return
        }
        deferred.awaitingLock = true
        self.deferred = deferred
        actions.append(.takeUpdateLock)
    }

    mutating func updateLockAnswered(_ taken: Bool, _ now: Moment) {
        guard var deferred, deferred.awaitingLock else {
            if taken { actions.append(.releaseUpdateLock) }
            return
        }
        deferred.awaitingLock = false
        if taken {
            updateLockRefusedSince = nil
            holdsUpdateLock = true
            deferred.lockHeld = true
            self.deferred = deferred
            return
        }
        let since = updateLockRefusedSince ?? now.instant
        updateLockRefusedSince = since
        if since.duration(to: now.instant) >= rules.updateLockMaxHold {
            deferred.lockOverridden = true
            self.deferred = deferred
            let held = Self.spoken(rules.updateLockMaxHold)
            appliedWithoutLock = (
                deferred.settings.revision,
                "applied without the update lock: the app held updates.lock for over \(held) (updateLockMaxHold)"
            )
            log(
                .warning, "applying without the update lock", event: "update-lock-overridden",
                ["revision": "\(deferred.settings.revision)", "held_for": held])
            return
        }
        deferred.checkAt = now.instant.advanced(by: Self.updateLockRetry)
        self.deferred = deferred
        wait(deferred, reason: "the app holds its update lock (updates.lock); applying when it lets go", now)
    }

    /// `1 h`, `90 s`: a duration as the log and reports say it.
    static func spoken(_ duration: Duration) -> String {
        let seconds = duration.components.seconds
        return seconds % 3600 == 0 ? "\(seconds / 3600) h" : seconds % 60 == 0 ? "\(seconds / 60) min" : "\(seconds) s"
    }

    /// With the lock taken (or overridden) and nothing in flight, writes the deferred revision.
    mutating func applyDeferredWhenLocked(_ now: Moment) {
        // An edit of settings.json is put back first: the previous generation kept is the agent's own.
        guard let deferred, deferred.lockHeld || deferred.lockOverridden, slot.isFree, !(localEdit?.holdsWrites ?? false) else { return }
        self.deferred = nil
        if status.waitingRevision != nil {
            status.waitingRevision = nil
            status.waitingReason = nil
            statusCheckWanted = true
        }
        slot = .persisting(deferred.settings, deferred.metadata)
        actions.append(.persist(deferred.settings, metadata: deferred.metadataBytes))
    }

    /// Forgets a deferred revision (a newer one replaces it or was refused, or the server is
    /// back on the one served), letting go of the lock taken for it.
    mutating func dropDeferred() {
        guard let deferred else { return }
        if deferred.lockHeld || deferred.awaitingLock { releaseUpdateLock() }
        updateLockRefusedSince = nil
        self.deferred = nil
        if status.waitingRevision != nil {
            status.waitingRevision = nil
            status.waitingReason = nil
            statusCheckWanted = true
        }
    }

    /// Records why `deferred` waits: in `status.json`, the log and the status line when the
    /// reason is new, and in one `pending` report per revision.
    private mutating func wait(_ deferred: DeferredApply, reason: String, _ now: Moment) {
        let revision = deferred.settings.revision
        if status.waitingRevision != revision || status.waitingReason != reason {
            status.waitingRevision = revision
            status.waitingReason = reason
            statusCheckWanted = true
            log(.notice, "revision waits", event: "deferred", ["revision": "\(revision)", "reason": reason])
            actions.append(.showStatus("revision \(revision) waits: \(reason); serving \(servedText)"))
        }
        pollSucceeded()  // an outcome for now: the request that brought it went well
        if pendingReported != revision {
            pendingReported = revision
            queue(
                StatusReport(
                    revision: revision, schemaVersion: deferred.settings.schemaVersion, state: .pending, message: reason, source: .agent))
        }
    }

    mutating func releaseUpdateLock() {
        guard holdsUpdateLock else { return }
        holdsUpdateLock = false
        actions.append(.releaseUpdateLock)
    }

    // MARK: - Rollback

    /// Starts rolling `applied` back to the previous generation, when the configuration asks
    /// for it and there is one to go back to. Returns whether it started.
    mutating func startRollback(from applied: DeviceSettings, reason: String, _ now: Moment) -> Bool {
        guard rules.rollbackOnError, rollback == nil, let previous = previousSettings, previous.revision != applied.revision else {
            return false
        }
        guard previous.schemaVersion == applied.schemaVersion else {
            log(
                .warning, "not rolled back: the previous generation has another schema version", event: "rollback",
                ["revision": "\(applied.revision)", "to": "\(previous.revision)", "reason": reason])
            return false
        }
        rollback = Rollback(from: applied, reason: reason)
        log(
            .warning, "rolling back to the previous generation", event: "rollback",
            ["revision": "\(applied.revision)", "to": "\(previous.revision)", "reason": reason])
        actions.append(.restorePrevious)
        if localEdit?.isFound == true { localEdit = nil }  // the file is replaced whole
        settings = previous
        // settings.previous.json now holds the same generation: nothing older to go back to.
        previousSettings = nil
        stopAwaitingAck()
        actions.append(.showStatus("revision \(applied.revision) failed; rolling back to revision \(previous.revision)"))
        beginFinishing(previous, now)
        return true
    }

    /// The app reported an error on the revision in `settings.json`: roll back once nothing is
    /// in flight (the revision must still be the one served).
    mutating func rollBackWhenWanted(_ now: Moment) {
        guard let wanted = rollbackWanted, slot.isFree else { return }
        rollbackWanted = nil
        guard let settings, settings.revision == wanted.revision else { return }
        if let deferred, deferred.lockHeld || deferred.awaitingLock || deferred.lockOverridden {
            // A newer revision is being applied: it replaces the one the app refused.
            log(
                .notice, "no rollback: a newer revision is being applied", event: "rollback",
                ["revision": "\(wanted.revision)", "newer": "\(deferred.settings.revision)", "reason": wanted.reason])
            return
        }
        _ = startRollback(from: settings, reason: wanted.reason, now)
    }

    /// The previous generation's hook ran: the revision rolled back from is reported `error`.
    mutating func finishRollback(_ rollback: Rollback, restored: DeviceSettings, hookFailure: String?, _ now: Moment) {
        self.rollback = nil
        var message = "\(rollback.reason); rolled back to revision \(restored.revision)"
        if let hookFailure { message += ", whose hook failed too: \(hookFailure)" }
        verdictError = message
        status.revision = restored.revision
        status.schemaVersion = restored.schemaVersion
        status.state = .error
        status.latestRevision = max(status.latestRevision ?? rollback.from.revision, rollback.from.revision)
        log(
            .error, "rolled back", event: "rolled-back",
            ["revision": "\(rollback.from.revision)", "to": "\(restored.revision)", "error": message])
        queueOutcome(
            StatusReport(
                revision: rollback.from.revision, schemaVersion: rollback.from.schemaVersion, state: .error, message: message,
                source: .agent))
        actions.append(.showStatus("revision \(rollback.from.revision) error, rolled back to revision \(restored.revision)"))
        releaseUpdateLock()
    }
}
