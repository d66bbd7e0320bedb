import ArgumentParser
import FleetIO
import FleetLogging
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetVersion
import FleetWebhooks
import Hummingbird
import Logging
import Prometheus
import SystemdNotify

#if canImport(Glibc)
import Glibc
#endif

/// `fleetset-server`: the reference server of protocol v1.
@main
struct FleetsetServer: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fleetset-server",
        abstract: "Serves fleetset's protocol v1: devices pull their settings, admins manage them.",
        version: FleetVersion.current,
        subcommands: [Serve.self, Migrate.self, CheckDatabase.self, Audit.self, Accounts.self],
        defaultSubcommand: Serve.self)
}

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server until SIGTERM or SIGINT.",
        discussion: """
            Logs go to standard error as logfmt lines, one per event; every device status report \
            is one line with event=status. Under systemd (Type=notify) the server sends READY=1 \
            once it listens and STOPPING=1 when it stops, and its log lines carry journald \
            priorities.
            """)

    @Option(
        help: """
            The SQLite database file (created, with its -wal and -shm files, if missing), or a PostgreSQL database: \
            postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?sslmode=verify-full&sslrootcert=PATH&host=/SOCKET/FOLDER] \
            (the password comes from --database-password-file or PGPASSWORD, never the URL: a command line is visible to every user). \
            Several instances on one PostgreSQL database act as one server.
            """)
    var database: String

    @Option(help: "A file whose first line is the PostgreSQL password (readable by the server's user only, e.g. a systemd credential).")
    var databasePasswordFile: String?

    @Option(help: "The most PostgreSQL connections this instance opens (default 20; the URL's pool_size says the same).")
    var databasePool: Int?

    @Option(help: "Where to listen, HOST:PORT (port 0: any free port; the log names it).")
    var listen: String = "127.0.0.1:8443"

    @Option(help: "What a new password hash costs: scrypt's N = 2^COST (r = 8, p = 1), 10 to 20; 17 (128 MiB) unless told.")
    var passwordCost: Int = 17

    @Option(help: "PEM certificate chain: serve HTTPS (HTTP/2 and HTTP/1.1) with it.")
    var tlsCertificate: String?

    @Option(help: "PEM private key of --tls-certificate.")
    var tlsKey: String?

    @Option(help: "PEM CA bundle: require client certificates signed by it (mutual TLS; with --tls-certificate).")
    var clientCa: String?

    @Option(help: "The admin token file; created with a fresh token (mode 0600) if missing.")
    var adminTokenFile: String = "admin-token"

    @OptionGroup(title: "Single sign-on")
    var sso: SingleSignOnOptions

    @Option(help: "The lowest level logged: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(help: "Requests per second one device may send, sustained (beyond: 429 with Retry-After).")
    var deviceRate: Double = 10

    @Option(help: "Requests one device may send at once.")
    var deviceBurst: Double = 50

    @Option(help: "Writes per second one device may send, sustained: settings write-backs, facts, token requests (beyond: 429).")
    var deviceWriteRate: Double = 0.2

    @Option(help: "Writes one device may send at once.")
    var deviceWriteBurst: Double = 30

    @Option(help: "Requests per second one client address may send, sustained (all its devices together).")
    var addressRate: Double = 200

    @Option(help: "Requests one client address may send at once.")
    var addressBurst: Double = 400

    @Option(help: "A reverse proxy (its IP address) whose X-Forwarded-For names the client, for the limits (repeatable).")
    var trustedProxy: [String] = []

    @Option(
        help:
            "The most long-polls held at once; one more is answered 503 with Retry-After. Default: the open-file limit (raised to its hard limit at start) less a reserve of a quarter, at most 1,000."
    )
    var maxLongPolls: Int?

    @Option(
        help:
            "Seconds a device is told to wait before its next request (spread over the second half) once nine tenths of --max-long-polls are held: the server answers new long-polls at once with Fleetset-Next-Poll rather than holding them. 0: hold until full, then answer 503."
    )
    var busyPollInterval: Int = 120

    @Flag(
        inversion: .prefixedNo,
        help: "Serve the admin console under /console/ (sign in with the admin token); --no-console leaves only the API.")
    var console = true

    @Option(
        help:
            "How often running rollouts are looked at, in seconds (0.1 to 60): a wave is admitted at most this long after its last report.")
    var rolloutCheckInterval: Double = 2

    @Option(
        help: ArgumentHelp(
            "How much of each app's history to keep: 90d (by age), 100000 (by count), 90d,100000 (either limit removes), or keep-all. The newest entry of each scope always stays.",
            valueName: "AGE,COUNT"))
    var historyKeep: String = "100000"

    @Flag(
        help:
            "Let webhooks reach private, link-local and shared addresses (RFC 1918, fc00::/7, …): for receivers inside the organization's network. Loopback stays for loopback URLs only; the cloud metadata address is never reached."
    )
    var webhooksAllowPrivate = false

    @Option(help: "How often this instance looks for webhook messages other instances queued, in seconds (1 to 60).")
    var webhooksLookInterval: Int = 5

    @Option(
        help:
            "Seconds since a device was last seen beyond which the gauge fleetset_devices_silent counts it, 60 to 2592000 (30 days); keep it above the agents' long-poll wait (at most 300 s)."
    )
    var silentAfter: Int = 3600

    @Option(
        help:
            "How often the fleet's gauges (devices, silent devices, latest reports and rollouts per app) are read from the store for /metrics, in seconds (1 to 3600; 0: never)."
    )
    var gaugeInterval: Double = 30

    func validate() throws {
        guard (60...2_592_000).contains(silentAfter) else {
            throw ValidationError("--silent-after must be a number of seconds from 60 to 2592000 (30 days)")
        }
        guard gaugeInterval == 0 || (1...3600).contains(gaugeInterval) else {
            throw ValidationError("--gauge-interval must be a number of seconds from 1 to 3600, or 0 for never")
        }
        guard (1...60).contains(webhooksLookInterval) else { throw ValidationError("--webhooks-look-interval is 1 to 60 seconds") }
        guard (10...20).contains(passwordCost) else { throw ValidationError("--password-cost is 10 to 20 (scrypt's N = 2^COST)") }
        guard HistoryRetention(historyKeep) != nil else {
            throw ValidationError("--history-keep must be DAYSd, a COUNT, both as DAYSd,COUNT (e.g. 365d,100000), or keep-all")
        }
        guard (0.1...60).contains(rolloutCheckInterval) else {
            throw ValidationError("--rollout-check-interval must be a number of seconds from 0.1 to 60")
        }
        guard Logger.Level(rawValue: logLevel) != nil else {
            throw ValidationError("--log-level must be one of trace, debug, info, notice, warning, error, critical")
        }
        guard (tlsCertificate == nil) == (tlsKey == nil) else { throw ValidationError("--tls-certificate and --tls-key go together") }
        guard clientCa == nil || tlsCertificate != nil else { throw ValidationError("--client-ca needs --tls-certificate and --tls-key") }
        guard Self.address(listen) != nil else { throw ValidationError("--listen must be HOST:PORT, e.g. 0.0.0.0:8443 or [::]:8443") }
        for (name, value) in [
            ("--device-rate", deviceRate), ("--device-burst", deviceBurst), ("--address-rate", addressRate),
            ("--address-burst", addressBurst),
        ]
        where !(value >= 1 && value.isFinite) {
            throw ValidationError("\(name) must be a number of requests, 1 or more")
        }
        guard deviceWriteRate > 0 && deviceWriteRate.isFinite && deviceWriteBurst >= 1 && deviceWriteBurst.isFinite else {
            throw ValidationError("--device-write-rate must be above 0 (e.g. 0.2: one write in 5 s) and --device-write-burst 1 or more")
        }
        if let maxLongPolls, maxLongPolls < 1 { throw ValidationError("--max-long-polls must be 1 or more") }
        if !(0...3600).contains(busyPollInterval) { throw ValidationError("--busy-poll-interval must be 0 to 3600 seconds") }
        if let databasePool, !(2...1000).contains(databasePool) {
            throw ValidationError("--database-pool must be a number of connections from 2 to 1000")
        }
        if PostgresLocation.isPostgresURL(database) {
            do {
                _ = try PostgresLocation(url: database)
            } catch {
                throw ValidationError("--database: \(error)")
            }
            try DatabasePassword.refuseInURL(database, option: "--database")
        } else if databasePool != nil {
            throw ValidationError("--database-pool applies to a PostgreSQL database (postgres://…)")
        }
    }

    func run() async throws {
        umask(0o077)  // the database holds x-secret values and token hashes: owner-only files
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let style: LogfmtLogHandler.Style = SystemdNotifier.standardErrorIsJournal() ? .journald : .timestamped
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: level, style: style) }
        let systemd = SystemdNotifier.fromEnvironment()
        let logger = Logger(label: "fleetset-server")
        do {
            let admin = try AdminTokenFile.loadOrCreate(adminTokenFile)
            logger.notice(
                admin.created ? "admin token created" : "admin token loaded",
                metadata: ["event": "admin-token", "file": "\(adminTokenFile)"])
            if admin.weak {
                logger.warning(
                    "admin token is short",
                    metadata: [
                        "event": "admin-token-weak", "file": "\(adminTokenFile)",
                        "advice":
                            "use \(AdminTokenFile.recommendedLength) characters or more (delete the file to have a fresh one made): the rate limits slow guessing, the token's length is what stops it",
                    ])
            }
            let files = OpenFileLimit.raiseToHard()
            let capacity = maxLongPolls ?? files.map { OpenFileLimit.longPollCapacity(openFiles: $0.current) } ?? 1000
            logger.notice(
                "open files",
                metadata: [
                    "event": "open-files", "soft": "\(files.map { "\($0.current)" } ?? "unknown")",
                    "was": "\(files.map { "\($0.previous)" } ?? "unknown")", "hard": "\(files.map { "\($0.hard)" } ?? "unknown")",
                    "max_long_polls": "\(capacity)",
                ])
            let registry = PrometheusCollectorRegistry()
            let metrics = ServerMetrics(factory: PrometheusMetricsFactory.fleetset(registry: registry))
            let onTransaction: @Sendable (String, Duration) -> Void = { metrics.storeTransaction($0, took: $1) }
            let running = Running(
                adminTokenHash: admin.tokenHash, capacity: capacity, registry: registry, metrics: metrics, logger: logger, systemd: systemd)
            if PostgresLocation.isPostgresURL(database) {
                var location = try DatabasePassword.location(url: database, passwordFile: databasePasswordFile)
                if let databasePool { location.poolSize = databasePool }
                try await PostgresStore.with(location, logger: logger, onTransaction: onTransaction) { store in
                    for finding in try await store.privileges().findings {
                        logger.warning(
                            "database privileges",
                            metadata: ["event": "database-privileges", "finding": "\(finding)", "check": "fleetset-server check-database"])
                    }
                    if location.isPlainOverNetwork {
                        logger.warning(
                            "database connection not encrypted",
                            metadata: [
                                "event": "database-tls", "database": "\(location.redacted)",
                                "advice":
                                    "add sslmode=verify-full (and sslrootcert=PATH) to the URL: the password and every secret cross the network in the clear",
                            ])
                    }
                    try await serve(store: store, shared: store, databaseName: location.redacted, running)
                }
            } else {
                let store = try SQLiteStore(path: database, onTransaction: onTransaction)
                try await serve(store: store, shared: nil, databaseName: database, running)
            }
            _ = systemd?.send(.stopping)
            logger.notice("stopped", metadata: ["event": "stopped"])
        } catch {
            logger.critical("cannot start", metadata: ["event": "fatal", "error": "\(PostgresStore.describe(error))"])
            throw ExitCode(1)
        }
    }

    /// What ``run()`` made before it opened the store.
    struct Running {
        let adminTokenHash: String
        let capacity: Int
        let registry: PrometheusCollectorRegistry
        let metrics: ServerMetrics
        let logger: Logger
        let systemd: SystemdNotifier?
    }

    /// Serves on `store` until SIGTERM or SIGINT. With `shared` (PostgreSQL), writes take the
    /// lock of every instance on the database, and the changes the others make reach this
    /// instance's long-polls and caches.
    private func serve(store: any SettingsStore, shared: PostgresStore?, databaseName: String, _ running: Running) async throws {
        let (logger, metrics) = (running.logger, running.metrics)
        // Nine tenths held: new long-polls are told when to come back instead (0 turns it off).
        let busyLimit = busyPollInterval > 0 ? max(1, running.capacity - running.capacity / 10) : .max
        let notifier = ChangeNotifier(capacity: running.capacity, busyLimit: busyLimit, onHeldCountChange: { metrics.longPollsHeld($0) })
        let busyInterval = Duration.seconds(busyPollInterval)
        let service = FleetServices(
            store: store, adminTokenHash: running.adminTokenHash, wallClock: SystemWallClock(),
            busyPollDelay: { DeviceGateway.busyPollDelay(busyInterval, fraction: .random(in: 0..<1)) }, notifier: notifier,
            metrics: metrics, writeLock: shared?.writeLock, passwordParameters: PasswordHash.Parameters(cost: passwordCost), logger: logger)
        if passwordCost < 15 {
            logger.warning(
                "password hashes are cheap",
                metadata: [
                    "event": "password-cost", "cost": "\(passwordCost)",
                    "advice": "use --password-cost 15 or more (the default, 17, is OWASP's minimum for scrypt); lower is for tests",
                ])
        }
        // A store without accounts (new, or from a release before them) gets the bootstrap
        // owner, whom the admin token file acts as.
        try await service.accounts.bootstrap()
        guard let (host, port) = Self.address(listen) else { throw ExitCode(2) }
        let tls = tlsCertificate.flatMap { certificate in tlsKey.map { (certificateFile: certificate, keyFile: $0) } }
        let systemd = running.systemd
        let app = try FleetServerApplication.make(
            service: service,
            options: ServerOptions(
                host: host, port: port, tls: tls, clientCAFile: clientCa,
                limits: RequestLimits.Configuration(
                    perAddress: .init(rate: addressRate, burst: addressBurst), perDevice: .init(rate: deviceRate, burst: deviceBurst),
                    perDeviceWrite: .init(rate: deviceWriteRate, burst: deviceWriteBurst),
                    trustedProxies: Set(trustedProxy)),
                metrics: running.registry, console: console,
                rolloutCheckInterval: .milliseconds(Int64((rolloutCheckInterval * 1000).rounded())),
                historyRetention: HistoryRetention(historyKeep) ?? .standard, singleSignOn: try sso.singleSignOn(),
                webhooks: ServerOptions.WebhookDelivery(
                    policy: DestinationPolicy(allowPrivate: webhooksAllowPrivate), lookInterval: .seconds(webhooksLookInterval),
                    silentAfter: Int64(silentAfter)),
                gauges: gaugeRecording),
            logger: logger,
            onServerRunning: { port in
                logger.notice(
                    "listening",
                    metadata: [
                        "event": "listening", "address": "\(host.contains(":") ? "[\(host)]" : host):\(port)",
                        "scheme": "\(tls == nil ? "http" : "https")", "database": "\(databaseName)",
                        "client_certificates": "\(clientCa == nil ? "not required" : "required")",
                        "console": "\(console ? "/console/" : "off")",
                    ])
                _ = systemd?.send(.ready, .status("listening on port \(port)"))
            })
        guard let shared else {
            try await app.runService()
            return
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                await shared.followChanges(
                    onListening: {
                        logger.notice("following the other instances' changes", metadata: ["event": "change-feed", "state": "listening"])
                    }
                ) { change in
                    await notifier.changedElsewhere(change)
                    service.events.publish(ServiceEvent(change))
                }
            }
            defer { group.cancelAll() }
            try await app.runService()
        }
    }

    /// The fleet's gauges as `--gauge-interval` and `--silent-after` say; `nil`: not recorded.
    var gaugeRecording: GaugeRecording? {
        guard gaugeInterval > 0 else { return nil }
        return GaugeRecording(interval: .milliseconds(Int64((gaugeInterval * 1000).rounded())), silentAfter: Int64(silentAfter))
    }

    /// `127.0.0.1:8443` → ("127.0.0.1", 8443); `[::]:8443` → ("::", 8443).
    static func address(_ text: String) -> (String, Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a fleet from one store to another (SQLite to PostgreSQL, to scale out).",
        discussion: """
            Copies everything: metadata, values at every scope, devices with their token hashes, \
            enrollment tokens (hashes), revisions, status reports, the history of writes and the rollouts, \
            accounts, API tokens (hashes), the audit trail with its hashes, and webhook subscriptions with their messages. The destination must be empty \
            (its schema is made if missing). The copy is one transaction; afterwards the destination \
            is read back and compared with the source, count by count and row by row, and the \
            command fails if they differ. Stop the server on the source first: writes made during \
            the copy are not in it.
            """)

    @Option(help: "The source: sqlite:PATH (an existing file) or postgres://…")
    var from: String

    @Option(help: "The destination: postgres://… or sqlite:PATH")
    var to: String

    @Option(help: "A file whose first line is the PostgreSQL password (PGPASSWORD works too; a password in a URL is refused).")
    var databasePasswordFile: String?

    func validate() throws {
        for (name, value) in [("--from", from), ("--to", to)] {
            guard value.hasPrefix("sqlite:") || PostgresLocation.isPostgresURL(value) else {
                throw ValidationError("\(name) must be sqlite:PATH or postgres://USER@HOST/DATABASE")
            }
            try DatabasePassword.refuseInURL(value, option: name)
        }
        if from.hasPrefix("sqlite:"), access(String(from.dropFirst("sqlite:".count)), F_OK) != 0 {
            throw ValidationError("--from: no SQLite database at \(from.dropFirst("sqlite:".count))")
        }
    }

    func run() async throws {
        umask(0o077)  // a SQLite destination holds every secret and token hash: owner-only files, as serve makes
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: .warning, style: .timestamped) }
        let logger = Logger(label: "fleetset-server migrate")
        do {
            let source = try await withStore(from, logger: logger) { store in try await store.snapshot() }
            let copied = try await withStore(to, logger: logger) { store in
                try await store.restore(source)
                return try await store.snapshot()
            }
            print("copied from \(Self.shown(from)) to \(Self.shown(to)):")
            for ((what, count), (_, copiedCount)) in zip(source.counts, copied.counts) {
                print("  \(what): \(count) → \(copiedCount)\(count == copiedCount ? "" : "  MISMATCH")")
            }
            guard source.sorted() == copied.sorted() else {
                print("the destination does not hold what the source holds; do not use it")
                throw ExitCode(1)
            }
            print("the destination holds exactly what the source holds")
        } catch let error as ExitCode {
            throw error
        } catch {
            print("fleetset-server migrate: \(PostgresStore.describe(error))")
            throw ExitCode(1)
        }
    }

    private func withStore<T: Sendable>(_ text: String, logger: Logger, _ body: (any SettingsStore) async throws -> T) async throws
        -> T
    {
        try await openStore(text, passwordFile: databasePasswordFile, logger: logger, body)
    }

    /// The store's name without a password.
    private static func shown(_ text: String) -> String {
        PostgresLocation.isPostgresURL(text) ? ((try? PostgresLocation(url: text).redacted) ?? "the PostgreSQL database") : text
    }
}

