import Curl
import FleetClient
import FleetJSON
import FleetLogging
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import Hummingbird
import Logging
import NIOCore
import PosixThreads
import Prometheus
import ServiceLifecycle

/// A wall clock the test sets.
final class TestWallClock: WallClock {
    private let seconds: Locked<Int64>

    /// A clock at `start` (a fixed day by default; a test whose messages a receiver checks
    /// against its own clock starts at the real time).
    init(start: Int64 = 1_795_000_000) { seconds = Locked(start) }

    func secondsSinceEpoch() -> Int64 { seconds.withLock { $0 } }

    func advance(by delta: Int64) { seconds.withLock { $0 += delta } }
}

/// Log lines the server wrote, captured.
final class CapturedLog: Sendable {
    private let lines = Locked<[String]>([])

    func append(_ line: String) { lines.withLock { $0.append(line) } }

    var all: [String] { lines.withLock { $0 } }

    /// The lines with `event=<name>`.
    func events(_ name: String) -> [String] { all.filter { $0.contains(" event=\(name) ") || $0.hasSuffix(" event=\(name)\n") } }
}

/// The real server on 127.0.0.1 (a free port), with a fresh SQLite database in a temporary
/// directory or a fresh PostgreSQL database, and fleetset's libcurl client to talk to it.
struct TestFleetServer: Sendable {
    static let adminToken = "fsa_test-admin-token-0123456789"
    let port: Int
    let directory: String
    let clock: TestWallClock
    let log: CapturedLog
    let http: HTTPClient
    let store: any SettingsStore
    let notifier: ChangeNotifier
    /// The service behind the routes (for what a test checks without HTTP).
    let service: FleetServices
    /// The kind (`read` or `write`) of every store call that ran, in order.
    let storeCalls: CapturedLog
    /// Stops the server as SIGTERM does (it stops listening, answers what it holds, and ends);
    /// returns when it has ended.
    let stopGracefully: @Sendable () async -> Void

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Runs `body` against a fresh server on a fresh database of `store`'s kind and stops it
    /// afterwards. On PostgreSQL, the server's writes take the cross-instance write lock.
    static func with<T: Sendable>(
        store kind: StoreKind = .sqlite, host: String = "127.0.0.1", readTimeout: TimeAmount = .seconds(30),
        limits: RequestLimits.Configuration = .init(), maxLongPolls: Int = .max, busyLimit: Int = .max,
        waitSpread: @escaping @Sendable (Duration) -> Duration = { $0 }, _ body: (TestFleetServer) async throws -> T
    ) async throws -> T {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let storeCalls = CapturedLog()
        let onTransaction: @Sendable (String, Duration) -> Void = { kind, _ in storeCalls.append(kind) }
        switch kind {
        case .sqlite:
            let store = try SQLiteStore(path: directory + "/fleet.sqlite", onTransaction: onTransaction)
            return try await with(
                store: store, writeLock: nil, storeCalls: storeCalls, directory: directory, host: host, readTimeout: readTimeout,
                limits: limits,
                maxLongPolls: maxLongPolls, busyLimit: busyLimit, waitSpread: waitSpread, body)
        case .postgres:
            let url = try await PostgresCluster.shared().makeDatabase()
            return try await PostgresStore.with(try PostgresLocation(url: url), logger: quietLogger, onTransaction: onTransaction) {
                store in
                try await with(
                    store: store, writeLock: store.writeLock, storeCalls: storeCalls, directory: directory, host: host,
                    readTimeout: readTimeout,
                    limits: limits, maxLongPolls: maxLongPolls, busyLimit: busyLimit, waitSpread: waitSpread, body)
            }
        }
    }

    /// Runs `body` against two server instances on one new PostgreSQL database, each following
    /// the other's changes as `fleetset-server serve` does (it starts once both listen).
    static func withTwoInstances<T: Sendable>(_ body: (TestFleetServer, TestFleetServer) async throws -> T) async throws -> T {
        let url = try await PostgresCluster.shared().makeDatabase()
        let location = try PostgresLocation(url: url)
        return try await PostgresStore.with(location, logger: quietLogger) { first in
            try await PostgresStore.with(location, logger: quietLogger) { second in
                try await withFollowing(first) { a in try await withFollowing(second) { b in try await body(a, b) } }
            }
        }
    }

