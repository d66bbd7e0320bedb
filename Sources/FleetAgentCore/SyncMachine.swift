import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// One app's sync loop as a value: it takes events (an answer from the server, a hook that
/// finished, requests from the inbox, a file saved, an alarm) and returns the actions to take
/// (send a request, write a file, run the hook, log, wake me at). It does no I/O and reads no
/// clock: every event comes with the time, monotonic for every delay and deadline and
/// wall-clock seconds only for what is recorded. Its random source is injected. So every rule
/// of the agent is tested as a value, in milliseconds.
///
/// A driver (`AppDriver` in FleetAgent) performs the actions:
/// - **Requests** (``Action/awaitOnline``, ``Action/fetchSettings(wait:knownRevision:)``,
///   ``Action/fetchMetadata(ifNoneMatch:)``, ``Action/patchSettings(_:basedOn:)``,
///   ``Action/deliverReport(_:)``, ``Action/rotateToken``, ``Action/runHook(_:secrets:)``) run
///   one at a time, in the background; each ends with exactly one event: its answer,
///   ``Event/requestFailed(_:)``, or ``Event/requestCancelled`` after ``Action/cancelRequest``.
/// - **Local actions** are done at once, in order. The ones that say so end with an event,
///   which the driver hands back before any other.
/// - ``Action/wake(at:)`` asks for ``Event/alarm`` at that instant (it replaces the one before).
///
/// The rules, each tested in `SyncMachineTests`:
/// - The settings on disk are served first; a revision whose hook or report a stop interrupted
///   is finished at start; an unusable `settings.json` is replaced by its previous generation
///   and reported.
/// - Nothing goes to the server before the device is enrolled and the inbox's first scan is in:
///   requests left while the agent was down go first.
/// - Every request to the server waits for the backoff after a failure (full jitter, at least
///   `Retry-After`); nothing, not even "sync now", overrides it.
/// - A revision the agent already decided on (applied or refused) that comes again in a 200 (a
///   server or proxy ignoring `If-None-Match` and `wait`) counts as unchanged: nothing is done or
///   reported again, and the next request waits the poll timer.
/// - Reports go first, then the device's changes (oldest first), then the settings request.
/// - A long-poll in flight is cancelled only for work that needs the server now: a report, a
///   change, a permitted "sync now", a token rotation.
/// - A server that says it takes a report on the settings request (`Fleetset-Accepts: status`)
///   gets the one queued report on the next settings request instead of a `POST`; a long-poll
///   cancelled for a report is sent again at once carrying it (see `SyncMachine+StatusOnPoll`).
/// - "Sync now" (the CLI, the inbox) is granted at most once per ``SyncRules/syncNowInterval``;
///   more requests in between are coalesced into one at the end of it.
/// - Deadlines (the app's acknowledgement, the hook's delay, backoff, the poll timer) are
///   monotonic: the wall clock jumping changes none of them.
public struct SyncMachine<Instant: InstantProtocol> where Instant.Duration == Duration {
    /// A point in time: `instant` for delays and deadlines, `wall` (seconds since the epoch) for
    /// what is recorded in files and reports.
    public struct Moment: Sendable where Instant: Sendable {
        public var instant: Instant
        public var wall: Int64
        /// The device's offset from UTC in seconds at `wall` (time zone and daylight saving), for
        /// the apply windows, which are in local time.
        public var utcOffset: Int64

        public init(_ instant: Instant, wall: Int64, utcOffset: Int64 = 0) {
            self.instant = instant
            self.wall = wall
            self.utcOffset = utcOffset
        }

        /// `wall` in local time: seconds since the epoch plus the UTC offset.
        public var local: Int64 { wall + utcOffset }
    }

