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

typealias Machine = SyncMachine<TestInstant>

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

/// Plays the driver: feeds the machine events at a time the test moves by hand, completes local
/// actions at once (as the driver does, failing the ones a test asks to fail), keeps the one
/// request in flight and the alarm, and records every action.
struct MachineRun {
    var machine: Machine
    var instant = TestInstant.zero
    /// The wall clock as the device's clock says; a test may jump it.
    var wallOffset: Int64 = 1_800_000_000
    /// The request in flight, if any.
    private(set) var request: Machine.Action?
    private(set) var cancelAsked = false
    private(set) var alarm: TestInstant?
    /// Every action so far, in order.
    private(set) var actions: [Machine.Action] = []
    /// Local actions to fail, with the error, by name (`persist`, `rewriteSettings`, `saveJournal`, `saveReports`, `writeStatus`).
    var failing: [String: String] = [:]
    /// What `loadJournal` finds.
    var journalOnDisk: ChangeJournal? = ChangeJournal()
    /// The device's offset from UTC (for the apply windows).
    var utcOffset: Int64 = 0
    /// Whether the app holds its update lock (the machine's attempts to take it then fail).
    var appHoldsUpdateLock = false
    /// Whether `settings.json` holds a hand edit (what `checkSettingsFile` finds); the agent's
    /// own writes of the file end it.
    var settingsEdited = false

    var wall: Int64 { wallOffset + instant.offset.components.seconds }

    init(_ rules: SyncRules = TestApp.rules(), seed: UInt64 = 1) {
        machine = Machine(rules: rules, random: SeededRandom(state: seed))
    }

    /// Starts with `loaded` and goes online with `requests`; returns the actions since the start.
    @discardableResult
    mutating func start(_ loaded: LoadedState = LoadedState(), online requests: [InboxDelivery]? = []) -> [Machine.Action] {
        var produced = send(.started(loaded))
        if let requests {
            #expect(request == .awaitOnline)
            produced += answer(.online(requests: requests))
        }
        return produced
    }

    /// Sends an event now; returns every action it led to (local results included).
    @discardableResult
    mutating func send(_ event: Machine.Event) -> [Machine.Action] {
        var queue = [event]
        var produced: [Machine.Action] = []
        var handled = 0
        while !queue.isEmpty {
            handled += 1
            // Local results that keep asking for more local work would spin the driver.
            guard handled <= 100 else {
                Issue.record("more than 100 local results for one event: the machine spins on \(queue[0])")
                break
            }
            let next = queue.removeFirst()
            for action in machine.handle(next, at: Machine.Moment(instant, wall: wall, utcOffset: utcOffset)) {
                produced.append(action)
                if let result = perform(action) { queue.append(result) }
            }
        }
        actions += produced
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
    mutating func answer(_ event: Machine.Event) -> [Machine.Action] {
        #expect(request != nil, "no request in flight to answer with \(event)")
        if let request { #expect(Self.answers(event, request), "\(event) does not answer \(request)") }
        var produced: [Machine.Action] = []
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
    mutating func advance(by duration: Duration) -> [Machine.Action] {
        let target = instant.advanced(by: duration)
        var produced: [Machine.Action] = []
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
    mutating func advanceToAlarm() -> [Machine.Action] {
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

    private mutating func perform(_ action: Machine.Action) -> Machine.Event? {
        switch action {
        case .awaitOnline, .fetchSettings, .fetchMetadata, .patchSettings, .deliverReport, .rotateToken, .runHook:
            #expect(request == nil, "a second request while \(String(describing: request)) is in flight: \(action)")
            request = action
        case .cancelRequest:
            #expect(request != nil && !cancelAsked)
            cancelAsked = true
        case .wake(let at):
            alarm = at
        case .persist:
            if failing["persist"] == nil { settingsEdited = false }
            return .persisted(error: failing["persist"])
        case .checkSettingsFile:
            return .settingsFileChecked(edited: settingsEdited)
        case .rewriteSettings:
            if failing["rewriteSettings"] == nil { settingsEdited = false }
            return .settingsRewritten(error: failing["rewriteSettings"])
        case .restorePrevious:
            settingsEdited = false
        case .loadJournal:
            return .journalLoaded(journalOnDisk, problem: journalOnDisk == nil ? "changes.json: not JSON" : nil)
        case .saveJournal:
            return .journalSaved(error: failing["saveJournal"])
        case .saveReports:
            return .reportsSaved(error: failing["saveReports"])
        case .writeStatus:
            return .statusWritten(error: failing["writeStatus"])
        case .takeUpdateLock:
            return .updateLock(taken: !appHoldsUpdateLock)
        default:
            break
        }
        return nil
    }

    // MARK: - Reading what happened

    /// The settings requests among `actions` (all so far by default).
    func fetches(in actions: [Machine.Action]? = nil) -> [(wait: Int, known: Int64?)] {
        (actions ?? self.actions).compactMap {
            if case .fetchSettings(let wait, let known, _, _, _) = $0 { (wait, known) } else { nil }
        }
    }

    func reports(in actions: [Machine.Action]? = nil) -> [StatusReport] {
        (actions ?? self.actions).compactMap {
            if case .deliverReport(let report) = $0 { report } else { nil }
        }
    }

    func patches(in actions: [Machine.Action]? = nil) -> [JSONObject] {
        (actions ?? self.actions).compactMap {
            if case .patchSettings(let patch, _) = $0 { patch } else { nil }
        }
    }

    func events(in actions: [Machine.Action]? = nil) -> [String] {
        (actions ?? self.actions).compactMap {
            if case .log(let record) = $0 { record.event } else { nil }
        }
    }

    /// The index of the first action that matches, for order checks.
    func index(of predicate: (Machine.Action) -> Bool, in actions: [Machine.Action]) -> Int? {
        actions.firstIndex(where: predicate)
    }

    // MARK: - Common steps

    /// Answers a long-poll (which must be in flight) with `revision` and completes the apply:
    /// metadata fetched when needed, persisted, and the report delivered.
    @discardableResult
    mutating func deliverRevision(_ revision: Int64, _ values: JSONObject = ["greeting": "hello", "volume": 5, "pin": "1234"])
        -> [Machine.Action]
    {
        var produced = answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(revision, values))))
        if case .fetchMetadata = request { produced += answer(.metadataAnswer(TestApp.metadataDocument)) }
        if case .deliverReport = request { produced += answer(.reportDelivered) }
        return produced
    }
}

extension Machine.Action {
    var isFetch: Bool {
        if case .fetchSettings = self { true } else { false }
    }

    var isWriteStatus: Bool {
        if case .writeStatus = self { true } else { false }
    }

    var isSaveReports: Bool {
        if case .saveReports = self { true } else { false }
    }
}
