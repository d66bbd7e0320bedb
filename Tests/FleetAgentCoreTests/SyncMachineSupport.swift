import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import Testing

/// A monotonic instant the tests move by hand.
struct TestInstant: InstantProtocol {
    var offset: Duration

    static let zero = TestInstant(offset: .zero)

    func advanced(by duration: Duration) -> TestInstant { TestInstant(offset: offset + duration) }
    func duration(to other: TestInstant) -> Duration { other.offset - offset }
    static func < (lhs: TestInstant, rhs: TestInstant) -> Bool { lhs.offset < rhs.offset }
}

typealias Machine = SyncMachine<TestInstant, MemoryAppFiles>

/// The metadata of the test app: `greeting` and `title` may be changed on the device, `volume`
/// may not, `pin` is a secret.
enum TestApp {
    static let id = "kiosk"

    static let metadataJSON: JSONValue = [
        "app": "kiosk", "version": 3,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "greeting": ["type": "string", "maxLength": 40, "default": "hello", "x-writable": true],
                "title": ["type": "string", "maxLength": 40, "default": "Lobby", "x-writable": true],
                "volume": ["type": "integer", "maximum": 10, "default": 5],
                "pin": ["type": "string", "minLength": 4, "default": "0000", "x-secret": true],
            ],
        ],
    ]

    static var metadata: Metadata {
        do {
            return try Metadata(metadataJSON)
        } catch {
            preconditionFailure("the test metadata is invalid: \(error)")
        }
    }

    static var metadataDocument: MetadataDocument {
        MetadataDocument(bytes: Array(metadataJSON.serialized().utf8), etag: "\"m3\"", parsed: .success(metadata))
    }

    static func document(_ revision: Int64, _ values: JSONObject = ["greeting": "hello", "volume": 5, "pin": "1234"]) -> SettingsDocument {
        SettingsDocument(app: id, schemaVersion: 3, revision: revision, values: values)
    }

    static func settings(_ revision: Int64, _ values: JSONObject = ["greeting": "hello", "volume": 5, "pin": "1234"]) -> DeviceSettings {
        DeviceSettings(document(revision, values), syncedAt: 1_800_000_000)
    }

    static func rules(
        longPollWait: Int = 55, pollInterval: Duration = .seconds(60), jitter: Duration = .seconds(5), hasHook: Bool = false,
        expectAck: Bool = false, ackTimeout: Duration = .seconds(30), applyWindows: [String] = [], rollbackOnError: Bool = false
    ) -> SyncRules {
        SyncRules(
            app: id, longPollWait: longPollWait, pollInterval: pollInterval, jitter: jitter, hasHook: hasHook, expectAck: expectAck,
            ackTimeout: ackTimeout, applyWindows: applyWindows.compactMap(ApplyWindow.init), rollbackOnError: rollbackOnError)
    }

    /// A status that says `settings` are settled (hook ran, report sent or queued).
    static func settledStatus(_ revision: Int64) -> AppStatus {
        AppStatus(app: id, revision: revision, schemaVersion: 3, state: .applied, latestRevision: revision)
    }

    /// A fleetset error answer.
    static func refusal(_ status: Int, _ code: ErrorCode, retryAfter: Duration? = nil) -> SyncFailure {
        .refusal(status: status, code: code, retryAfter: retryAfter, summary: "the server refused: \(status) \(code)")
    }
}

/// What one event led to, in order: an action for the driver, or a step on the app's files
/// (done during the event, through ``MemoryAppFiles``; listed before the event's actions).
enum Step: Equatable {
    case action(Machine.Action)
    case file(AppFileOperation)

    var action: Machine.Action? {
        if case .action(let action) = self { action } else { nil }
    }

    var file: AppFileOperation? {
        if case .file(let operation) = self { operation } else { nil }
    }

    static func == (step: Step, action: Machine.Action) -> Bool { step.action == action }
    static func == (step: Step, operation: AppFileOperation) -> Bool { step.file == operation }
}