    /// What happened.
    public enum Event: Sendable where Instant: Sendable {
        /// The driver read the app's files (see ``LoadedState``). The first event.
        case started(LoadedState)
        /// The device has its identity and the inbox's first scan is in, with what it found.
        case online(requests: [InboxDelivery])
        /// The answer to ``Action/fetchSettings(wait:knownRevision:)``.
        case settingsAnswer(SettingsAnswer)
        /// The answer to ``Action/fetchMetadata(ifNoneMatch:)``: `nil` when not modified.
        case metadataAnswer(MetadataDocument?)
        /// The server confirmed the change sent with ``Action/patchSettings(_:basedOn:)``.
        case changeConfirmed(revision: Int64)
        /// The server took the report sent with ``Action/deliverReport(_:)``.
        case reportDelivered
        /// The device token was rotated (``Action/rotateToken``).
        case tokenRotated
        /// The request in flight failed.
        case requestFailed(SyncFailure)
        /// The request in flight ended after ``Action/cancelRequest``.
        case requestCancelled
        /// The hook ran (``Action/runHook(_:secrets:)``).
        case hookFinished(HookOutcome)
        /// ``Action/persist(_:metadata:)`` is done: `error` says why it failed.
        case persisted(error: String?)
        /// ``Action/loadJournal`` read `changes.json`, or says why it could not.
        case journalLoaded(ChangeJournal?, problem: String?)
        /// ``Action/saveJournal(_:)`` is done.
        case journalSaved(error: String?)
        /// ``Action/saveReports(_:)`` is done.
        case reportsSaved(error: String?)
        /// ``Action/writeStatus(_:)`` is done.
        case statusWritten(error: String?)
        /// Requests the inbox took, in the order they came.
        case inboxRequests([InboxDelivery])
        /// The answer to ``Action/takeUpdateLock``: whether the agent holds the app's update lock now.
        case updateLock(taken: Bool)
        /// The server's agent policy (with the device's own pins) changed how this app polls and
        /// reports: used from the next request and report on.
        case retune(PollTuning)
        /// `settings.json` changed (a write or a rename in the app's folder, or events were lost):
        /// the machine checks it once the writes have settled.
        case settingsFileChanged
        /// The answer to ``Action/checkSettingsFile``: whether `settings.json` holds something the
        /// agent did not write.
        case settingsFileChecked(edited: Bool)
        /// ``Action/rewriteSettings(_:)`` is done: `error` says why it failed.
        case settingsRewritten(error: String?)
        /// The instant of the last ``Action/wake(at:)`` has come.
        case alarm
        /// Shutdown or reload: the machine stops; a hook cut short is finished at the next start.
        case stop
    }

    /// What to do.
    public enum Action: Sendable, Equatable where Instant: Sendable {
        // Requests, one at a time, each ending with one event.

        /// Wait for the device's identity and the inbox's first scan; then ``Event/online(requests:)``.
        case awaitOnline
        /// `GET …/settings`, with `If-None-Match` when `knownRevision` is given and `?wait=` when
        /// `wait` is above 0 (a long-poll), sent at `notBefore` (`nil`: at once). A request on
        /// the poll timer is handed over at once and waits in the HTTP client, so nothing wakes
        /// before it goes; the machine cancels it when something must go first.
        ///
        /// `repeatsWhileUnchanged` (timer polls of an idle machine only) are the waits of the
        /// polls that follow while the server answers `304`: the HTTP client sends them by
        /// itself and the answer is the first change, failure, or the plan's last `304`.
        ///
        /// `carrying` is a queued report sent with the request (`Fleetset-Status`, to a server
        /// that takes it): delivered when the answer is a 200 or 304 of such a server.
        case fetchSettings(
            wait: Int, knownRevision: Int64?, notBefore: Instant?, repeatsWhileUnchanged: [Duration], carrying: StatusReport? = nil)
        /// `GET …/metadata`, with `If-None-Match`.
        case fetchMetadata(ifNoneMatch: String?)
        /// `PATCH …/settings` with `If-Match`.
        case patchSettings(JSONObject, basedOn: Int64)
        /// `POST …/status`.
        case deliverReport(StatusReport)
        /// `POST /v1/device/token`, then save the new token.
        case rotateToken
        /// Run the app's hook for these settings; `secrets` are redacted from its output.
        case runHook(DeviceSettings, secrets: [String])
        /// End the request in flight (a long-poll) now.
        case cancelRequest

        // Done at once, in order.

        /// Put `settings.previous.json` back as `settings.json` (a failure is only logged).
        case restorePrevious
        /// Compare `settings.json` with the record of what the agent wrote last (its own writes,
        /// this one's included, are never an edit). Ends with ``Event/settingsFileChecked(edited:)``.
        case checkSettingsFile
        /// Write these settings (the served revision) as `settings.json` again over an edit,
        /// keeping `settings.previous.json` as it is. Ends with ``Event/settingsRewritten(error:)``.
        case rewriteSettings(DeviceSettings)
        /// Try to take the app's update lock (`updates.lock`, `flock` exclusive, without waiting):
        /// an app holding it is busy and defers applying. Ends with ``Event/updateLock(taken:)``.
        case takeUpdateLock
        /// Let go of the app's update lock.
        case releaseUpdateLock
        /// Merge these facts (a `null` removes one) into the app's own device facts
        /// (`facts.json`), and have the changed ones reported (a failure is only logged).
        case saveAppFacts(JSONObject)
        /// Write the metadata (when given) and then the settings, each keeping its previous
        /// generation. Ends with ``Event/persisted(error:)``.
        case persist(DeviceSettings, metadata: [UInt8]?)
        /// Read `changes.json` again. Ends with ``Event/journalLoaded(_:problem:)``.
        case loadJournal
        /// Save `changes.json` durably. Ends with ``Event/journalSaved(error:)``.
        case saveJournal(ChangeJournal)
        /// Save `reports.json` durably (remove it when empty). Ends with ``Event/reportsSaved(error:)``.
        case saveReports(PendingReports)
        /// Write `status.json`. Ends with ``Event/statusWritten(error:)``.
        case writeStatus(AppStatus)
        /// Remove a request file whose effect is on disk.
        case removeRequest(path: String)
        /// Move a request file to `refused/` with the reason.
        case moveRequestAside(path: String, reason: String)
        /// A log line.
        case log(LogRecord)
        /// The app's part of the status line `systemctl status` shows.
        case showStatus(String)
        /// The app has settings to serve (for readiness).
        case served
        /// Send ``Event/alarm`` at this instant (`nil`: no alarm).
        case wake(at: Instant?)
    }