    /// A server on `store` that follows the other instances' changes while `body` runs.
    private static func withFollowing<T: Sendable>(_ store: PostgresStore, _ body: (TestFleetServer) async throws -> T) async throws -> T {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        return try await with(
            store: store, writeLock: store.writeLock, storeCalls: CapturedLog(), directory: directory, readTimeout: .seconds(30),
            limits: .init(), maxLongPolls: .max, busyLimit: .max, waitSpread: { $0 }
        ) { server in
            let (listening, listeningContinuation) = AsyncStream<Void>.makeStream()
            let following = Task {
                await store.followChanges(onListening: { listeningContinuation.yield() }) { change in
                    await server.notifier.changedElsewhere(change)
                }
            }
            defer { following.cancel() }
            for await _ in listening { break }
            return try await body(server)
        }
    }

    /// A logger that drops everything (postgres-nio's background messages).
    static let quietLogger = Logger(label: "quiet") { _ in SwiftLogNoOpLogHandler() }

    /// Runs `body` against a server on `store`, which reports its calls to `storeCalls`.
    static func with<T: Sendable>(
        store: any SettingsStore, writeLock: (any SharedWriteLock)?, storeCalls: CapturedLog, directory: String,
        host: String = "127.0.0.1", readTimeout: TimeAmount,
        limits: RequestLimits.Configuration, maxLongPolls: Int, busyLimit: Int, waitSpread: @escaping @Sendable (Duration) -> Duration,
        _ body: (TestFleetServer) async throws -> T
    ) async throws -> T {
        let clock = TestWallClock()
        let log = CapturedLog()
        var logger = Logger(label: "test-server") { _ in LogfmtLogHandler(level: .info, sink: { log.append($0) }) }
        logger.logLevel = .info
        let registry = PrometheusCollectorRegistry()
        let metrics = ServerMetrics(factory: PrometheusMetricsFactory.fleetset(registry: registry))
        let notifier = ChangeNotifier(capacity: maxLongPolls, busyLimit: busyLimit, onHeldCountChange: { metrics.longPollsHeld($0) })
        let service = FleetServices(
            store: store, adminTokenHash: Credentials.hash(adminToken), wallClock: clock, waitSpread: waitSpread, notifier: notifier,
            // Cheap password hashes: a debug build's scrypt at N = 2^17 takes seconds.
            metrics: metrics, writeLock: writeLock, passwordParameters: PasswordHash.Parameters(cost: 10), logger: logger)
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = try FleetServerApplication.make(
            service: service,
            // Rollouts move on when a test calls `superviseRollouts()`, not on a timer.
            options: ServerOptions(
                host: host, port: 0, readTimeout: readTimeout, limits: limits, metrics: registry,
                rolloutCheckInterval: .seconds(86_400)),
            logger: logger,
            onServerRunning: { port in
                portContinuation.yield(port)
                portContinuation.finish()
            })
        // In a service group, as `serve` runs it, so that a test can stop it gracefully.
        let group = ServiceGroup(configuration: .init(services: [app], logger: TestFleetServer.quietLogger))
        let running = Task { try await group.run() }
        defer { running.cancel() }
        var bound = 0
        for await port in ports { bound = port }
        guard bound > 0 else { throw TestServerFailed() }
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        let server = TestFleetServer(
            port: bound, directory: directory, clock: clock, log: log, http: http, store: store, notifier: notifier, service: service,
            storeCalls: storeCalls,
            stopGracefully: {
                await group.triggerGracefulShutdown()
                _ = await running.result
            })
        do {
            let result = try await body(server)
            await http.shutdown()
            return result
        } catch {
            await http.shutdown()
            throw error
        }
    }

