import ArgumentParser
import FleetIO
import FleetLogging
import FleetServer
import FleetServerCore
import FleetStoreSQLite
import FleetVersion
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
        subcommands: [Serve.self],
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

    @Option(help: "The SQLite database file (created, with its -wal and -shm files, if missing).")
    var database: String

    @Option(help: "Where to listen, HOST:PORT (port 0: any free port; the log names it).")
    var listen: String = "127.0.0.1:8443"

    @Option(help: "PEM certificate chain: serve HTTPS (HTTP/2 and HTTP/1.1) with it.")
    var tlsCertificate: String?

    @Option(help: "PEM private key of --tls-certificate.")
    var tlsKey: String?

    @Option(help: "PEM CA bundle: require client certificates signed by it (mutual TLS; with --tls-certificate).")
    var clientCa: String?

    @Option(help: "The admin token file; created with a fresh token (mode 0600) if missing.")
    var adminTokenFile: String = "admin-token"

    @Option(help: "The lowest level logged: trace, debug, info, notice, warning, error, critical.")
    var logLevel: String = "info"

    @Option(help: "Requests per second one device may send, sustained (beyond: 429 with Retry-After).")
    var deviceRate: Double = 10

    @Option(help: "Requests one device may send at once.")
    var deviceBurst: Double = 50

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

    func validate() throws {
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
        if let maxLongPolls, maxLongPolls < 1 { throw ValidationError("--max-long-polls must be 1 or more") }
    }

    func run() async throws {
        umask(0o077)  // the database holds x-secret values and token hashes: owner-only files
        let level = Logger.Level(rawValue: logLevel) ?? .info
        let style: LogfmtLogHandler.Style = SystemdNotifier.standardErrorIsJournal() ? .journald : .timestamped
        LoggingSystem.bootstrap { _ in LogfmtLogHandler(level: level, style: style) }
        let systemd = SystemdNotifier.fromEnvironment()
        let logger = Logger(label: "fleetset-server")
        guard let (host, port) = Self.address(listen) else { throw ExitCode(2) }
        do {
            let admin = try AdminTokenFile.loadOrCreate(adminTokenFile)
            logger.notice(
                admin.created ? "admin token created" : "admin token loaded",
                metadata: ["event": "admin-token", "file": "\(adminTokenFile)"])
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
            let store = try SQLiteStore(path: database, onTransaction: { metrics.storeTransaction($0, took: $1) })
            let service = SettingsService(
                store: store, adminTokenHash: admin.tokenHash, wallClock: SystemWallClock(),
                notifier: ChangeNotifier(capacity: capacity, onHeldCountChange: { metrics.longPollsHeld($0) }), metrics: metrics,
                logger: logger)
            let tls = tlsCertificate.flatMap { certificate in tlsKey.map { (certificateFile: certificate, keyFile: $0) } }
            let app = try FleetServerApplication.make(
                service: service,
                options: ServerOptions(
                    host: host, port: port, tls: tls, clientCAFile: clientCa,
                    limits: RequestLimits.Configuration(
                        perAddress: .init(rate: addressRate, burst: addressBurst), perDevice: .init(rate: deviceRate, burst: deviceBurst),
                        trustedProxies: Set(trustedProxy)),
                    metrics: registry),
                logger: logger,
                onServerRunning: { port in
                    logger.notice(
                        "listening",
                        metadata: [
                            "event": "listening", "address": "\(host.contains(":") ? "[\(host)]" : host):\(port)",
                            "scheme": "\(tls == nil ? "http" : "https")", "database": "\(database)",
                            "client_certificates": "\(clientCa == nil ? "not required" : "required")",
                        ])
                    _ = systemd?.send(.ready, .status("listening on port \(port)"))
                })
            try await app.runService()
            _ = systemd?.send(.stopping)
            logger.notice("stopped", metadata: ["event": "stopped"])
        } catch {
            logger.critical("cannot start", metadata: ["event": "fatal", "error": "\(error)"])
            throw ExitCode(1)
        }
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