    /// What the machine is waiting for.
    enum Slot {
        case free
        case awaitingOnline
        case fetching(Fetch)
        case fetchingMetadata(SettingsDocument)
        case persisting(DeviceSettings, Metadata)
        /// Writing the served revision again over a local edit.
        case rewriting(DeviceSettings)
        case hookDelay(DeviceSettings, until: Instant)
        case hook(DeviceSettings)
        case patching(ChangeJournal.Change)
        case delivering(StatusReport)
        case rotating

        var isFree: Bool {
            if case .free = self { true } else { false }
        }

        /// Between a new revision's arrival and its outcome.
        var isApplying: Bool {
            switch self {
            case .fetchingMetadata, .persisting, .rewriting, .hookDelay, .hook: true
            default: false
            }
        }
    }

    /// A settings request in flight.
    struct Fetch {
        enum Purpose: Equatable {
            /// The regular request (long-poll or timer poll).
            case poll(PollSchedule.Request)
            /// Fetching again after a change was confirmed or met a conflict.
            case refresh
        }

        var purpose: Purpose
        /// When the request goes (or went) out: the poll timer may have scheduled it ahead.
        var startedAt: Instant
        /// The HTTP client repeats it while the answers are unchanged.
        var repeats = false
        /// The queued report the request carries (``StatusOnPoll``).
        var carrying: StatusReport?

        /// Scheduled by the poll timer and not sent yet at `now`, or waiting between repeats:
        /// in either case it is cancelled when something must go first.
        func isWaiting(at now: Instant) -> Bool { startedAt > now || repeats }
    }

    public let rules: SyncRules
    var random: any RandomNumberGenerator
    /// How much each status report says (the agent policy's `statusReports`).
    public internal(set) var reportDetail: AgentPolicy.ReportDetail

    // What the device holds.

    /// The settings on disk (what apps see).
    public internal(set) var settings: DeviceSettings?
    /// The generation before them (`settings.previous.json`): what a rollback restores.
    public internal(set) var previousSettings: DeviceSettings?
    /// A revision checked and waiting to be applied (outside the apply windows, or while the
    /// app holds its update lock).
    public internal(set) var deferred: DeferredApply?
    /// The revision whose `pending` report was queued (one per revision).
    var pendingReported: Int64?
    /// The agent holds the app's update lock (from taking it until the outcome is recorded).
    public internal(set) var holdsUpdateLock = false
    /// The revision being written without the update lock (the app held it past
    /// ``SyncRules/updateLockMaxHold``), and why: the message of its `applied` report.
    var appliedWithoutLock: (revision: Int64, reason: String)?
    /// Since when the app has refused the update lock, try after try, whichever revisions
    /// waited meanwhile (a newer revision does not start the count again); reset when the lock
    /// is taken or the wait is for an apply window. Monotonic, so an agent restart starts it again.
    var updateLockRefusedSince: Instant?
    /// A rollback under way: the revision rolled back from and why; the previous generation's
    /// hook is running.
    var rollback: Rollback?
    /// Where a change of `settings.json` stands, from the watch's event to the restore of an edit.
    var localEdit: LocalEdit?
    /// The revision being put back after an edit: its report says so.
    var restoredRevision: Int64?
    /// When the recent edits were put back (at most ``restoreLimit`` within ``restoreWindow``),
    /// and whether the refusal to put back more was reported.
    var recentRestores: [Instant] = []
    var restoreLimitReported = false
    /// The app reported an error on this revision, and the configuration asks for a rollback:
    /// done when nothing is in flight.
    var rollbackWanted: (revision: Int64, reason: String)?
    /// The metadata the settings were validated with.
    public internal(set) var metadata: Metadata?
    /// The newest metadata fetched (it may not be in use: its values failed).
    var fetchedMetadata: MetadataDocument?
    /// The revision sent in `If-None-Match`: the newest one decided on, applied or refused.
    public internal(set) var knownRevision: Int64?
    /// What `status.json` should say.
    public internal(set) var status: AppStatus
    var statusOnDisk: AppStatus?
    var statusBeingWritten: AppStatus?
    var statusWrittenAt: Instant?
    /// Why the newest revision was refused (or its hook failed); why the server cannot be reached.
    var verdictError: String?
    var transportError: String?

