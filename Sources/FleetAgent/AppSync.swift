import Curl
import FleetAgentCore
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

/// What every app's loop shares within one configuration generation.
struct SyncEnvironment: Sendable {
    let configuration: AgentConfiguration
    let http: HTTPClient
    let credentials: Promise<DeviceCredentials>
    /// Fulfilled once the inbox has taken what was left in it while the agent was down.
    let inboxScanned: Promise<Void>
    let board: AgentBoard
    let clock: any Clock<Duration>
    let wallClock: @Sendable () -> Int64
    let logger: Logger
}

/// One app's sync loop: keeps `apps/<app>/settings.json` true to the server and reports what
/// happened to every revision. Each app has its own loop; one failing app never stalls another.
///
/// The loop serves what is on disk first (offline start), finishes a revision whose hook or
/// report a stop interrupted, then long-polls (or polls) the server, validates every document
/// against its metadata, persists it, runs the hook, and reports `applied`, `error` or
/// `unsupported`. Failures back off exponentially with full jitter, honouring `Retry-After`;
/// the last good settings are never touched by a failure.
///
/// Requests from the inbox (see ``AppMailbox``) are handled between requests to the server:
/// changes of writable settings are queued in `changes.json` and sent (see
/// `AppSync+WriteBack.swift`), acknowledgements relayed, and with `expectAck` a silent app is
/// reported `unsupported` when `ackTimeout` passes.
final class AppSync {
    let app: AppConfiguration
    let environment: SyncEnvironment
    let mailbox: AppMailbox
    let logger: Logger
    let layout: DeviceLayout
    let readersGroup: gid_t?
    private let hook: Hook?

    /// The settings on disk (what apps see), and the metadata they were validated with.
    var settings: DeviceSettings?
    var metadata: Metadata?
    /// The newest metadata fetched, its bytes and ETag (it may not be in use: its values failed).
    private var fetchedMetadata: (result: Result<Metadata, MetadataError>, bytes: [UInt8], etag: String)?
    /// The revision sent in `If-None-Match`: the newest one decided on, applied or refused.
    var knownRevision: Int64?
    var status: AppStatus
    private var statusOnDisk: AppStatus?
    private var statusWrittenAt: ContinuousClock.Instant?
    /// Why the newest revision was refused (or its hook failed); a network error.
    private var verdictError: String?
    private var transportError: String?
    var pending = PendingReports()
    var pendingOnDisk = PendingReports()
    /// The device's own changes (`changes.json`), and what the file holds.
    var journal = ChangeJournal()
    var journalOnDisk = ChangeJournal()
    /// Why `changes.json` could not be read: changes wait in the inbox rather than overwrite it.
    var journalProblem: String?
    private var schedule: PollSchedule
    private var backoff = RetryBackoff()
    private var random = SystemRandomNumberGenerator()

    init(app: AppConfiguration, environment: SyncEnvironment, mailbox: AppMailbox) {
        self.app = app
        self.environment = environment
        self.mailbox = mailbox
        var logger = environment.logger
        logger[metadataKey: "app"] = "\(app.id)"
        self.logger = logger
        layout = environment.configuration.layout
        readersGroup = app.readersGroup
        hook = app.onChange.isEmpty ? nil : Hook(command: app.onChange, timeout: app.hookTimeout)
        status = AppStatus(app: app.id)
        let configuration = environment.configuration
        schedule = PollSchedule(
            longPollWait: configuration.longPollWait, pollInterval: configuration.pollInterval, jitter: configuration.jitter)
    }

    /// How long the local part of a turn may take before the watchdog counts the loop as stuck
    /// (plus ``Liveness/slack``). Checking a request takes milliseconds: pattern matching has a
    /// step budget.
    static let localStepLimit: Duration = .seconds(10)

