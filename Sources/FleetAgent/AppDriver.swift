import Curl
import FileWatch
import FleetAgentCore
import FleetAgentRequests
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSchema
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// What every app's driver shares within one configuration generation.
struct SyncEnvironment: Sendable {
    let configuration: AgentConfiguration
    let http: HTTPClient
    let credentials: Promise<DeviceCredentials>
    /// Fulfilled once the inbox has taken what was left in it while the agent was down.
    let inboxScanned: Promise<Void>
    let board: AgentBoard
    /// Seconds since the epoch, for what is recorded (never for a delay or deadline).
    let wallClock: @Sendable () -> Int64
    /// Makes each loop's random source (jitter).
    let makeRandom: @Sendable () -> any RandomNumberGenerator
    let logger: Logger
    /// The server's agent policy as held and settled.
    let policy: PolicyKeeper
    /// What the loops tell the device-wide work (a new policy tag, an app's facts).
    let nudges: DeskNudges
}

/// One app's loop: performs the actions of its ``SyncMachine`` and hands back what happened.
///
/// The machine decides everything; the driver only does: requests with ``FleetClient`` (one at
/// a time, each in a task of its own so that it can be cancelled), the hook with ChildProcess,
/// the alarm with the injected clock, and the inbox's deliveries from the app's
/// ``InboxQueue``. The machine writes the app's files itself, during an event, through
/// ``DeviceAppFiles``. Every wait announces its deadline to the watchdog.
struct AppDriver<C: Clock>: Sendable where C.Duration == Duration {
    typealias Machine = SyncMachine<C.Instant, DeviceAppFiles>

    let app: AppConfiguration
    let environment: SyncEnvironment
    let inbox: InboxQueue
    let clock: C
    private let logger: Logger
    private let layout: DeviceLayout
    private let hook: Hook?
    /// The app's update lock, held from the machine's taking it to its letting go (and let go
    /// when the loop ends).
    private let updateLock: UpdateLock
    /// What the agent wrote to `settings.json` last: anything else there is a hand edit.
    private let written: WrittenSettings

    /// How long the local part of a step may take before the watchdog counts the loop as stuck
    /// (plus ``Liveness/slack``). Checking a request takes milliseconds: pattern matching has a
    /// step budget.
    static var localStepLimit: Duration { .seconds(10) }

    init(app: AppConfiguration, environment: SyncEnvironment, inbox: InboxQueue, clock: C) {
        self.app = app
        self.environment = environment
        self.inbox = inbox
        self.clock = clock
        var logger = environment.logger
        logger[metadataKey: "app"] = "\(app.id)"
        self.logger = logger
        layout = environment.configuration.layout
        hook = app.onChange.isEmpty ? nil : Hook(command: app.onChange, timeout: app.hookTimeout)
        updateLock = UpdateLock(layout: layout, app: app.id)
        written = WrittenSettings(settingsPath: layout.settingsFile(app.id).path, recordPath: layout.writtenSettingsRecord(app.id))
    }

    /// The machine's rules for this app.
    var rules: SyncRules {
        let tuning = environment.policy.tuning(for: app.id)
        return SyncRules(
            app: app.id, longPollWait: tuning.longPollWait, pollInterval: tuning.pollInterval, jitter: tuning.jitter,
            hasHook: hook != nil, expectAck: app.expectAck, ackTimeout: app.ackTimeout, applyWindows: app.applyWindows,
            rollbackOnError: app.rollbackOnError, reportDetail: tuning.reportDetail, updateLockMaxHold: app.updateLockMaxHold)
    }

    /// What the driver is waiting for, for the watchdog.
    private struct Waits {
        var request: Task<Void, Never>?
        /// How long the request in flight may take; `nil` when it may take forever (enrollment).
        var requestLimit: Duration?
        var alarm: Task<Void, Never>?
        var alarmAt: C.Instant?
        var inboxReader: Task<Void, Never>?

        func cancelAll() {
            request?.cancel()
            alarm?.cancel()
            inboxReader?.cancel()
        }
    }