    // Reports and changes, in memory and on disk.

    /// Status reports the server has not received.
    public internal(set) var reports = PendingReports()
    /// The last settings answer said the server takes a report on the settings request
    /// (`Fleetset-Accepts: status`).
    public internal(set) var serverTakesStatusOnPoll = false
    /// A report the server refused on the settings request: it goes by `POST`.
    var reportRefusedOnPoll: StatusReport?
    var reportsOnDisk = PendingReports()
    var reportsBeingSaved: (PendingReports, version: Int)?
    /// Bumped by every change of `reports`; `reportsSavedVersion` is the newest one on disk.
    var reportsVersion = 0
    var reportsSavedVersion = 0
    var reportsSaveWanted = false
    /// A save of `reports.json` failed: the next is tried on the next turn, not at once (a full
    /// disk must not make the loop spin).
    var reportsSaveFailed = false
    /// The device's own changes (`changes.json`).
    public internal(set) var journal = ChangeJournal()
    var journalOnDisk = ChangeJournal()
    var journalBeingSaved: (ChangeJournal, version: Int)?
    var journalVersion = 0
    var journalSavedVersion = 0
    var journalSaveWanted = false
    /// Why `changes.json` cannot be read: changes wait in the inbox rather than overwrite it.
    public internal(set) var journalProblem: String?
    var journalLoading = false

    // The inbox.

    /// Requests that cannot be handled yet (no settings, `changes.json` unreadable).
    public internal(set) var waitingRequests: [InboxDelivery] = []
    /// Handled requests whose files go once what they asked for is on disk.
    var handledRequests: [HandledRequest] = []

    struct HandledRequest {
        var path: String
        var journalVersion: Int?
        var reportsVersion: Int?
    }

    // Time.

    public internal(set) var schedule: PollSchedule
    public internal(set) var backoff = RetryBackoff()
    /// No settings request before this (the poll timer); `nil`: at once.
    public internal(set) var nextFetchAt: Instant?
    /// No request to the server at all before this (backoff after a failure).
    public internal(set) var holdUntil: Instant?
    /// A "sync now" is due at this instant.
    public internal(set) var syncNowAt: Instant?
    var lastSyncNow: Instant?
    /// When an awaited acknowledgement is overdue.
    public internal(set) var ackDeadline: Instant?
    var alarmAt: Instant?

    // Progress.

    var slot: Slot = .free
    var cancelRequested = false
    var started = false
    public internal(set) var isOnline = false
    public internal(set) var isStopped = false
    /// A report failed for a reason other than its own: the rest wait for the next turn.
    var reportsDeferred = false
    /// 409 answers in a row while sending changes.
    var conflicts = 0
    var rotationPending = false
    /// A token rotation that failed waits for its own backoff; the rest of the loop goes on.
    var rotationBackoff = RetryBackoff()
    var rotationNotBefore: Instant?
    /// The regular settings request answered with a new document: the backoff resets once its
    /// outcome is known (applied or refused), not before (a failure on the way counts on).
    var pollOutcomePending = false
    /// An outcome was queued: `status.json` records it once the report is delivered or saved.
    var statusAwaitsReport = false
    var statusCheckWanted = false
    var statusForced = false

    var actions: [Action] = []

    /// - Parameter random: the source of every jitter (injected, so tests repeat).
    public init(rules: SyncRules, random: any RandomNumberGenerator) {
        self.rules = rules
        self.random = random
        status = AppStatus(app: rules.app)
        schedule = PollSchedule(longPollWait: rules.longPollWait, pollInterval: rules.pollInterval, jitter: rules.jitter)
        reportDetail = rules.reportDetail
    }