    /// Whether any file the database keeps holds `text`: SQLite's database and write-ahead log,
    /// or (after a CHECKPOINT, which writes every committed row to its table's files) the files
    /// of this test's PostgreSQL database. Read on a thread of its own: the files are many
    /// megabytes, and the concurrency pool's few threads serve the other tests' servers.
    func databaseFilesContain(_ text: String) async throws -> Bool {
        var folder = directory
        if let postgres = store as? PostgresStore {
            let cluster = try await PostgresCluster.shared()
            try await cluster.psql("CHECKPOINT")
            let oid = try await postgres.databaseOID()
            folder = cluster.folder + "/data/base/\(oid)"
        }
        let needle = Data(text.utf8)
        let searched = folder
        return await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                let files = FileManager.default.enumerator(atPath: searched)
                while let name = files?.nextObject() as? String {
                    if let data = FileManager.default.contents(atPath: searched + "/" + name), data.range(of: needle) != nil {
                        continuation.resume(returning: true)
                        return
                    }
                }
                continuation.resume(returning: false)
            }
        }
    }

    /// How many long-polls wait on `app`.
    func waiters(app: String) async -> Int { await notifier.waiterCount(of: app) }

    /// Returns once at least `count` long-polls wait on `app`. After `timeout` the test fails,
    /// saying how many long-polls it awaited and how many there were: a long-poll that never
    /// starts waiting (its request refused, say) ends the test instead of hanging it. The
    /// timeout bounds a failing test only, however loaded the machine; it measures no speed.
    func waitForWaiters(app: String, count: Int = 1, timeout: Duration = .seconds(30)) async throws {
        var waiting = 0
        try await Waiting.until(
            timeout: timeout, "never saw \(count) long-poll(s) of \(app) waiting on the server: \(waiting) waited after \(timeout)"
        ) {
            waiting = await waiters(app: app)
            return waiting >= count
        }
    }

    /// A client with the admin token.
    var admin: FleetClient { FleetClient(http: http, baseURL: baseURL, token: Self.adminToken) }

    /// A client with `token`.
    func client(token: String?) -> FleetClient { FleetClient(http: http, baseURL: baseURL, token: token) }

    /// Enrolls a device for `apps` into `groups`; returns its id, its token and a client with the token.
    func enrollDevice(apps: [String] = ["kiosk"], groups: [String] = []) async throws -> (id: String, token: String, client: FleetClient) {
        let token = try await admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: apps, groups: groups))
        let identity = try await client(token: nil).enroll(enrollmentToken: token.enrollmentToken, requestId: newRequestID())
        return (identity.deviceId, identity.deviceToken, client(token: identity.deviceToken))
    }

    /// Stores `TestMetadata.kiosk(version:)` for app `kiosk`.
    @discardableResult
    func putKioskMetadata(version: Int = 1, force: Bool = false) async throws -> MetadataPutResult {
        try await admin.putMetadata(app: "kiosk", document: Array(TestMetadata.kiosk(version: version).utf8), force: force)
    }

    /// A raw request, for what the typed client never sends (bad headers, wrong media types).
    func raw(
        _ method: HTTPClient.Method, _ path: String, token: String? = nil, headers: HTTPClient.Headers = [:], body: String? = nil
    ) async throws -> HTTPClient.Response {
        var request = HTTPClient.Request(method: method, url: baseURL + path, headers: headers, body: body.map { Array($0.utf8) })
        if let token { request.headers["Authorization"] = "Bearer " + token }
        return try await http.execute(request)
    }
}

struct TestServerFailed: Error {}

extension RequestLimits.Configuration {
    /// Limits no test run reaches: for tests of something else that send many bad requests (the
    /// OpenAPI contract's fuzzing).
    static let unreachable = RequestLimits.Configuration(
        perAddress: .init(rate: 1e6, burst: 1e6), failures: .init(rate: 1e6, burst: 1e6), perDevice: .init(rate: 1e6, burst: 1e6),
        perDeviceWrite: .init(rate: 1e6, burst: 1e6))
}

/// A fresh enrollment request id.
func newRequestID() -> String { "req-" + UUID().uuidString }

/// Test metadata documents.
enum TestMetadata {
    /// `kiosk`: `volume` 0–10 (writable, default 5), `title` (default "Welcome"), `pin`
    /// (secret, four digits), `night` (writable boolean). Version 3 and later cap volume at 8.
    static func kiosk(version: Int) -> String {
        let maximum = version >= 3 ? 8 : 10
        return """
            {"app": "kiosk", "version": \(version), "schema": {"type": "object", "additionalProperties": false, "properties": {
              "volume": {"type": "integer", "minimum": 0, "maximum": \(maximum), "default": 5, "x-writable": true},
              "title": {"type": "string", "default": "Welcome"},
              "pin": {"type": "string", "pattern": "^[0-9]{4}$", "default": "0000", "x-secret": true},
              "night": {"type": "boolean", "default": false, "x-writable": true}}}}
            """
    }
}

func temporaryDirectory() throws -> String {
    var template = Array((NSTemporaryDirectory() + "fleetset-server-test-XXXXXX").utf8CString)
    guard let path = mkdtemp(&template) else { throw TestServerFailed() }
    return String(cString: path)
}

/// The error a refused call threw, or `nil` when it did not throw one.
func refusal(_ operation: () async throws -> some Any) async -> FleetClientError? {
    do {
        _ = try await operation()
        return nil
    } catch let error as FleetClientError {
        return error
    } catch {
        return nil
    }
}