    /// Runs until the task is cancelled.
    func run() async {
        let board = environment.board
        defer { board.endLoop(app.id) }
        board.beginStep(app.id, limit: .seconds(60))
        let (events, sink) = AsyncStream.makeStream(of: Machine.Event.self)
        // Subscribed before the rules are read: a policy adopted in between is not missed.
        environment.policy.subscribe(app: app.id) { sink.yield(.retune($0)) }
        let files = DeviceAppFiles(
            app: app, layout: layout, updateLock: updateLock, written: written, wallClock: environment.wallClock,
            factsChanged: { [nudges = environment.nudges] in nudges.factsChanged() })
        var machine = Machine(rules: rules, random: environment.makeRandom(), files: files)
        var iterator = events.makeAsyncIterator()
        var waits = Waits()
        var pending: [Machine.Event] = [.started(load())]
        let watcher = watchSettings(into: sink)
        defer { watcher?.stop() }
        while true {
            board.beginStep(app.id, limit: Self.localStepLimit)
            while !pending.isEmpty {
                let event = pending.removeFirst()
                if event.endsRequest {
                    waits.request = nil
                    waits.requestLimit = nil
                }
                if case .online = event, waits.inboxReader == nil { waits.inboxReader = readInbox(into: sink) }
                for action in machine.handle(event, at: now()) {
                    if let result = perform(action, waits: &waits, sink: sink) { pending.append(result) }
                }
            }
            if machine.isStopped { break }
            announceWait(waits)
            guard let next = await iterator.next() else { break }  // the task was cancelled
            pending.append(next)
        }
        _ = machine.handle(.stop, at: now())
        updateLock.release()
        waits.cancelAll()
        // A hook is stopped (its whole process group) before the loop ends.
        await waits.request?.value
    }

    private func now() -> Machine.Moment {
        let wall = environment.wallClock()
        return Machine.Moment(clock.now, wall: wall, utcOffset: Self.utcOffset(at: wall))
    }

    /// The local time zone's offset from UTC at `wall` (daylight saving included), from the
    /// C library's view of `TZ` and `/etc/localtime`.
    static func utcOffset(at wall: Int64) -> Int64 {
        var time = time_t(wall)
        var parts = tm()
        guard localtime_r(&time, &parts) != nil else { return 0 }
        return Int64(parts.tm_gmtoff)
    }

    /// Tells the watchdog how long the coming wait may last.
    private func announceWait(_ waits: Waits) {
        let board = environment.board
        if waits.request != nil {
            guard let limit = waits.requestLimit else {
                // Waiting for enrollment is not being stuck: it retries on its own timers.
                board.endLoop(app.id)
                return
            }
            board.beginStep(app.id, limit: limit)
        } else if let alarmAt = waits.alarmAt {
            board.beginStep(app.id, limit: max(.zero, clock.now.duration(to: alarmAt)))
        } else {
            board.endLoop(app.id)
        }
    }

    // MARK: - Actions