    /// Takes one event at `now` and returns what to do, in order.
    public mutating func handle(_ event: Event, at now: Moment) -> [Action] {
        actions = []
        guard !isStopped else { return [] }
        switch event {
        case .started(let loaded): start(loaded, now)
        case .online(let requests): goOnline(requests, now)
        case .settingsAnswer(let answer): settingsAnswered(answer, now)
        case .metadataAnswer(let answer): metadataAnswered(answer, now)
        case .changeConfirmed(let revision): changeConfirmed(revision, now)
        case .reportDelivered: reportDelivered(now)
        case .tokenRotated: tokenRotated()
        case .requestFailed(let failure): requestFailed(failure, now)
        case .requestCancelled: requestCancelled()
        case .hookFinished(let outcome): hookFinished(outcome, now)
        case .persisted(let error): persisted(error, now)
        case .journalLoaded(let loaded, let problem): journalLoaded(loaded, problem, now)
        case .journalSaved(let error): journalSaved(error)
        case .reportsSaved(let error): reportsSaved(error)
        case .statusWritten(let error): statusWritten(error, now)
        case .updateLock(let taken): updateLockAnswered(taken, now)
        case .inboxRequests(let deliveries): requestsArrived(deliveries, now)
        case .retune(let tuning): retune(tuning)
        case .settingsFileChanged: settingsFileChanged(now)
        case .settingsFileChecked(let edited): settingsFileChecked(edited: edited, now)
        case .settingsRewritten(let error): settingsRewritten(error, now)
        case .alarm: break
        case .stop:
            isStopped = true
            return []
        }
        guard started else { return actions }
        expireAwaitedAck(now)
        startHookWhenDue(now)
        rollBackWhenWanted(now)
        checkSettingsWhenDue(now)
        restoreWhenWanted(now)
        checkDeferredWhenDue(now)
        applyDeferredWhenLocked(now)
        if slot.isFree { decide(now) }
        cancelLongPollForUrgentWork(now)
        flushStatusAfterReports(now)
        emitSaves(now)
        updateAlarm(now)
        return actions
    }

    // MARK: - What next

    /// With nothing in flight: the next request, or nothing until the alarm.
    mutating func decide(_ now: Moment) {
        // The update lock's answer comes next, before any request: nothing starts in between.
        if deferred?.awaitingLock == true { return }
        // So does the check of settings.json: an edit is put back before anything goes out.
        if case .checking? = localEdit { return }
        guard isOnline else {
            slot = .awaitingOnline
            actions.append(.awaitOnline)
            return
        }
        if let hold = holdUntil {
            guard now.instant >= hold else { return }
            holdUntil = nil
        }
        if rotationPending, rotationNotBefore.map({ now.instant >= $0 }) ?? true {
            slot = .rotating
            actions.append(.rotateToken)
            return
        }
        let syncNowDue = syncNowAt.map { now.instant >= $0 } ?? false
        // A granted "sync now" starts a new turn: reports that waited for one go again.
        if syncNowDue { reportsDeferred = false }
        let timerDue = nextFetchAt.map { now.instant >= $0 } ?? true
        let carried = reportToCarry(now, fetchDue: timerDue || syncNowDue)
        if carried == nil, let report = reports.reports.first, !reportsDeferred {
            slot = .delivering(report)
            actions.append(.deliverReport(report))
            return
        }
        if sendNextChange(now) { return }
        if syncNowDue { log(.debug, "sync requested", event: "sync-now") }
        // Due or not, the request is handed over now: one on the timer waits in the HTTP
        // client until its time (nothing else wakes for it), and is cancelled if work comes first.
        startFetch(.poll(schedule.nextRequest), now, notBefore: timerDue || syncNowDue ? nil : nextFetchAt, carrying: carried)
    }

    /// Starts a settings request, sent at `notBefore` (`nil`: at once), carrying a queued report
    /// when given.
    mutating func startFetch(_ purpose: Fetch.Purpose, _ now: Moment, notBefore: Instant? = nil, carrying: StatusReport? = nil) {
        let start = notBefore.map { max($0, now.instant) } ?? now.instant
        slot = .fetching(Fetch(purpose: purpose, startedAt: start, carrying: carrying))
        cancelRequested = false
        let scheduled = start > now.instant ? start : nil
        let action: Action
        switch purpose {
        case .poll(let request):
            var asked = false
            if let due = syncNowAt, now.instant >= due {
                // This request is the one "sync now" asked for. One that is not due yet (the
                // 10 s since the last are not over) stays: when it comes, it ends this request.
                syncNowAt = nil
                lastSyncNow = now.instant
                asked = true
            }
            switch request {
            case .longPoll(let wait):
                action = .fetchSettings(
                    wait: wait, knownRevision: knownRevision, notBefore: scheduled, repeatsWhileUnchanged: [], carrying: carrying)
            case .poll:
                // The plan's last answer comes once the last-sync time on disk is due again
                // (its one-minute refresh), so status.json is as fresh as without plans.
                let sinceWritten = lastSyncWritten(now).map { $0.duration(to: start) } ?? Self.statusRefreshInterval
                let horizon = max(.zero, Self.statusRefreshInterval - sinceWritten)
                let repeats = isIdle && !asked ? schedule.unchangedRepeatDelays(passing: horizon, using: &random) : []
                slot = .fetching(Fetch(purpose: purpose, startedAt: start, repeats: !repeats.isEmpty, carrying: carrying))
                action = .fetchSettings(
                    wait: 0, knownRevision: knownRevision, notBefore: scheduled, repeatsWhileUnchanged: repeats, carrying: carrying)
            }
        case .refresh:
            action = .fetchSettings(wait: 0, knownRevision: nil, notBefore: nil, repeatsWhileUnchanged: [])
        }
        actions.append(action)
    }