struct CheckDatabase: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-database",
        abstract: "Check that no other role of the PostgreSQL cluster may use fleetset's database.",
        discussion: """
            A new PostgreSQL database lets every role CONNECT and create TEMPORARY tables (PUBLIC has \
            both). A role that may connect can send notifications on fleetset's channel and see and \
            take its advisory locks. Exits 1 with each finding and the statements that fix them, 0 \
            when there is none. serve logs the same findings at start (event=database-privileges).
            """)

    @Option(help: "The PostgreSQL database: postgres://USER@HOST[:PORT]/DATABASE[?…] (no password: see serve --help).")
    var database: String

    @Option(help: "A file whose first line is the PostgreSQL password (PGPASSWORD works too).")
    var databasePasswordFile: String?

    func validate() throws {
        guard PostgresLocation.isPostgresURL(database) else { throw ValidationError("--database must be postgres://USER@HOST/DATABASE") }
        try DatabasePassword.refuseInURL(database, option: "--database")
    }

    func run() async throws {
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: .error, style: .timestamped) }
        let logger = Logger(label: "fleetset-server check-database")
        let location = try DatabasePassword.location(url: database, passwordFile: databasePasswordFile)
        let (findings, fix): ([String], String)
        do {
            (findings, fix) = try await PostgresStore.privileges(at: location, logger: logger)
        } catch {
            print("fleetset-server check-database: \(PostgresStore.describe(error))")
            throw ExitCode(1)
        }
        if location.isPlainOverNetwork {
            print("note: \(location.redacted) is reached over the network without TLS; add sslmode=verify-full")
        }
        guard !findings.isEmpty else {
            print("\(location.redacted): no privileges of PUBLIC on the database")
            return
        }
        for finding in findings { print("finding: \(finding)") }
        print("fix (as the database's owner or a superuser): \(fix)")
        throw ExitCode(1)
    }
}