    /// Performs one action; returns the event a local action ends with.
    private func perform(
        _ action: Machine.Action, waits: inout Waits, sink: AsyncStream<Machine.Event>.Continuation
    ) -> Machine.Event? {
        switch action {
        case .awaitOnline:
            start(nil, waits: &waits, sink: sink) { [environment, inbox] in
                guard await environment.credentials.value() != nil, await environment.inboxScanned.value() != nil else {
                    return .requestCancelled
                }
                return .online(requests: inbox.takeQueued())
            }
        case .fetchSettings(let wait, let known, let notBefore, let repeats, let report):
            let delay = notBefore.map { max(.zero, clock.now.duration(to: $0)) } ?? .zero
            // The last repeat starts within FleetClient's bound: one request's limit after that.
            let limit = delay + FleetClient.repeatBound(repeats) + .seconds(Int64(wait) + 100)
            start(limit, waits: &waits, sink: sink) { [app, environment] client in
                let settings = try await MachineRequests.settings(
                    client, app: app.id, knownRevision: known, wait: wait, after: delay, repeatsWhileUnchanged: repeats,
                    policyTag: environment.policy.knownTag, carrying: report
                ).get()
                if let tag = settings.policyTag {
                    environment.policy.hear(tag)
                    environment.nudges.hear(policyTag: tag)
                }
                return .settingsAnswer(settings.answer)
            }
        case .fetchMetadata(let etag):
            start(.seconds(100), waits: &waits, sink: sink) { [app] client in
                let fetched = try await MachineRequests.metadata(client, app: app.id, ifNoneMatch: etag).get()
                return .metadataAnswer(fetched.map { MetadataDocument(bytes: $0.bytes, etag: $0.etag) })
            }
        case .patchSettings(let patch, let base):
            start(.seconds(200), waits: &waits, sink: sink) { [app] client in
                .changeConfirmed(revision: try await MachineRequests.patch(client, app: app.id, patch, basedOn: base).get())
            }
        case .deliverReport(let report):
            start(.seconds(70), waits: &waits, sink: sink) { [app] client in
                try await MachineRequests.report(client, app: app.id, report).get()
                return .reportDelivered
            }
        case .rotateToken:
            start(.seconds(100), waits: &waits, sink: sink) { [environment] _ in
                guard let credentials = await environment.credentials.value() else { throw CancellationError() }
                try await credentials.rotate(http: environment.http, server: environment.configuration.server)
                return .tokenRotated
            }
        case .runHook(let settings, let secrets):
            guard let hook else { return .hookFinished(.succeeded) }
            let file = layout.settingsFile(app.id).path
            start(hook.timeout + .seconds(10), waits: &waits, sink: sink) {
                .hookFinished(await hook.run(for: settings, settingsFile: file, secrets: secrets))
            }
        case .cancelRequest:
            waits.request?.cancel()
        case .wake(let instant):
            waits.alarm?.cancel()
            waits.alarmAt = instant
            waits.alarm = instant.map { instant in
                Task { [clock] in
                    try? await clock.sleep(until: instant, tolerance: nil)
                    if !Task.isCancelled { sink.yield(.alarm) }
                }
            }
        case .log(let record):
            logger.log(level: record.level.logging, "\(record.message)", metadata: record.metadata)
        case .showStatus(let text):
            environment.board.setStatus(app.id, text)
        case .served:
            environment.board.served(app.id)
        }
        return nil
    }

    /// Starts a request to the server with the current token (a rotation may have changed it).
    private func start(
        _ limit: Duration, waits: inout Waits, sink: AsyncStream<Machine.Event>.Continuation,
        _ request: @escaping @Sendable (FleetClient) async throws -> Machine.Event
    ) {
        start(limit, waits: &waits, sink: sink) { [environment] in
            guard let credentials = await environment.credentials.value() else { return .requestCancelled }
            let client = credentials.client(http: environment.http, server: environment.configuration.server)
            do {
                return try await request(client)
            } catch is CancellationError {
                return .requestCancelled
            } catch {
                return Task.isCancelled ? .requestCancelled : .requestFailed(SyncFailure.classifying(error))
            }
        }
    }

    /// Starts work that ends with an event, in a task of its own.
    private func start(
        _ limit: Duration?, waits: inout Waits, sink: AsyncStream<Machine.Event>.Continuation,
        _ work: @escaping @Sendable () async -> Machine.Event
    ) {
        waits.requestLimit = limit
        waits.request = Task { sink.yield(await work()) }
    }

    /// Tells the loop whenever `settings.json` changes (written, renamed over, or events lost),
    /// through a watch on the app's folder. Without a watch (inotify's limits), the machine's
    /// check at each answer still finds an edit.
    private func watchSettings(into sink: AsyncStream<Machine.Event>.Continuation) -> DirectoryWatcher? {
        let watcher: DirectoryWatcher
        do {
            watcher = try DirectoryWatcher(directories: [layout.appDirectory(app.id)])
        } catch {
            logger.warning(
                "cannot watch settings.json; hand edits are found at the next answer", metadata: ["event": "watch", "error": "\(error)"])
            return nil
        }
        let name = "settings.json"
        Task {
            for await event in watcher.events {
                switch event {
                case .appeared(_, name), .created(_, name), .removed(_, name), .overflow: sink.yield(.settingsFileChanged)
                default: break
                }
            }
        }
        return watcher
    }