    /// When `status.json`'s last-sync time was written; `now` when a write is under way or
    /// this event's end writes it (the status is looked at after the next request is chosen).
    func lastSyncWritten(_ now: Moment) -> Instant? {
        let due = statusWrittenAt.map { $0.duration(to: now.instant) > Self.statusRefreshInterval } ?? true
        if statusBeingWritten != nil || (statusCheckWanted && due) { return now.instant }
        return statusWrittenAt
    }

    /// Nothing waits for the next turn (each answered settings request begins one) and the last
    /// request went well: the timer's unchanged answers may be taken by the HTTP client alone,
    /// until `status.json`'s last-sync time is due again, and wake nobody. Whatever comes
    /// meanwhile (a request from the inbox, a reload, an acknowledgement overdue) cancels the
    /// request, as it cancels one the timer scheduled.
    var isIdle: Bool {
        reports.isEmpty && journal.queued.isEmpty && journal == journalOnDisk && journalProblem == nil && waitingRequests.isEmpty
            && handledRequests.isEmpty && !statusAwaitsReport && !rotationPending && transportError == nil && backoff.failures == 0
            && !pollOutcomePending && settings != nil
    }

    /// Ends a long-poll in flight, or a request the timer scheduled that has not gone yet, when
    /// something must go to the server now.
    mutating func cancelLongPollForUrgentWork(_ now: Moment) {
        guard case .fetching(let fetch) = slot, case .poll(let request) = fetch.purpose, !cancelRequested else { return }
        if case .poll = request, !fetch.isWaiting(at: now.instant) { return }  // a short request: it ends soon by itself
        let urgent =
            (rotationPending && (rotationNotBefore.map { now.instant >= $0 } ?? true)) || reportsNeedAnotherRequest(than: fetch)
            || nextChangeToSend(now) != nil
            || (syncNowAt.map { now.instant >= $0 } ?? false)
            || deferred?.lockHeld == true || deferred?.lockOverridden == true || rollbackWanted != nil
            || localEdit?.isFound == true
        guard urgent else { return }
        cancelRequested = true
        actions.append(.cancelRequest)
    }

    /// The earliest instant the machine must look again, sent when it changed.
    mutating func updateAlarm(_ now: Moment) {
        var candidates: [Instant] = []
        if let ackDeadline { candidates.append(ackDeadline) }
        if let deferred, !deferred.awaitingLock, !deferred.lockHeld, !deferred.lockOverridden { candidates.append(deferred.checkAt) }
        if case .settling(_, let at)? = localEdit, settings != nil { candidates.append(at) }
        switch slot {
        case .free where isOnline:
            if let holdUntil, holdUntil > now.instant {
                candidates.append(holdUntil)
            } else {
                if let nextFetchAt { candidates.append(nextFetchAt) }
                if let syncNowAt { candidates.append(syncNowAt) }
            }
        case .fetching:
            if let syncNowAt { candidates.append(syncNowAt) }
        case .hookDelay(_, let until):
            candidates.append(until)
        default:
            break
        }
        let next = candidates.min()
        guard next != alarmAt else { return }
        alarmAt = next
        actions.append(.wake(at: next))
    }

    // MARK: - Failures

    /// A request failed: every request to the server waits for the backoff.
    mutating func fail(_ failure: SyncFailure, _ now: Moment) {
        let delay = backoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
        holdUntil = now.instant.advanced(by: delay)
        pollOutcomePending = false
        transportError = failure.summary
        log(.warning, "sync failed", event: "sync-failed", ["error": failure.summary, "retry_in": delay.secondsText])
        actions.append(.showStatus("serving \(servedText); sync failed: \(failure.summary)"))
        statusCheckWanted = true
    }

    mutating func requestFailed(_ failure: SyncFailure, _ now: Moment) {
        let failed = slot
        slot = .free
        cancelRequested = false
        switch failed {
        case .fetching(let fetch):
            if let carried = fetch.carrying, carriedReportRefused(carried, failure) { return }
            if case .poll(let request) = fetch.purpose, request != .poll, failure.refusesLongPoll {
                log(.warning, "the server refuses long-polls; polling on the timer", event: "long-poll-refused")
                nextFetchAt = now.instant.advanced(by: schedule.delay(after: .longPollRefused, using: &random))
                reportsDeferred = false
            } else {
                fail(failure, now)
            }
        case .patching(let change):
            changeFailed(change, failure, now)
        case .delivering:
            reportFailed(failure, now)
        case .rotating:
            rotationFailed(failure, now)
        case .fetchingMetadata:
            fail(failure, now)
        default:
            slot = failed  // nothing of ours was in flight
        }
    }

