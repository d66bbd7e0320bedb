import Curl
import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetProtocol
import FleetVersion
import Logging
import PosixThreads
import ServiceLifecycle
import SystemdNotify
import UnixSignals

#if canImport(Glibc)
import Glibc
#endif

/// `fleetsetd`: keeps every configured app's settings file true to the server.
///
/// Run it in a `ServiceGroup` with SIGTERM and SIGINT as graceful-shutdown signals: shutdown
/// cancels every loop (a long-poll in flight is aborted at once), says `STOPPING=1`, and
/// returns. SIGHUP re-reads the configuration file: a valid one replaces the running
/// configuration (every loop restarts from disk, which also syncs at once); an invalid one is
/// logged and the running configuration stays.
public final class Agent: Service {
    private let configurationPath: String
    private let initialConfiguration: AgentConfiguration
    private let notifier: SystemdNotifier?
    private let watchdogInterval: Duration?
    private let logger: Logger
    private let clock: any Clock<Duration>
    private let wallClock: @Sendable () -> Int64
    private let makeRandom: @Sendable () -> any RandomNumberGenerator
    private let onReload: @Sendable (AgentConfiguration) -> Void
    private let applyLogLevel: @Sendable (String) -> Void
    /// When the pages of start-up are handed back: once per process (``StartupPagesRelease``).
    private let startupPages = Locked(StartupPagesRelease())

    /// - Parameters:
    ///   - configurationPath: the file SIGHUP re-reads.
    ///   - configuration: the configuration read from it at start.
    ///   - notifier: systemd's notify socket, when run by systemd.
    ///   - watchdogInterval: how often to feed systemd's watchdog (half of `WatchdogSec`).
    ///   - clock: every delay and deadline.
    ///   - wallClock: seconds since the epoch, for what is recorded (never for a delay).
    ///   - makeRandom: the random source of each loop (jitter).
    ///   - onReload: called with each configuration SIGHUP re-read and accepted, before it is
    ///     used.
    ///   - applyLogLevel: sets the level logged from now on: the configuration's, or the agent
    ///     policy's when the file does not pin it (see ``SettledPolicy``).
    public init(
        configurationPath: String, configuration: AgentConfiguration, notifier: SystemdNotifier?, watchdogInterval: Duration?,
        logger: Logger, clock: any Clock<Duration> = ContinuousClock(),
        wallClock: @escaping @Sendable () -> Int64 = { Int64(time(nil)) },
        makeRandom: @escaping @Sendable () -> any RandomNumberGenerator = { SystemRandomNumberGenerator() },
        onReload: @escaping @Sendable (AgentConfiguration) -> Void = { _ in },
        applyLogLevel: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.applyLogLevel = applyLogLevel
        self.configurationPath = configurationPath
        self.initialConfiguration = configuration
        self.notifier = notifier
        self.watchdogInterval = watchdogInterval
        self.logger = logger
        self.clock = clock
        self.wallClock = wallClock
        self.makeRandom = makeRandom
        self.onReload = onReload
    }