    /// Hands the inbox's deliveries to the loop as they come.
    private func readInbox(into sink: AsyncStream<Machine.Event>.Continuation) -> Task<Void, Never> {
        Task { [inbox] in
            while let deliveries = await inbox.next() {
                sink.yield(.inboxRequests(deliveries))
            }
        }
    }

    // MARK: - Start-up

    /// Reads what is on disk: the settings (the previous generation when the current one is
    /// unusable), the metadata they were validated with, queued reports and changes, the status.
    private func load() -> LoadedState {
        let appDirectory = layout.appDirectory(app.id)
        do {
            try FileSystem.makeDirectories(appDirectory, mode: 0o755)
        } catch {
            logger.error("cannot create the app's directory", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        removeInterruptedWrites(in: appDirectory)
        do {
            try updateLock.create(group: app.readersGroup)
        } catch {
            logger.error("cannot create the update lock", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        let metadataFile = layout.metadataFile(app.id)
        let found = SettingsOnDisk.load(layout.settingsFile(app.id), app: app.id) { settings in
            guard let metadata = MetadataOnDisk.load(metadataFile, version: settings.schemaVersion) else { return [] }
            return metadata.validate(values: .object(settings.values)).map(\.description)
        }
        var loaded = LoadedState(settings: found.settings, problems: found.problems)
        do {
            loaded.editedWhileStopped = try written.load() && found.source == .current
        } catch {
            logger.error("cannot read the record of settings.json", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        switch found.source {
        case .current: loaded.source = .current
        case .previous: loaded.source = .previous
        case .none: loaded.source = .none
        }
        if let settings = found.settings { loaded.metadata = MetadataOnDisk.load(metadataFile, version: settings.schemaVersion) }
        if found.source == .current, let bytes = try? layout.settingsFile(app.id).readPrevious(),
            let previous = try? DeviceSettings(json: try JSONParser.parse(bytes)), previous.app == app.id,
            previous.revision != found.settings?.revision
        {
            loaded.previous = previous
        }
        loaded.reports = PendingReports.load(layout.reportsFile(app.id)) { loaded.reportsProblem = $0 }
        do {
            loaded.journal = try ChangeJournal.load(layout.changesFile(app.id))
        } catch {
            loaded.journal = nil
            loaded.journalProblem = "\(layout.changesFile(app.id)): \(error)"
        }
        loaded.status = AppStatus.load(layout.statusFile(app.id))
        return loaded
    }

    /// Removes the temporary files of writes a crash interrupted (`settings.json.tmp-…`).
    private func removeInterruptedWrites(in directory: String) {
        for name in (try? FileSystem.entryNames(of: directory)) ?? [] where name.contains(".tmp-") {
            try? FileSystem.removeFile(directory + "/" + name)
            logger.info("removed an interrupted write", metadata: ["event": "cleanup", "file": "\(name)"])
        }
    }
}

extension SyncMachine.Event {
    /// Whether this event ends the request (or hook, or wait for enrollment) in flight.
    var endsRequest: Bool {
        switch self {
        case .online, .settingsAnswer, .metadataAnswer, .changeConfirmed, .reportDelivered, .tokenRotated, .requestFailed,
            .requestCancelled, .hookFinished:
            true
        default:
            false
        }
    }
}

extension LogRecord {
    /// The `event=` field and the others, as swift-log metadata.
    var metadata: Logger.Metadata {
        var metadata: Logger.Metadata = ["event": "\(event)"]
        for (key, value) in fields { metadata[key] = "\(value)" }
        return metadata
    }
}

extension LogRecord.Level {
    var logging: Logger.Level {
        switch self {
        case .trace: .trace
        case .debug: .debug
        case .info: .info
        case .notice: .notice
        case .warning: .warning
        case .error: .error
        case .critical: .critical
        }
    }
}