    mutating func requestCancelled() {
        if case .fetching = slot { slot = .free }
        cancelRequested = false
    }

    mutating func tokenRotated() {
        guard case .rotating = slot else { return }
        slot = .free
        rotationPending = false
        rotationBackoff.reset()
        rotationNotBefore = nil
    }

    /// A failed rotation never stops the loop: the current token keeps working, so reports,
    /// changes and settings requests go on while the rotation waits for its own backoff (the
    /// server asks again with its next answer). Throttling holds everything, as always.
    mutating func rotationFailed(_ failure: SyncFailure, _ now: Moment) {
        rotationPending = false
        guard failure.kind != .throttled else {
            fail(failure, now)
            return
        }
        let delay = rotationBackoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
        rotationNotBefore = now.instant.advanced(by: delay)
        log(
            .warning, "token rotation failed; the current token keeps working", event: "token-rotation-failed",
            ["error": failure.summary, "retry_in": delay.secondsText])
    }

    /// The regular request's outcome is known and was no failure: the backoff starts over.
    mutating func pollSucceeded() {
        guard pollOutcomePending else { return }
        pollOutcomePending = false
        backoff.reset()
    }

    // MARK: - Helpers

    /// How long before `status.json` is written again only because the last sync is newer.
    static var statusRefreshInterval: Duration { .seconds(60) }

    var servedText: String { settings.map { "revision \($0.revision)" } ?? "nothing" }

    mutating func log(_ level: LogRecord.Level, _ message: String, event: String, _ fields: [String: String] = [:]) {
        actions.append(.log(LogRecord(level: level, message: message, event: event, fields: fields)))
    }
}

/// The parts of an app's configuration the sync machine follows.
public struct SyncRules: Sendable, Equatable {
    public var app: String
    /// The long-poll's wait in whole seconds; 0 polls on the timer only.
    public var longPollWait: Int
    public var pollInterval: Duration
    /// The most random delay added to a timer poll and before a hook.
    public var jitter: Duration
    /// Whether the app has an `onChange` hook.
    public var hasHook: Bool
    public var expectAck: Bool
    public var ackTimeout: Duration
    /// The least time between two "sync now" requests the server sees.
    public var syncNowInterval: Duration
    /// When new settings may be applied (local time); empty: at any time.
    public var applyWindows: [ApplyWindow]
    /// Restore the previous generation when the hook fails or the app reports an error.
    public var rollbackOnError: Bool
    /// How much each status report says, until a ``SyncMachine/Event/retune(_:)``.
    public var reportDetail: AgentPolicy.ReportDetail
    /// The longest the app may keep a checked revision out by holding its update lock; after
    /// it the revision is applied anyway and its report says why (a reader that never lets
    /// go must not freeze the device's settings, secret rotations included).
    public var updateLockMaxHold: Duration
    /// The default of ``updateLockMaxHold``: one hour.
    public static let defaultUpdateLockMaxHold: Duration = .seconds(3600)

    /// The most 409 answers in a row before the loop backs off.
    public static let conflictLimit = 5
    /// The default least time between two "sync now" requests.
    public static let defaultSyncNowInterval: Duration = .seconds(10)

    public init(
        app: String, longPollWait: Int, pollInterval: Duration, jitter: Duration, hasHook: Bool = false, expectAck: Bool = false,
        ackTimeout: Duration = .seconds(60), syncNowInterval: Duration = SyncRules.defaultSyncNowInterval,
        applyWindows: [ApplyWindow] = [], rollbackOnError: Bool = false, reportDetail: AgentPolicy.ReportDetail = .full,
        updateLockMaxHold: Duration = SyncRules.defaultUpdateLockMaxHold
    ) {
        self.reportDetail = reportDetail
        self.updateLockMaxHold = updateLockMaxHold
        self.app = app
        self.longPollWait = longPollWait
        self.pollInterval = pollInterval
        self.jitter = jitter
        self.hasHook = hasHook
        self.expectAck = expectAck
        self.ackTimeout = ackTimeout
        self.syncNowInterval = syncNowInterval
        self.applyWindows = applyWindows
        self.rollbackOnError = rollbackOnError
    }
}

/// What the driver found in an app's folder at start.
public struct LoadedState: Sendable {
    /// Which generation of `settings.json` is served.
    public enum Source: Sendable, Equatable {
        /// `settings.json` itself.
        case current
        /// `settings.json` was missing, torn or invalid: the previous generation is served.
        case previous
        /// Nothing usable on disk.
        case none
    }