    /// Runs until the task is cancelled.
    func run() async {
        defer { environment.board.endLoop(app.id) }
        environment.board.beginStep(app.id, limit: .seconds(60))
        let unfinished = loadFromDisk()
        if let unfinished { await finishApply(unfinished, client: nil) }
        // Waiting for enrollment is not being stuck: enrollment retries on its own timers, for
        // as long as there is no token, and the watchdog must not restart the agent meanwhile.
        environment.board.endLoop(app.id)
        guard let credentials = await environment.credentials.value() else { return }
        // Requests left while the agent was down go first, based on the revision they were made
        // against (a server that moved on answers 409, and the change is checked again).
        guard await environment.inboxScanned.value() != nil else { return }
        while !Task.isCancelled {
            // The local part of a turn (the inbox's requests, checked against the metadata; the
            // ack deadline) is a step of its own: a request that took too long to check would
            // otherwise hide behind the deadline of the sleep it woke the loop from.
            environment.board.beginStep(app.id, limit: Self.localStepLimit)
            // Built each turn: a rotation may have changed the token since the last one.
            let client = credentials.client(http: environment.http, server: environment.configuration.server)
            handleMailbox()
            expireAwaitedAck()
            await deliverReports(client)
            let request = schedule.nextRequest
            var delay: Duration
            do {
                try await pushChanges(client)
                let started = ContinuousClock.now
                let answer = try await fetchSettings(client, request)
                if answer.rotationRequested { await credentials.rotate(http: environment.http, server: environment.configuration.server) }
                switch answer {
                case .interrupted:
                    logger.debug("sync requested", metadata: ["event": "sync-now"])
                    delay = .zero
                case .unchanged:
                    markReached()
                    delay = schedule.delay(after: .unchanged(elapsed: ContinuousClock.now - started), using: &random)
                case .changed(let document, _) where document.revision == knownRevision:
                    // Decided on already (applied or refused): the server ignored If-None-Match.
                    // Nothing is done again, nothing reported again, and the next request waits.
                    markReached()
                    logger.debug(
                        "the server sent a revision already decided on",
                        metadata: ["event": "repeated", "revision": "\(document.revision)"])
                    delay = schedule.delay(after: .repeated, using: &random)
                case .changed(let document, _):
                    markReached()
                    try await handle(document, client: client)
                    delay = schedule.delay(after: .changed, using: &random)
                }
                backoff.reset()
            } catch is CancellationError {
                break
            } catch {
                let failure = SyncFailure.classifying(error)
                if failure.refusesLongPoll, request != .poll {
                    logger.warning("the server refuses long-polls; polling on the timer", metadata: ["event": "long-poll-refused"])
                    delay = schedule.delay(after: .longPollRefused, using: &random)
                } else {
                    delay = backoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
                    recordFailure(failure, retryIn: delay)
                }
            }
            writeStatus()
            if let untilAckDeadline { delay = min(delay, untilAckDeadline) }
            // A request may have come while the answer won the race with the inbox's wake-up.
            if mailbox.hasFreshDeliveries { delay = .zero }
            environment.board.beginStep(app.id, limit: delay)
            if await sleep(for: delay, on: environment.clock, orUntil: mailbox.wakeup) {
                logger.debug("woken by the inbox", metadata: ["event": "inbox-wakeup"])
            }
        }
    }

    // MARK: - Start-up