    /// - Throws: ``AgentCannotRun`` when the agent cannot work at all (libcurl too old or
    ///   without TLS): `fleetsetd` then exits with status 1, so that systemd's restart policy
    ///   and start limit apply instead of a loop that retries at once, forever.
    public func run() async throws {
        let reload = Wakeup()
        let hangups = await UnixSignalsSequence(trapping: .sighup)
        logger.notice(
            "starting",
            metadata: [
                "event": "starting", "config": "\(configurationPath)",
                "apps": "\(initialConfiguration.apps.map(\.id).joined(separator: ","))",
                "server": "\(initialConfiguration.server)",
            ])
        try await withGracefulShutdownHandler {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await _ in hangups { reload.signal() }
                }
                group.addTask { try await self.superviseGenerations(reload: reload) }
                defer { group.cancelAll() }
                try await group.next()
            }
        } onGracefulShutdown: { [notifier, logger] in
            logger.notice("stopping", metadata: ["event": "stopping"])
            notifier?.send(.stopping, .status("stopping"))
        }
        logger.notice("stopped", metadata: ["event": "stopped"])
    }

    /// Runs one configuration generation after the other, until shutdown.
    ///
    /// - Throws: ``AgentCannotRun`` when a generation cannot start.
    private func superviseGenerations(reload: Wakeup) async throws {
        try await cancelWhenGracefulShutdown {
            var configuration = self.initialConfiguration
            while !Task.isCancelled {
                let board = AgentBoard(apps: configuration.apps.map(\.id), notifier: self.notifier, logger: self.logger)
                let running = configuration
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await self.runGeneration(running, board: board) }
                    group.addTask { await reload.wait() }
                    defer { group.cancelAll() }
                    try await group.next()
                }
                guard !Task.isCancelled else { return }
                self.notifier?.send(.reloading, .status("reloading \(self.configurationPath)"))
                do {
                    configuration = try AgentConfiguration.load(self.configurationPath)
                    self.onReload(configuration)
                    // A pinned level applies at once; otherwise the new generation settles it with the server's.
                    if configuration.pinnedPolicy.contains(.logLevel) { self.applyLogLevel(configuration.logLevel) }
                    self.logger.notice(
                        "configuration reloaded",
                        metadata: ["event": "reloaded", "apps": "\(configuration.apps.map(\.id).joined(separator: ","))"])
                } catch {
                    self.logger.error(
                        "configuration refused; keeping the running one", metadata: ["event": "reload-failed", "error": "\(error)"])
                }
            }
        }
    }

    /// Runs every app's loop, the inbox, the watchdog and the ready timeout for one configuration.
    ///
    /// - Throws: ``AgentCannotRun`` when the HTTP client cannot start.
    private func runGeneration(_ configuration: AgentConfiguration, board: AgentBoard) async throws {
        let http: HTTPClient
        do {
            http = try HTTPClient(configuration: Self.httpConfiguration(configuration))
        } catch {
            logger.critical("cannot start the HTTP client; stopping", metadata: ["event": "fatal", "error": "\(error)"])
            throw AgentCannotRun(reason: "cannot start the HTTP client: \(error)")
        }
        // The state directory before anything is kept in it (the policy is, at once): on a new
        // device it does not exist yet (the package's tmpfiles make it; a hand-made setup may not).
        // Its own modes as the packaged one's: 0755, so that each app's readers reach their folder.
        do {
            try FileSystem.makeDirectories(configuration.layout.appsDirectory, mode: 0o755)
        } catch {
            logger.error("cannot create the state directory", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        let credentials = Promise<DeviceCredentials>()
        let inboxScanned = Promise<Void>()
        let environment = SyncEnvironment(
            configuration: configuration, http: http, credentials: credentials, inboxScanned: inboxScanned, board: board,
            wallClock: wallClock, makeRandom: makeRandom, logger: logger,
            policy: PolicyKeeper(configuration: configuration, applyLogLevel: applyLogLevel, logger: logger), nudges: DeskNudges())
        let clock: any Clock<Duration> = self.clock  // a local, which the call below opens to its concrete type
        await runLoops(configuration, environment: environment, clock: clock)
        await http.shutdown()
    }

    /// Every app's loop, enrollment, the inbox, the ready timeout and the watchdog, on `clock`.
    private func runLoops<C: Clock<Duration>>(_ configuration: AgentConfiguration, environment: SyncEnvironment, clock: C) async {
        let queues = Dictionary(uniqueKeysWithValues: configuration.apps.map { ($0.id, InboxQueue()) })
        let board = environment.board
        await withTaskGroup(of: Void.self) { group in
            for app in configuration.apps {
                group.addTask { await AppDriver(app: app, environment: environment, inbox: queues[app.id]!, clock: clock).run() }
            }
            group.addTask {
                let enrollment = Enrollment(
                    configuration: configuration, http: environment.http, clock: clock, wallClock: self.wallClock,
                    makeRandom: self.makeRandom, logger: self.logger)
                if let found = await enrollment.identity() {
                    environment.credentials.fulfil(
                        DeviceCredentials(found, identityFile: configuration.layout.identityFile, logger: self.logger))
                }
            }
            group.addTask {
                await DeviceDesk(
                    configuration: configuration, environment: environment, keeper: environment.policy, nudges: environment.nudges,
                    clock: clock
                ).run()
            }
            group.addTask {
                await Inbox(
                    configuration: configuration, queues: queues, scanned: environment.inboxScanned, clock: clock,
                    wallClock: self.wallClock, logger: self.logger
                ).run()
            }
            group.addTask {
                try? await clock.sleep(for: configuration.readyTimeout)
                if !Task.isCancelled { board.readyTimeoutPassed() }
            }
            if let interval = watchdogInterval {
                group.addTask { await self.feedWatchdog(every: interval, board: board) }
            }
            group.addTask { await self.releaseStartupPages(once: board, clock: clock) }
            await group.waitForAll()
        }
    }

    /// Once per process, a few seconds after READY=1 (``StartupPagesRelease``): hands the
    /// resident pages of the code and constants start-up used back to the kernel
    /// (``StartupPages``). What the loops use comes back on its first use.
    private func releaseStartupPages<C: Clock<Duration>>(once board: AgentBoard, clock: C) async {
        guard await board.ready.value() != nil, let delay = startupPages.withLock({ $0.delayAfterReady() }) else { return }
        try? await clock.sleep(for: delay)
        guard !Task.isCancelled, startupPages.withLock({ $0.release() }) else { return }
        let advised = StartupPages.release()
        logger.info("start-up pages handed back", metadata: ["event": "memory", "advised_bytes": "\(advised)"])
    }

    /// Sends `WATCHDOG=1` every `interval` while no loop is overdue.
    private func feedWatchdog(every interval: Duration, board: AgentBoard) async {
        var reported: [String] = []
        while !Task.isCancelled {
            let overdue = board.overdueLoops()
            if overdue.isEmpty {
                notifier?.send(.watchdog)
            } else if overdue != reported {
                logger.critical(
                    "loops stuck; no longer feeding the watchdog",
                    metadata: ["event": "watchdog", "stuck": "\(overdue.joined(separator: ","))"])
            }
            reported = overdue
            try? await clock.sleep(for: interval)
        }
    }

    /// The HTTP client's configuration: TLS as configured (verification always on), plain HTTP
    /// only when allowed, and a 4 MiB cap on any answer.
    static func httpConfiguration(_ configuration: AgentConfiguration) -> HTTPClient.Configuration {
        HTTPClient.Configuration(
            tls: .init(
                caFile: configuration.caFile, clientCertificateFile: configuration.clientCertificate, clientKeyFile: configuration.clientKey
            ),
            allowInsecureHTTP: configuration.allowInsecureHTTP,
            limits: TransferLimits(maxResponseBytes: maximumResponseSize),
            userAgent: "fleetsetd/\(version)")
    }

    /// The largest answer the agent accepts from the server: 4 MiB (the server's own limit for
    /// a metadata document).
    public static let maximumResponseSize = 4 << 20

    /// The agent's version (the package's VERSION file).
    public static let version = FleetVersion.current
}

/// A failure no retry can mend (libcurl too old or without TLS): the agent stops, and systemd's
/// restart policy and start limit decide what comes next.
public struct AgentCannotRun: Error, CustomStringConvertible {
    public let reason: String
    public var description: String { reason }
}