/// `body` with the store `text` names: `sqlite:PATH` or `postgres://…` (the password from
/// `passwordFile` or PGPASSWORD).
func openStore<T: Sendable>(
    _ text: String, passwordFile: String?, logger: Logger, _ body: (any SettingsStore) async throws -> T
) async throws -> T {
    if PostgresLocation.isPostgresURL(text) {
        let location = try DatabasePassword.location(url: text, passwordFile: passwordFile)
        return try await PostgresStore.with(location, logger: logger) { store in try await body(store) }
    }
    return try await body(try SQLiteStore(path: String(text.dropFirst(text.hasPrefix("sqlite:") ? "sqlite:".count : 0))))
}

/// Where the server-side commands find the store: the same `--database` as `serve`.
struct StoreOptions: ParsableArguments {
    @Option(help: "The SQLite database file, or postgres://USER@HOST[:PORT]/DATABASE[?…] (as serve takes it).")
    var database: String

    @Option(help: "A file whose first line is the PostgreSQL password (PGPASSWORD works too).")
    var databasePasswordFile: String?

    func validate() throws {
        try DatabasePassword.refuseInURL(database, option: "--database")
        if !PostgresLocation.isPostgresURL(database), access(database, F_OK) != 0 {
            throw ValidationError("--database: no SQLite database at \(database)")
        }
    }