    /// Reads what is on disk and serves it; returns the settings whose outcome a stop left open.
    private func loadFromDisk() -> DeviceSettings? {
        let appDirectory = layout.appDirectory(app.id)
        do {
            try FileSystem.makeDirectories(appDirectory, mode: 0o755)
        } catch {
            logger.error("cannot create the app's directory", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        removeInterruptedWrites(in: appDirectory)
        let metadataFile = layout.metadataFile(app.id)
        let found = SettingsOnDisk.load(layout.settingsFile(app.id), app: app.id) { settings in
            guard let metadata = MetadataOnDisk.load(metadataFile, version: settings.schemaVersion) else { return [] }
            return metadata.validate(values: .object(settings.values)).map(\.description)
        }
        pendingOnDisk = PendingReports.load(layout.reportsFile(app.id)) { problem in
            logger.error("queued reports unreadable; starting with none", metadata: ["event": "disk-error", "error": "\(problem)"])
        }
        pending = pendingOnDisk
        loadJournal()
        let stored = AppStatus.load(layout.statusFile(app.id))
        statusOnDisk = stored
        if let stored { status = stored }
        settings = found.settings
        knownRevision = found.settings?.revision
        if let settings = found.settings {
            metadata = MetadataOnDisk.load(metadataFile, version: settings.schemaVersion)
        }
        switch found.source {
        case .previous:
            guard let settings = found.settings else { break }
            let message = SettingsVerdict.message(
                "settings.json was unusable; serving revision \(settings.revision) from settings.previous.json", found.problems)
            logger.error("settings.json unusable, previous generation restored", metadata: ["event": "restored", "error": "\(message)"])
            do {
                try layout.settingsFile(app.id).restorePrevious(mode: 0o640, group: readersGroup)
            } catch {
                logger.error("cannot restore settings.json", metadata: ["event": "disk-error", "error": "\(error)"])
            }
            verdictError = message
            queue(
                StatusReport(
                    revision: settings.revision, schemaVersion: settings.schemaVersion, state: .error, message: message, source: .agent))
            savePending()
        case .none where !found.problems.isEmpty:
            let message = SettingsVerdict.message("no usable settings on disk", found.problems)
            logger.error("no usable settings on disk", metadata: ["event": "disk-error", "error": "\(message)"])
            verdictError = message
        default:
            break
        }
        if let settings {
            settleChanges(upTo: settings.revision)
            logger.info(
                "serving settings from disk",
                metadata: ["event": "loaded", "revision": "\(settings.revision)", "schema_version": "\(settings.schemaVersion)"])
            environment.board.setStatus(app.id, "revision \(settings.revision) from disk")
            environment.board.served(app.id)
        }
        return StartupRecovery.needsCompletion(settings: settings, status: stored) || found.source == .previous ? settings : nil
    }

    /// Removes the temporary files of writes a crash interrupted (`settings.json.tmp-…`).
    private func removeInterruptedWrites(in directory: String) {
        for name in (try? FileSystem.entryNames(of: directory)) ?? [] where name.contains(".tmp-") {
            try? FileSystem.removeFile(directory + "/" + name)
            logger.info("removed an interrupted write", metadata: ["event": "cleanup", "file": "\(name)"])
        }
    }

    // MARK: - One request

    private enum Answer {
        case interrupted
        /// `rotationRequested`: the admin asked the device for a new token.
        case unchanged(rotationRequested: Bool)
        case changed(SettingsDocument, rotationRequested: Bool)

        var rotationRequested: Bool {
            switch self {
            case .interrupted: false
            case .unchanged(let requested), .changed(_, let requested): requested
            }
        }
    }

    /// Sends the settings request, or gives up on it when "sync now" is asked for.
    private func fetchSettings(_ client: FleetClient, _ request: PollSchedule.Request) async throws -> Answer {
        let wait: Int
        switch request {
        case .longPoll(let seconds): wait = seconds
        case .poll: wait = 0
        }
        environment.board.beginStep(app.id, limit: .seconds(Int64(wait) + 100))
        let known = knownRevision
        let appID = app.id
        let wakeup = mailbox.wakeup
        let untilAckDeadline = untilAckDeadline
        let clock = environment.clock
        return try await withThrowingTaskGroup(of: Answer.self) { group in
            group.addTask {
                let answer = try await client.settingsAnswer(app: appID, knownRevision: known, wait: wait)
                guard let document = answer.document else { return .unchanged(rotationRequested: answer.tokenRotationRequested) }
                return .changed(document, rotationRequested: answer.tokenRotationRequested)
            }
            group.addTask {
                await wakeup.wait()
                try Task.checkCancellation()
                return .interrupted
            }
            if let untilAckDeadline {
                group.addTask {
                    try await clock.sleep(for: untilAckDeadline)
                    return .interrupted
                }
            }
            defer { group.cancelAll() }
            guard let first = try await group.next() else { throw CancellationError() }
            return first
        }
    }

    /// Decides on a document the server sent, and acts.
    func handle(_ document: SettingsDocument, client: FleetClient) async throws {
        if let settings, document.revision == settings.revision, document.schemaVersion == settings.schemaVersion {
            knownRevision = document.revision
            settleChanges(upTo: document.revision)
            return
        }
        status.latestRevision = document.revision
        let candidate = try await metadata(for: document.schemaVersion, client: client)
        switch SettingsVerdict.evaluate(document, app: app.id, metadata: candidate) {
        case .needsMetadata(let version):
            fetchedMetadata = nil
            throw AgentError.metadataMismatch(settingsVersion: document.schemaVersion, metadataVersion: version)
        case .refuse(let state, let message):
            knownRevision = document.revision
            verdictError = message
            status.state = state == .unsupported ? .unsupported : .error
            logger.warning(
                "revision refused",
                metadata: [
                    "event": "refused", "revision": "\(document.revision)", "schema_version": "\(document.schemaVersion)",
                    "state": "\(state.rawValue)", "message": "\(message)",
                ])
            environment.board.setStatus(app.id, "revision \(document.revision) \(state.rawValue), serving \(servedText)")
            stopAwaitingAck()
            settleChanges(upTo: document.revision, refusal: message)
            await report(
                StatusReport(
                    revision: document.revision, schemaVersion: document.schemaVersion, state: state, message: message, source: .agent),
                client: client)
            writeStatus(force: true)
        case .apply:
            guard case .success(let newMetadata) = candidate else { return }
            let received = DeviceSettings(document, syncedAt: environment.wallClock())
            do {
                try persist(received, metadata: newMetadata)
            } catch {
                let message = "cannot write the settings: \(error)"
                await report(
                    StatusReport(
                        revision: document.revision, schemaVersion: document.schemaVersion, state: .error, message: message, source: .agent),
                    client: client)
                throw AgentError.disk(message)
            }
            let changed = SettingsValues.changedKeys(settings?.values ?? [:], received.values)
            metadata = newMetadata
            settings = received
            knownRevision = document.revision
            settleChanges(upTo: received.revision)
            logger.notice(
                "settings applied",
                metadata: [
                    "event": "applied", "revision": "\(received.revision)", "schema_version": "\(received.schemaVersion)",
                    "changed": "\(changed.joined(separator: ","))",
                ])
            environment.board.setStatus(app.id, "revision \(received.revision) written")
            environment.board.served(app.id)
            await finishApply(received, client: client)
        }
    }

    /// The metadata of `version`: the one in use, or the server's (fetched when its ETag changed).
    private func metadata(for version: Int64, client: FleetClient) async throws -> Result<Metadata, MetadataError> {
        if let metadata, Int64(metadata.version) == version { return .success(metadata) }
        if let fetched = try await client.metadata(app: app.id, ifNoneMatch: fetchedMetadata?.etag) {
            let result: Result<Metadata, MetadataError>
            do {
                result = .success(try Metadata(json: fetched.document))
            } catch {
                result = .failure(error)
            }
            fetchedMetadata = (result, fetched.document, fetched.etag)
            logger.info("metadata fetched", metadata: ["event": "metadata", "etag": "\(fetched.etag)"])
        }
        guard let fetchedMetadata else { throw AgentError.metadataMissing }
        return fetchedMetadata.result
    }

    /// Writes the metadata (when it is new) and then the settings, each keeping its previous
    /// generation: at every instant one of the metadata generations matches the settings file.
    private func persist(_ received: DeviceSettings, metadata newMetadata: Metadata) throws(FileError) {
        if metadata?.version != newMetadata.version, let bytes = fetchedMetadata?.bytes {
            try layout.metadataFile(app.id).write(bytes, mode: 0o640, group: readersGroup)
        }
        try layout.settingsFile(app.id).write(received.fileBytes, mode: 0o640, group: readersGroup)
    }

    /// Runs the hook for settings just written (or left unfinished by a stop), reports the
    /// outcome, and records it in `status.json`. A cancelled hook records nothing: the next
    /// start finishes it.
    private func finishApply(_ applied: DeviceSettings, client: FleetClient?) async {
        var state = StatusReport.State.applied
        var message = ""
        if let hook {
            let delay = RetryBackoff.uniform(upTo: environment.configuration.jitter, using: &random)
            environment.board.beginStep(app.id, limit: delay + hook.timeout + .seconds(10))
            try? await environment.clock.sleep(for: delay)
            guard !Task.isCancelled else { return }
            let secrets = metadata?.secretScalars(in: applied.values) ?? []
            switch await hook.run(for: applied, settingsFile: layout.settingsFile(app.id).path, secrets: secrets) {
            case .cancelled:
                return
            case .failed(let reason):
                state = .error
                message = reason
                logger.error("hook failed", metadata: ["event": "hook", "revision": "\(applied.revision)", "error": "\(reason)"])
            case .succeeded:
                logger.info("hook ran", metadata: ["event": "hook", "revision": "\(applied.revision)"])
            }
        }
        verdictError = state == .applied ? nil : message
        if state == .applied { awaitAck(for: applied.revision) } else { stopAwaitingAck() }
        status.revision = applied.revision
        status.schemaVersion = applied.schemaVersion
        status.state = state == .applied ? .applied : .error
        status.latestRevision = max(status.latestRevision ?? applied.revision, applied.revision)
        let report = StatusReport(
            revision: applied.revision, schemaVersion: applied.schemaVersion, state: state, message: message, source: .agent)
        if let client {
            await self.report(report, client: client)
        } else {
            queue(report)
            savePending()
        }
        environment.board.setStatus(app.id, "revision \(applied.revision) \(state.rawValue)")
        writeStatus(force: true)
    }

    private var servedText: String { settings.map { "revision \($0.revision)" } ?? "nothing" }

    // MARK: - Reports

    /// Queues a report and tries to deliver the queue at once.
    private func report(_ report: StatusReport, client: FleetClient) async {
        queue(report)
        await deliverReports(client)
    }

    /// Adds a report to the queue in memory. Delivery (or, failing that, a durable save of the
    /// queue) comes before `status.json` records the outcome, so a crash in between repeats the
    /// report rather than losing it.
    func queue(_ report: StatusReport) {
        var report = report
        if report.message.unicodeScalars.count > StatusReport.maximumMessageLength {
            report.message =
                String(String.UnicodeScalarView(report.message.unicodeScalars.prefix(StatusReport.maximumMessageLength - 1))) + "…"
        }
        pending.append(report)
        status.pendingReports = pending.reports.count
    }

    /// Sends queued reports in order until one fails; a report fleetset's server refuses for
    /// good (``SyncFailure/Kind/final``) is dropped rather than blocking the queue forever.
    private func deliverReports(_ client: FleetClient) async {
        guard !pending.isEmpty else { return }
        environment.board.beginStep(app.id, limit: .seconds(70) * pending.reports.count)
        var delivered = 0
        for report in pending.reports {
            do {
                try await client.reportStatus(app: app.id, report)
            } catch {
                let failure = SyncFailure.classifying(error)
                guard failure.kind == .final else { break }
                logger.error("status report refused; dropped", metadata: ["event": "report-refused", "error": "\(failure)"])
            }
            delivered += 1
        }
        pending.removeFirst(delivered)
        savePending()
    }

    func savePending() {
        status.pendingReports = pending.reports.count
        guard pending != pendingOnDisk else { return }
        do {
            try pending.save(to: layout.reportsFile(app.id))
            pendingOnDisk = pending
        } catch {
            logger.error("cannot save queued reports", metadata: ["event": "disk-error", "error": "\(error)"])
        }
    }

    // MARK: - Status

    private func markReached() {
        status.lastSync = environment.wallClock()
        if transportError != nil {
            transportError = nil
            logger.notice("server reached again", metadata: ["event": "reconnected"])
            environment.board.setStatus(app.id, settings.map { "revision \($0.revision) \(status.state.rawValue)" } ?? "no settings yet")
        }
    }

    private func recordFailure(_ failure: SyncFailure, retryIn delay: Duration) {
        let text = failure.summary
        transportError = text
        logger.warning("sync failed", metadata: ["event": "sync-failed", "error": "\(text)", "retry_in": "\(Hook.seconds(delay))"])
        environment.board.setStatus(app.id, "serving \(servedText); sync failed: \(text)")
    }

    /// Writes `status.json` when something but the time of the last sync changed, or when that
    /// time is more than a minute newer than the file's (to spare flash storage on quiet devices).
    func writeStatus(force: Bool = false) {
        status.lastError = transportError ?? verdictError
        status.pendingReports = pending.reports.count
        status.pendingChanges = journal.queued.count
        var comparable = status
        var onDisk = statusOnDisk
        comparable.lastSync = nil
        comparable.updatedAt = 0
        onDisk?.lastSync = nil
        onDisk?.updatedAt = 0
        let now = ContinuousClock.now
        let stale = statusWrittenAt.map { now - $0 > .seconds(60) } ?? true
        guard force || comparable != onDisk || (stale && status.lastSync != statusOnDisk?.lastSync) else { return }
        status.updatedAt = environment.wallClock()
        do {
            try status.write(to: layout.statusFile(app.id), group: readersGroup)
            statusOnDisk = status
            statusWrittenAt = now
        } catch {
            logger.error("cannot write status.json", metadata: ["event": "disk-error", "error": "\(error)"])
        }
    }
}

/// Failures of the agent's own making, as people read them.
enum AgentError: Error, CustomStringConvertible {
    case metadataMismatch(settingsVersion: Int64, metadataVersion: Int64)
    case metadataMissing
    case disk(String)

    var description: String {
        switch self {
        case .metadataMismatch(let settings, let metadata):
            "the settings name schema version \(settings) but the server's metadata is version \(metadata); fetching again"
        case .metadataMissing: "the server sent no metadata for the app"
        case .disk(let message): message
        }
    }
}
