import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import HummingbirdTLS
import Logging
import NIOCore
import NIOSSL

/// The real HTTPS servers the client tests talk to, on 127.0.0.1 with random ports, started once
/// per test process:
///
/// - `https`: HTTP/2 and HTTP/1.1 (ALPN) with the test CA's server certificate;
/// - `mutualTLS`: HTTP/1.1 over TLS that requires a client certificate from the test CA;
/// - `plainHTTP`: HTTP/1.1 without TLS, for the `allowInsecureHTTP` cases.
///
/// All three serve the same routes (see ``TestRoutes``).
struct TestServers: Sendable {
    let pki: TestPKI
    let https: Int
    let mutualTLS: Int
    let plainHTTP: Int
    let signals: TestSignals

    var httpsBase: String { "https://127.0.0.1:\(https)" }
    var mutualTLSBase: String { "https://127.0.0.1:\(mutualTLS)" }
    var plainHTTPBase: String { "http://127.0.0.1:\(plainHTTP)" }

    /// The servers, started on first use.
    static var shared: TestServers {
        get async throws { try await started.value }
    }

    private static let started = Task { try await TestServers.start() }

    private static func start() async throws -> TestServers {
        let pki = try TestPKI.make()
        let signals = TestSignals()
        let routes = try TestRoutes(signals: signals)
        let certificates = try NIOSSLCertificate.fromPEMFile(pki.serverCertificateFile).map { NIOSSLCertificateSource.certificate($0) }
        let key = NIOSSLPrivateKeySource.privateKey(try NIOSSLPrivateKey(file: pki.serverKeyFile, format: .pem))
        let serverTLS = TLSConfiguration.makeServerConfiguration(certificateChain: certificates, privateKey: key)
        var mutualTLS = serverTLS
        mutualTLS.certificateVerification = .noHostnameVerification
        mutualTLS.trustRoots = .file(pki.caFile)

        async let https = launch(routes.router(), server: try .http2Upgrade(tlsConfiguration: serverTLS))
        async let mutual = launch(routes.router(), server: try .tls(.http1(), tlsConfiguration: mutualTLS))
        async let plain = launch(routes.router(), server: .http1())
        return TestServers(pki: pki, https: try await https, mutualTLS: try await mutual, plainHTTP: try await plain, signals: signals)
    }

    /// Runs an application for the rest of the process and returns its port once it listens.
    private static func launch(_ router: Router<BasicRequestContext>, server: HTTPServerBuilder) async throws -> Int {
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "test-server")
        logger.logLevel = .critical
        let app = Application(
            router: router, server: server,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            },
            logger: logger)
        Task.detached { try await app.run() }
        for await port in ports where port > 0 { return port }
        throw TestServerFailed()
    }
}

struct TestServerFailed: Error {}

/// Lets a test learn that a request reached the server, and lets requests wait for each other,
/// so no test depends on a sleep being long enough.
actor TestSignals {
    private var arrived: Set<String> = []
    /// When each tagged request arrived.
    private(set) var arrivals: [String: ContinuousClock.Instant] = [:]
    private var arrivalWaiters: [String: [CheckedContinuation<Void, Never>]] = [:]
    private var barriers: [String: [CheckedContinuation<Void, Never>]] = [:]
    /// How many requests of each counter have come.
    private(set) var counts: [String: Int] = [:]

    /// Counts one more request of `counter`; returns its number, from 1.
    func count(_ counter: String) -> Int {
        counts[counter, default: 0] += 1
        return counts[counter]!
    }

    /// Records that the request tagged `id` has arrived.
    func arrive(_ id: String) {
        arrived.insert(id)
        arrivals[id] = arrivals[id] ?? .now
        for waiter in arrivalWaiters.removeValue(forKey: id) ?? [] { waiter.resume() }
    }

    /// Whether the request tagged `id` has arrived.
    func hasArrived(_ id: String) -> Bool { arrived.contains(id) }

    /// Returns once the request tagged `id` has arrived.
    func waitForArrival(of id: String) async {
        if arrived.contains(id) { return }
        await withCheckedContinuation { arrivalWaiters[id, default: []].append($0) }
    }

    /// Holds the caller until `count` callers of `group` are waiting, then releases them all.
    func meet(_ group: String, count: Int) async {
        await withCheckedContinuation { continuation in
            barriers[group, default: []].append(continuation)
            if barriers[group]!.count >= count {
                for waiter in barriers.removeValue(forKey: group)! { waiter.resume() }
            }
        }
    }
}