extension Array where Element == Step {
    func contains(_ action: Machine.Action) -> Bool { contains(.action(action)) }
    func contains(_ operation: AppFileOperation) -> Bool { contains(.file(operation)) }
}

/// Plays the driver: feeds the machine events at a time the test moves by hand, keeps the one
/// request in flight and the alarm, and records every step. The app's files are a
/// ``MemoryAppFiles`` (failing the operations a test asks to fail).
struct MachineRun {
    var machine: Machine
    var instant = TestInstant.zero
    /// The wall clock as the device's clock says; a test may jump it.
    var wallOffset: Int64 = 1_800_000_000
    /// The request in flight, if any.
    private(set) var request: Machine.Action?
    private(set) var cancelAsked = false
    private(set) var alarm: TestInstant?
    /// Every step so far, in order.
    private(set) var actions: [Step] = []
    /// The device's offset from UTC (for the apply windows).
    var utcOffset: Int64 = 0

    /// File operations to fail, with the error.
    var failing: [AppFileOperation.Kind: String] {
        get { machine.files.failing }
        set { machine.files.failing = newValue }
    }
    /// What `loadJournal` finds (`nil`: `changes.json` cannot be read).
    var journalOnDisk: ChangeJournal? {
        get { machine.files.journal }
        set { machine.files.journal = newValue }
    }
    /// Whether the app holds its update lock (the machine's attempts to take it then fail).
    var appHoldsUpdateLock: Bool {
        get { machine.files.appHoldsUpdateLock }
        set { machine.files.appHoldsUpdateLock = newValue }
    }
    /// Whether `settings.json` holds a hand edit; the agent's own writes of the file end it.
    var settingsEdited: Bool {
        get { machine.files.settingsEdited }
        set { machine.files.settingsEdited = newValue }
    }

    var wall: Int64 { wallOffset + instant.offset.components.seconds }

    init(_ rules: SyncRules = TestApp.rules(), seed: UInt64 = 1) {
        machine = Machine(rules: rules, random: SeededRandom(state: seed), files: MemoryAppFiles(recording: true))
    }

    /// Starts with `loaded` and goes online with `requests`; returns the steps since the start.
    @discardableResult
    mutating func start(_ loaded: LoadedState = LoadedState(), online requests: [InboxDelivery]? = []) -> [Step] {
        var produced = send(.started(loaded))
        if let requests {
            #expect(request == .awaitOnline)
            produced += answer(.online(requests: requests))
        }
        return produced
    }

    /// Sends an event now; returns every step it led to.
    @discardableResult
    mutating func send(_ event: Machine.Event) -> [Step] {
        let before = machine.files.operations?.count ?? 0
        let actions = machine.handle(event, at: Machine.Moment(instant, wall: wall, utcOffset: utcOffset))
        var produced = (machine.files.operations ?? []).dropFirst(before).map(Step.file)
        for action in actions {
            produced.append(.action(action))
            perform(action)
        }
        self.actions += produced
        return produced
    }

    /// When the request in flight goes out, if the poll timer scheduled it ahead of now.
    var scheduledStart: TestInstant? {
        if case .fetchSettings(_, _, let notBefore?, _, _)? = request, notBefore > instant { notBefore } else { nil }
    }

