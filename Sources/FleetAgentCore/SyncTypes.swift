import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

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
    /// The backoff after a failed request (full jitter under a doubling ceiling). The agent
    /// keeps the default; the fleet simulator shortens it to measure a fleet's recovery.
    public var backoff: RetryBackoff
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
        updateLockMaxHold: Duration = SyncRules.defaultUpdateLockMaxHold, backoff: RetryBackoff = RetryBackoff()
    ) {
        self.backoff = backoff
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
