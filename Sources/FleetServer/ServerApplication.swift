import FleetConsole
import FleetServerCore
import FleetWebhooks
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL
import Prometheus
import ServiceLifecycle

/// How `fleetset-server` listens.
public struct ServerOptions: Sendable {
    /// The address to bind: `127.0.0.1`, `0.0.0.0`, `::`.
    public var host: String
    /// The port; 0 picks a free one (reported to `onServerRunning`).
    public var port: Int
    /// PEM files of the certificate chain and its private key: the server speaks HTTPS (HTTP/2
    /// and HTTP/1.1 by ALPN) itself, TLS 1.2 or newer only. `nil`: plain HTTP, for loopback or
    /// behind a TLS proxy.
    public var tls: (certificateFile: String, keyFile: String)?
    /// A PEM file of the CAs whose client certificates the server requires (mutual TLS): a
    /// client without a certificate they signed cannot even connect. Only with `tls`.
    public var clientCAFile: String?

    /// How long a client has to send a whole request (see `SlowClientGuard`).
    public var readTimeout: TimeAmount
    /// Request rates beyond which clients are answered 429 (see ``RequestLimits``).
    public var limits: RequestLimits.Configuration
    /// The registry the service's metrics go to, served at `GET /metrics` to the admin; `nil`:
    /// no such route.
    public var metrics: PrometheusCollectorRegistry?
    /// Whether the admin console is served under `/console/`.
    public var console: Bool
    /// How often running rollouts are looked at (see `RolloutSupervisor`).
    public var rolloutCheckInterval: Duration
    /// How much of each app's history is kept (see ``HistoryRetention``), applied at start and
    /// then every ``historyPruneInterval``.
    public var historyRetention: HistoryRetention
    public var historyPruneInterval: Duration
    /// Sign-in through the organization's OpenID Provider, when configured.
    public var singleSignOn: SingleSignOn?
    /// How webhook messages are sent; `nil`: not by this server (test servers that do not
    /// test webhooks; `fleetset-server serve` always sends them).
    public var webhooks: WebhookDelivery?

    /// How an instance sends the outbox's messages (see ``WebhookDispatcher``).
    public struct WebhookDelivery: Sendable {
        /// Which receivers may be called (`--webhooks-allow-private`).
        public var policy: DestinationPolicy
        /// When a failed message is tried again, and for how long.
        public var schedule: DeliverySchedule
        /// How often the outbox is looked at for what other instances queued.
        public var lookInterval: Duration
        /// How long without a request makes a device silent (`devices.silent`), in seconds.
        public var silentAfter: Int64

        public init(
            policy: DestinationPolicy = DestinationPolicy(), schedule: DeliverySchedule = .standard, lookInterval: Duration = .seconds(5),
            silentAfter: Int64 = 3600
        ) {
            self.policy = policy
            self.schedule = schedule
            self.lookInterval = lookInterval
            self.silentAfter = silentAfter
        }
    }

    /// The fleet's gauges (devices, silent devices, latest reports, rollouts per app: see
    /// ``FleetGaugeRecorder``), recorded while the server runs; `nil`: not recorded (`serve`
    /// records them every 30 s unless told; a test server reads no store for them).
    public var gauges: GaugeRecording?

    public init(
        host: String, port: Int, tls: (certificateFile: String, keyFile: String)? = nil, clientCAFile: String? = nil,
        readTimeout: TimeAmount = .seconds(30), limits: RequestLimits.Configuration = .init(), metrics: PrometheusCollectorRegistry? = nil,
        console: Bool = true, rolloutCheckInterval: Duration = .seconds(2), historyRetention: HistoryRetention = .standard,
        historyPruneInterval: Duration = .seconds(3600), singleSignOn: SingleSignOn? = nil, webhooks: WebhookDelivery? = nil,
        gauges: GaugeRecording? = nil
    ) {
        self.webhooks = webhooks
        self.singleSignOn = singleSignOn
        self.gauges = gauges
        self.historyRetention = historyRetention
        self.historyPruneInterval = historyPruneInterval
        self.host = host
        self.port = port
        self.tls = tls
        self.clientCAFile = clientCAFile
        self.readTimeout = readTimeout
        self.limits = limits
        self.metrics = metrics
        self.console = console
        self.rolloutCheckInterval = rolloutCheckInterval
    }
}

/// Builds the Hummingbird application that serves protocol v1.
public enum FleetServerApplication {
    /// Connections waiting to be accepted.
    public static let acceptBacklog = 4096

