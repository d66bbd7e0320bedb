import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// One app's sync loop as a value: it takes events (an answer from the server, a hook that
/// finished, requests from the inbox, an alarm) and returns the actions to take (send a
/// request, run the hook, log, wake me at). It reads no clock: every event comes with the time,
/// monotonic for every delay and deadline and wall-clock seconds only for what is recorded. Its
/// random source and the app's files (``AppFiles``) are injected. So every rule of the agent is
/// tested as a value, in milliseconds, and the fleet simulator runs the same rules.
///
/// It is composed of parts, each holding only its own state:
/// - ``ApplyPipeline``: a revision from its arrival to its outcome (metadata, deferred for a
///   window or the app's update lock, written, its hook, a rollback), one state at a time;
/// - ``ReportQueue``, ``ChangeSender`` and the status file, each a ``DurableRecord`` (memory,
///   disk, which change is saved, why a save failed) under one rule;
/// - ``TokenRotation``, ``PollTimers`` and the local edits of `settings.json`.
///
/// A driver (`AppDriver` in FleetAgent) performs the actions: **requests**
/// (``Action/awaitOnline``, ``Action/fetchSettings(wait:knownRevision:notBefore:repeatsWhileUnchanged:carrying:)``,
/// ``Action/fetchMetadata(ifNoneMatch:)``, ``Action/patchSettings(_:basedOn:)``,
/// ``Action/deliverReport(_:)``, ``Action/rotateToken``, ``Action/runHook(_:secrets:)``) run one
/// at a time, in the background; each ends with exactly one event: its answer,
/// ``Event/requestFailed(_:)``, or ``Event/requestCancelled`` after ``Action/cancelRequest``.
/// ``Action/wake(at:)`` asks for ``Event/alarm`` at that instant (it replaces the one before).
/// The app's files are written during the event, through ``AppFiles``: a local step nothing can
/// happen during needs no action, wait and event of its own.
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
public struct SyncMachine<Instant: InstantProtocol, Files: AppFiles> where Instant.Duration == Duration {
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
        /// The answer to ``Action/fetchSettings(wait:knownRevision:notBefore:repeatsWhileUnchanged:carrying:)``.
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
        /// Requests the inbox took, in the order they came.
        case inboxRequests([InboxDelivery])
        /// The server's agent policy (with the device's own pins) changed how this app polls and
        /// reports: used from the next request and report on.
        case retune(PollTuning)
        /// `settings.json` changed (a write or a rename in the app's folder, or events were lost):
        /// the machine checks it once the writes have settled.
        case settingsFileChanged
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
            wait: Int, knownRevision: Int64?, notBefore: Instant?, repeatsWhileUnchanged: [Duration], carrying: StatusOnPoll.Carried? = nil)
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

        /// A log line.
        case log(LogRecord)
        /// The app's part of the status line `systemctl status` shows.
        case showStatus(String)
        /// The app has settings to serve (for readiness).
        case served
        /// Send ``Event/alarm`` at this instant (`nil`: no alarm).
        case wake(at: Instant?)
    }

    /// A request of the loop's own in flight (the apply pipeline's, the metadata and the hook,
    /// are in ``ApplyPipeline``).
    enum InFlight {
        case awaitingOnline
        case fetching(Fetch)
        case patching(ChangeJournal.Change)
        case delivering(StatusReport)
        case rotating
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
        var carrying: StatusOnPoll.Carried?
        /// ``Action/cancelRequest`` was asked.
        var cancelAsked = false

        /// Scheduled by the poll timer and not sent yet at `now`, or waiting between repeats:
        /// in either case it is cancelled when something must go first.
        func isWaiting(at now: Instant) -> Bool { startedAt > now || repeats }
    }

    /// Where the loop is in its life.
    enum Phase {
        /// Waiting for ``Event/started(_:)``.
        case created
        /// Serving what is on disk; nothing goes to the server yet.
        case offline
        case online
        case stopped
    }

    public let rules: SyncRules
    var random: any RandomNumberGenerator
    /// The app's files.
    public var files: Files
    var phase = Phase.created

    // What the device holds.

    /// The settings on disk (what apps see).
    public internal(set) var settings: DeviceSettings?
    /// The generation before them (`settings.previous.json`): what a rollback restores.
    public internal(set) var previousSettings: DeviceSettings?
    /// The metadata the settings were validated with.
    public internal(set) var metadata: Metadata?
    /// The revision sent in `If-None-Match`: the newest one decided on, applied or refused.
    public internal(set) var knownRevision: Int64?

    // Its parts.

    var apply = ApplyPipeline()
    var localEdits = LocalEdits()
    var statusFile: StatusFile
    var reportQueue: ReportQueue
    var changes = ChangeSender(loaded: ChangeJournal(), problem: nil)
    var inbox = InboxState()
    var timers: PollTimers
    var rotation = TokenRotation<Instant>()
    /// The request in flight.
    var request: InFlight?
    /// When an awaited acknowledgement is overdue.
    public internal(set) var ackDeadline: Instant?

    var actions: [Action] = []

    /// - Parameters:
    ///   - random: the source of every jitter (injected, so tests repeat).
    ///   - files: the app's files.
    public init(rules: SyncRules, random: any RandomNumberGenerator, files: Files) {
        self.rules = rules
        self.random = random
        self.files = files
        statusFile = StatusFile(AppStatus(app: rules.app), onDisk: nil)
        reportQueue = ReportQueue(loaded: PendingReports(), detail: rules.reportDetail)
        timers = PollTimers(
            schedule: PollSchedule(longPollWait: rules.longPollWait, pollInterval: rules.pollInterval, jitter: rules.jitter),
            backoff: rules.backoff)
    }

    /// Takes one event at `now` and returns what to do, in order.
    public mutating func handle(_ event: Event, at now: Moment) -> [Action] {
        actions = []
        guard phase != .stopped else { return [] }
        switch event {
        case .started(let loaded): start(loaded, now)
        case .online(let requests): goOnline(requests, now)
        case .settingsAnswer(let answer): settingsAnswered(answer, now)
        case .metadataAnswer(let answer): metadataAnswered(answer, now)
        case .changeConfirmed(let revision): changeConfirmed(revision, now)
        case .reportDelivered: reportDelivered()
        case .tokenRotated: tokenRotated()
        case .requestFailed(let failure): requestFailed(failure, now)
        case .requestCancelled: requestCancelled()
        case .hookFinished(let outcome): hookFinished(outcome, now)
        case .inboxRequests(let deliveries): requestsArrived(deliveries, now)
        case .retune(let tuning): retune(tuning)
        case .settingsFileChanged: settingsFileChanged(now)
        case .alarm: break
        case .stop:
            phase = .stopped
            return []
        }
        guard phase != .created else { return actions }
        expireAwaitedAck(now)
        advanceApply(now)
        if isFree { decide(now) }
        cancelLongPollForUrgentWork(now)
        saveRecords(now)
        updateAlarm(now)
        return actions
    }

    /// No request in flight, the apply pipeline's included.
    var isFree: Bool { request == nil && !apply.holdsRequestSlot }

    // MARK: - What it says

    /// Whether the machine stopped.
    public var isStopped: Bool { phase == .stopped }
    /// Whether the device is enrolled and the inbox's first scan is in.
    public var isOnline: Bool { phase == .online }
    /// What `status.json` should say.
    public var status: AppStatus { statusFile.record.value }
    /// Status reports the server has not received.
    public var reports: PendingReports { reportQueue.record.value }
    /// The last settings answer said the server takes a report on the settings request.
    public var serverTakesStatusOnPoll: Bool { reportQueue.serverTakesStatusOnPoll }
    /// How much each status report says (the agent policy's `statusReports`).
    public var reportDetail: AgentPolicy.ReportDetail { reportQueue.detail }
    /// The device's own changes (`changes.json`).
    public var journal: ChangeJournal { changes.journal.value }
    /// Why `changes.json` cannot be read: changes wait in the inbox rather than overwrite it.
    public var journalProblem: String? { changes.problem }
    /// Requests that cannot be handled yet (no settings, `changes.json` unreadable).
    public var waitingRequests: [InboxDelivery] { inbox.waiting }
    /// A revision checked and waiting to be applied (outside the apply windows, or while the
    /// app holds its update lock).
    public var deferred: DeferredApply? { apply.deferred }
    /// The agent holds the app's update lock (from taking it until the outcome is recorded).
    public var holdsUpdateLock: Bool { apply.holdsUpdateLock }
    public var schedule: PollSchedule { timers.schedule }
    public var backoff: RetryBackoff { timers.backoff }
    /// No settings request before this (the poll timer); `nil`: at once.
    public var nextFetchAt: Instant? { timers.nextFetchAt }
    /// No request to the server at all before this (backoff after a failure).
    public var holdUntil: Instant? { timers.holdUntil }
    /// A "sync now" is due at this instant.
    public var syncNowAt: Instant? { timers.syncNowAt }

    /// `message` as a report carries it (see ``ReportQueue``): escaped, and cut to what the
    /// report's detail allows.
    public static func reportMessage(_ message: String, detail: AgentPolicy.ReportDetail) -> String {
        ReportQueue.message(message, detail: detail)
    }

    // MARK: - Helpers

    /// How long before `status.json` is written again only because the last sync is newer.
    static var statusRefreshInterval: Duration { .seconds(60) }

    var servedText: String { settings.map { "revision \($0.revision)" } ?? "nothing" }

    mutating func log(_ level: LogRecord.Level, _ message: String, event: String, _ fields: [String: String] = [:]) {
        actions.append(.log(LogRecord(level: level, message: message, event: event, fields: fields)))
    }
}

extension SyncMachine {
    /// The poll timer, the backoff, "sync now", and the alarm.
    struct PollTimers {
        var schedule: PollSchedule
        var backoff = RetryBackoff()
        /// No settings request before this (the poll timer); `nil`: at once.
        var nextFetchAt: Instant?
        /// No request to the server at all before this (backoff after a failure).
        var holdUntil: Instant?
        /// A "sync now" is due at this instant.
        var syncNowAt: Instant?
        var lastSyncNow: Instant?
        /// The regular settings request answered with a new document: the backoff resets once
        /// its outcome is known (applied or refused), not before (a failure on the way counts on).
        var pollOutcomePending = false
        /// The instant of the alarm asked for last.
        var alarmAt: Instant?
    }
}