    func withStore<T: Sendable>(_ name: String, _ body: (any SettingsStore) async throws -> T) async throws -> T {
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: .warning, style: .timestamped) }
        do {
            return try await openStore(database, passwordFile: databasePasswordFile, logger: Logger(label: "fleetset-server \(name)"), body)
        } catch let error as ExitCode {
            throw error
        } catch {
            print("fleetset-server \(name): \(PostgresStore.describe(error))")
            throw ExitCode(2)
        }
    }
}

/// `fleetset-server audit verify`.
struct Audit: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The audit trail, read from the database directly.", subcommands: [Verify.self])

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Walk the audit trail's hash chain and name the first entry that was changed, removed or reordered.",
            discussion: """
                Exits 0 when every entry follows the one before it (printing how many and the newest \
                hash), 1 naming the first that does not. The server logs each entry's hash \
                (event=audit hash=…): give the last one logged with --head to find a trail that was \
                rewritten from some entry on, or cut short.
                """)

        @OptionGroup var store: StoreOptions

        @Option(help: "The hash the trail must end at (the last event=audit hash=… the log shows).")
        var head: String?

        func run() async throws {
            let outcome: Result<AuditChain.Position, AuditChain.Break> = try await store.withStore("audit verify") { store in
                do {
                    return .success(try await AuditTrail.verify(store))
                } catch let broken as AuditChain.Break {
                    return .failure(broken)
                }
            }
            switch outcome {
            case .failure(let broken):
                print("the audit trail does not hold: \(broken)")
                throw ExitCode(1)
            case .success(let position):
                if let head, head != position.hash {
                    print(
                        "the audit trail's \(position.sequence) entries follow each other, but it ends at \(position.hash), not \(head): it was rewritten or cut short"
                    )
                    throw ExitCode(1)
                }
                print("the audit trail holds: \(position.sequence) entries, the newest hash \(position.hash)")
            }
        }
    }
}