    /// The application, ready to `run()` (tests) or `runService()` (the binary: graceful
    /// shutdown on SIGTERM and SIGINT — listening stops, long-polls answer 304 at once, requests
    /// in flight finish).
    ///
    /// - Parameter onServerRunning: called with the bound port once the server listens.
    public static func make(
        service: FleetServices, options: ServerOptions, logger: Logger,
        onServerRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) throws -> some ApplicationProtocol {
        let connections = OpenConnections()
        let limits = RequestLimits(options.limits)
        let console =
            options.console
            ? ConsoleRoutes(
                service: service, limits: limits, logger: logger,
                tls: options.tls != nil, singleSignOn: options.singleSignOn) : nil
        let router = Routes(
            service: service, logger: logger, limits: limits, connections: connections, metrics: options.metrics, console: console,
            singleSignOn: options.singleSignOn
        ).router()
        let serverName = "fleetset-server"
        let readTimeout = options.readTimeout
        let server: HTTPServerBuilder
        if let tls = options.tls {
            let chain = try NIOSSLCertificate.fromPEMFile(tls.certificateFile).map { NIOSSLCertificateSource.certificate($0) }
            let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(file: tls.keyFile, format: .pem))
            var configuration = TLSConfiguration.makeServerConfiguration(certificateChain: chain, privateKey: key)
            configuration.minimumTLSVersion = .tlsv12
            if let clientCAFile = options.clientCAFile {
                // Devices are not host names: the chain is checked against the CAs, not a name.
                configuration.certificateVerification = .noHostnameVerification
                configuration.trustRoots = .file(clientCAFile)
            }
            // An HTTP/2 connection with no stream open for longer than the longest long-poll is idle.
            server = try .http2Upgrade(
                tlsConfiguration: configuration,
                configuration: .init(
                    idleTimeout: .seconds(DeviceGateway.maximumWait + 30),
                    streamConfiguration: .init(additionalChannelHandlers: [
                        SlowClientGuard(readTimeout: readTimeout, connections: connections)
                    ])))
        } else {
            // Plain HTTP/1.1 (loopback, or behind a TLS proxy, as a large fleet is served): no
            // task per connection, long-polls parked while they wait (see ParkingHTTP1Channel).
            let channel = ParkingHTTP1Channel(
                responder: router.buildResponder(),
                additionalChannelHandlers: { [SlowClientGuard(readTimeout: readTimeout, connections: connections)] },
                cancelWait: service.gateway.cancelLongPoll, workGate: service.context.workGate,
                answerHeaders: AnswerHeaders(serverName: serverName), logger: logger)
            server = HTTPServerBuilder { _ in channel }
        }
        var services: [any Service] = [
            RolloutSupervisor(service: service, interval: options.rolloutCheckInterval, logger: logger),
            HistoryPruner(service: service, retention: options.historyRetention, interval: options.historyPruneInterval, logger: logger),
        ]
        services.append(HeapTrimmer(gate: service.context.workGate, logger: logger))
        if let gauges = options.gauges { services.append(FleetGaugeRecorder(service: service, recording: gauges, logger: logger)) }
        if let webhooks = options.webhooks {
            services.append(
                WebhookDispatcher(
                    service: service, sender: try WebhookSender(policy: webhooks.policy), schedule: webhooks.schedule,
                    lookInterval: webhooks.lookInterval, logger: logger))
            services.append(WebhookDigester(service: service, silentAfter: webhooks.silentAfter, logger: logger))
        }
        // Last of ours, so stopped first after the server: it waits for the connections' answers.
        services.append(ConnectionDrain(connections: connections))
        return Application(
            router: router, server: server,
            // A fleet reconnecting after a restart arrives at once: a deep accept queue (the
            // kernel caps it at net.core.somaxconn) keeps their connections from being dropped
            // and retried a second later.
            configuration: ApplicationConfiguration(
                address: .hostname(options.host, port: options.port), serverName: serverName, backlog: Self.acceptBacklog),
            services: services,
            onServerRunning: { channel in await onServerRunning(channel.localAddress?.port ?? options.port) },
            logger: logger)
    }
}

extension PrometheusMetricsFactory {
    /// A factory for ``ServerMetrics`` into `registry`, with histogram buckets from 0.1 ms to
    /// 10 s (a store transaction takes well under a millisecond; the default buckets start at 5 ms).
    public static func fleetset(registry: PrometheusCollectorRegistry) -> PrometheusMetricsFactory {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2.5), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
            .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
        ]
        return factory
    }
}