    public var settings: DeviceSettings?
    public var source: Source
    /// The generation before `settings` (`settings.previous.json`, when it is another revision).
    public var previous: DeviceSettings?
    /// Why `settings.json` was not used.
    public var problems: [String]
    /// `settings.json` (the served ``Source/current``) is not what the agent wrote last: it was
    /// changed while the agent was stopped.
    public var editedWhileStopped: Bool
    /// The metadata of the settings' schema version, when stored.
    public var metadata: Metadata?
    public var reports: PendingReports
    /// Why `reports.json` could not be read (the queue then starts empty).
    public var reportsProblem: String?
    /// `changes.json`, or `nil` with the reason when it cannot be read.
    public var journal: ChangeJournal?
    public var journalProblem: String?
    public var status: AppStatus?

    public init(
        settings: DeviceSettings? = nil, source: Source = .none, problems: [String] = [], metadata: Metadata? = nil,
        reports: PendingReports = PendingReports(), reportsProblem: String? = nil, journal: ChangeJournal? = ChangeJournal(),
        journalProblem: String? = nil, status: AppStatus? = nil, previous: DeviceSettings? = nil, editedWhileStopped: Bool = false
    ) {
        self.editedWhileStopped = editedWhileStopped
        self.settings = settings
        self.source = source
        self.previous = previous
        self.problems = problems
        self.metadata = metadata
        self.reports = reports
        self.reportsProblem = reportsProblem
        self.journal = journal
        self.journalProblem = journalProblem
        self.status = status
    }
}

/// The server's answer to a settings request.
public struct SettingsAnswer: Sendable, Hashable {
    /// `nil`: still at the known revision (304).
    public var document: SettingsDocument?
    /// The admin asked the device to rotate its token.
    public var rotationRequested: Bool
    /// The server is busy: the next request goes after this, not at once (`Fleetset-Next-Poll`).
    public var nextPoll: Duration?
    /// The server takes a report on the settings request (`Fleetset-Accepts: status`): the
    /// report the request carried, if any, is recorded.
    public var acceptsStatus: Bool

    public init(document: SettingsDocument?, rotationRequested: Bool = false, nextPoll: Duration? = nil, acceptsStatus: Bool = false) {
        self.document = document
        self.rotationRequested = rotationRequested
        self.nextPoll = nextPoll
        self.acceptsStatus = acceptsStatus
    }
}

/// How one app polls and reports, as the agent policy and the device's own configuration
/// settle it (``SyncMachine/Event/retune(_:)``).
public struct PollTuning: Sendable, Hashable {
    public var longPollWait: Int
    public var pollInterval: Duration
    public var jitter: Duration
    public var reportDetail: AgentPolicy.ReportDetail

    public init(longPollWait: Int, pollInterval: Duration, jitter: Duration, reportDetail: AgentPolicy.ReportDetail = .full) {
        self.longPollWait = longPollWait
        self.pollInterval = pollInterval
        self.jitter = jitter
        self.reportDetail = reportDetail
    }
}

/// A metadata document as fetched: its bytes (kept beside the settings), ETag, and what they mean.
public struct MetadataDocument: Sendable {
    public var bytes: [UInt8]
    public var etag: String
    public var parsed: Result<Metadata, MetadataError>

    public init(bytes: [UInt8], etag: String, parsed: Result<Metadata, MetadataError>) {
        self.bytes = bytes
        self.etag = etag
        self.parsed = parsed
    }

    /// Reads `bytes`.
    public init(bytes: [UInt8], etag: String) {
        let parsed: Result<Metadata, MetadataError>
        do {
            parsed = .success(try Metadata(json: bytes))
        } catch {
            parsed = .failure(error)
        }
        self.init(bytes: bytes, etag: etag, parsed: parsed)
    }
}

/// A request file's content as the inbox found it.
public struct InboxDelivery: Sendable, Hashable {
    public enum Content: Sendable, Hashable {
        case request(InboxRequest)
        /// Moved aside already by the inbox; the reason is recorded for `set --wait` and the library.
        case refused(String)
    }

    /// The request's id (its file name without `.json`).
    public var id: String
    /// The file, removed once the request is handled; `nil` when refused.
    public var path: String?
    public var content: Content

    public init(id: String, path: String?, content: Content) {
        self.id = id
        self.path = path
        self.content = content
    }
}

/// How a hook run ended.
public enum HookOutcome: Sendable, Equatable {
    case succeeded
    /// Why (exit status, signal, timeout, and the last lines of its output, redacted).
    case failed(String)
    /// The agent is stopping; the next start runs it again.
    case cancelled
}

/// One log line the machine asks for: the driver adds the app's id and writes it.
public struct LogRecord: Sendable, Hashable {
    public enum Level: String, Sendable, Hashable {
        case trace, debug, info, notice, warning, error, critical
    }

    public var level: Level
    public var message: String
    /// The `event=` field every line of the agent carries.
    public var event: String
    public var fields: [String: String]

    public init(level: Level, message: String, event: String, fields: [String: String] = [:]) {
        self.level = level
        self.message = message
        self.event = event
        self.fields = fields
    }
}