    /// Ends the request in flight with `event`. A request the timer scheduled ahead is answered
    /// once it has gone out: time moves to its start first (alarms on the way are delivered),
    /// unless the answer is its cancellation.
    @discardableResult
    mutating func answer(_ event: Machine.Event) -> [Step] {
        #expect(request != nil, "no request in flight to answer with \(event)")
        if let request { #expect(Self.answers(event, request), "\(event) does not answer \(request)") }
        var produced: [Step] = []
        if case .requestCancelled = event {
        } else if let start = scheduledStart {
            produced += advance(by: instant.duration(to: start))
        }
        request = nil
        cancelAsked = false
        return produced + send(event)
    }

    /// Moves time on by `duration`, delivering every alarm that falls due on the way.
    @discardableResult
    mutating func advance(by duration: Duration) -> [Step] {
        let target = instant.advanced(by: duration)
        var produced: [Step] = []
        while let due = alarm, due <= target {
            instant = max(instant, due)
            alarm = nil
            produced += send(.alarm)
        }
        instant = target
        return produced
    }

    /// Moves time to the next thing that happens: the pending alarm, or the start of a request
    /// the timer scheduled ahead (one of them must be set).
    @discardableResult
    mutating func advanceToAlarm() -> [Step] {
        guard let due = [alarm, scheduledStart].compactMap({ $0 }).min() else {
            Issue.record("no alarm set and no request scheduled")
            return []
        }
        return advance(by: instant.duration(to: due))
    }

    /// Whether `event` is an answer `request` can have (a test that answers the wrong request
    /// would otherwise test nothing).
    static func answers(_ event: Machine.Event, _ request: Machine.Action) -> Bool {
        switch (event, request) {
        case (.requestFailed, _), (.requestCancelled, _): true
        case (.online, .awaitOnline), (.settingsAnswer, .fetchSettings), (.metadataAnswer, .fetchMetadata),
            (.changeConfirmed, .patchSettings), (.reportDelivered, .deliverReport), (.tokenRotated, .rotateToken),
            (.hookFinished, .runHook):
            true
        default: false
        }
    }

    private mutating func perform(_ action: Machine.Action) {
        switch action {
        case .awaitOnline, .fetchSettings, .fetchMetadata, .patchSettings, .deliverReport, .rotateToken, .runHook:
            #expect(request == nil, "a second request while \(String(describing: request)) is in flight: \(action)")
            request = action
        case .cancelRequest:
            #expect(request != nil && !cancelAsked)
            cancelAsked = true
        case .wake(let at):
            alarm = at
        default:
            break
        }
    }

    // MARK: - Reading what happened

    /// The settings requests among `actions` (all so far by default).
    func fetches(in actions: [Step]? = nil) -> [(wait: Int, known: Int64?)] {
        (actions ?? self.actions).compactMap {
            if case .fetchSettings(let wait, let known, _, _, _)? = $0.action { (wait, known) } else { nil }
        }
    }

    func reports(in actions: [Step]? = nil) -> [StatusReport] {
        (actions ?? self.actions).compactMap {
            if case .deliverReport(let report)? = $0.action { report } else { nil }
        }
    }

    func patches(in actions: [Step]? = nil) -> [JSONObject] {
        (actions ?? self.actions).compactMap {
            if case .patchSettings(let patch, _)? = $0.action { patch } else { nil }
        }
    }

    func events(in actions: [Step]? = nil) -> [String] {
        (actions ?? self.actions).compactMap {
            if case .log(let record)? = $0.action { record.event } else { nil }
        }
    }

    /// The index of the first action that matches, for order checks.
    func index(of predicate: (Step) -> Bool, in actions: [Step]) -> Int? {
        actions.firstIndex(where: predicate)
    }

    // MARK: - Common steps

    /// Answers a long-poll (which must be in flight) with `revision` and completes the apply:
    /// metadata fetched when needed, persisted, and the report delivered.
    @discardableResult
    mutating func deliverRevision(_ revision: Int64, _ values: JSONObject = ["greeting": "hello", "volume": 5, "pin": "1234"])
        -> [Step]
    {
        var produced = answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(revision, values))))
        if case .fetchMetadata = request { produced += answer(.metadataAnswer(TestApp.metadataDocument)) }
        if case .deliverReport = request { produced += answer(.reportDelivered) }
        return produced
    }
}

extension Step {
    var isFetch: Bool {
        if case .fetchSettings? = action { true } else { false }
    }

    var isWriteStatus: Bool {
        if case .writeStatus? = file { true } else { false }
    }

    var isSaveReports: Bool {
        if case .saveReports? = file { true } else { false }
    }
}

extension Machine.Action {
    var isFetch: Bool {
        if case .fetchSettings = self { true } else { false }
    }
}