/// `fleetset-server accounts restore-owner`.
struct Accounts: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Accounts, from the server machine.", subcommands: [RestoreOwner.self])

    struct RestoreOwner: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "restore-owner",
            abstract: "Make the bootstrap account 'owner' an enabled owner again (when no owner can sign in).",
            discussion: """
                Run it on the server machine as the server's user (it reads the database directly): \
                the account named owner, whom the admin token file acts as, becomes an enabled owner \
                of the whole fleet, made if it was removed. Sign in with the admin token file and \
                set things right; the change is in the audit trail.
                """)

        @OptionGroup var store: StoreOptions

        func run() async throws {
            let restored = try await store.withStore("accounts restore-owner") { store in
                // On PostgreSQL, in turn with the running instances' writes (the audit trail's next
                // entry follows theirs).
                let services = FleetServices(
                    store: store, adminTokenHash: "", wallClock: SystemWallClock(), writeLock: (store as? PostgresStore)?.writeLock,
                    logger: Logger(label: "fleetset-server"))
                let account = try await services.accounts.restoreOwner()
                let entry = try await services.audit.record(
                    AuditDraft(
                        actor: account.name, credential: "server machine", address: "-", action: "restoreOwner",
                        target: "name=\(account.name)", status: 200, outcome: "ok"))
                return (account, entry)
            }
            print("account \(restored.0.name) is an enabled owner; the admin token file signs in as it")
            print("audit entry \(restored.1.sequence), hash \(restored.1.hash)")
        }
    }
}
