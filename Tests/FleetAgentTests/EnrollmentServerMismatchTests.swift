import Curl
import FleetDeviceFiles
import FleetDeviceState
import FleetLogging
import FleetTestSupport
import Foundation
import Logging
import PosixThreads
import Testing

@testable import FleetAgent

/// The rule behind `HostileInputAgentTests.serverChanged`, as values: an `identity.json` made by
/// another server than the configured one is never handed to the loops, so its token is never
/// sent anywhere, and no enrollment is tried in its place. Shown in milliseconds, on a clock
/// whose time stands still, instead of by watching a proxy for a while.
@Suite("Enrollment: an identity of another server is never used")
struct EnrollmentServerMismatchTests {
    /// A clock whose time stands still: each sleep is recorded and lasts until its task is
    /// cancelled, so a test sees every delay the code asks for without waiting for one.
    final class StillClock: Clock, Sendable {
        struct Instant: InstantProtocol {
            var offset: Duration

            func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
            func duration(to other: Instant) -> Duration { other.offset - offset }
            static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
        }

        private let recorded = Locked<[Duration]>([])

        var now: Instant { Instant(offset: .zero) }
        var minimumResolution: Duration { .zero }
        /// The delay of each sleep asked for so far, in order.
        var sleeps: [Duration] { recorded.withLock { $0 } }

        func sleep(until deadline: Instant, tolerance: Duration?) async throws {
            recorded.withLock { $0.append(deadline.offset) }
            // Only cancellation ends it: the hour is a bound against a test that forgot to cancel.
            try await Task.sleep(for: .seconds(3600))
        }
    }

    /// Runs `identity()` with `identity.json` made by `enrolledWith`, an enrollment token on
    /// disk and `configured` as the server, until it returns or first sleeps; then cancels it.
    /// Returns what it returned, the delays it asked for, the `event=` of each line it logged,
    /// and whether it began an enrollment (its request file, made before the first attempt).
    static func identity(enrolledWith: String, configured: String) async throws -> (
        identity: DeviceIdentity?, sleeps: [Duration], events: [String], requestMade: Bool
    ) {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // Nothing listens on port 1: an enrollment tried by mistake fails at once, and is logged.
        let configuration = AgentConfiguration(
            server: configured, apps: [], enrollmentTokenFile: directory + "/enrollment-token", stateDirectory: directory + "/state",
            inboxDirectory: directory + "/inbox", allowInsecureHTTP: true)
        try FileManager.default.createDirectory(atPath: configuration.stateDirectory, withIntermediateDirectories: true)
        try CLIRunner.write("fse_test-enrollment-token\n", to: URL(fileURLWithPath: configuration.enrollmentTokenFile))
        let saved = DeviceIdentity(deviceId: "d-1", deviceToken: "fsd_secret", server: enrolledWith, enrolledAt: 1_795_000_000)
        try saved.save(to: configuration.layout.identityFile)

        let lines = Locked<[String]>([])
        let logger = Logger(label: "enrollment") { _ in
            LogfmtLogHandler(level: .trace) { line in lines.withLock { $0.append(line) } }
        }
        let http = try HTTPClient(configuration: Agent.httpConfiguration(configuration))
        let clock = StillClock()
        let enrollment = Enrollment(
            configuration: configuration, http: http, clock: clock, wallClock: { 1_795_000_000 },
            makeRandom: { SystemRandomNumberGenerator() }, logger: logger)
        let returned = Locked(false)
        let running = Task {
            defer { returned.withLock { $0 = true } }
            return await enrollment.identity()
        }
        try await Waiting.until(timeout: .seconds(30), "identity() neither returned nor slept; it logged:\n\(lines.withLock { $0 })") {
            returned.withLock { $0 } || !clock.sleeps.isEmpty
        }
        running.cancel()
        let identity = await running.value
        await http.shutdown()
        let events = lines.withLock { $0 }.compactMap { line in
            line.split(separator: " ").first { $0.hasPrefix("event=") }.map { String($0.dropFirst("event=".count)) }
        }
        let requestMade = FileManager.default.fileExists(atPath: configuration.layout.enrollmentRequestFile)
        return (identity, clock.sleeps, events, requestMade)
    }

    @Test("an identity of another server: reported, never returned, no enrollment tried; the report waits 5 minutes to repeat")
    func anotherServer() async throws {
        let found = try await Self.identity(enrolledWith: "http://127.0.0.1:2/", configured: "http://127.0.0.1:1")
        #expect(found.identity == nil, "the loops would send its token to the configured server")
        #expect(found.events == ["server-mismatch"])
        #expect(found.sleeps == [Enrollment.mismatchReportInterval])
        #expect(!found.requestMade, "an enrollment was begun in its place")
    }

    @Test("the identity of the configured server, trailing slashes aside, is returned at once, with no request")
    func sameServer() async throws {
        let found = try await Self.identity(enrolledWith: "http://127.0.0.1:1/", configured: "http://127.0.0.1:1")
        #expect(found.identity?.deviceToken == "fsd_secret")
        #expect(found.events.isEmpty && found.sleeps.isEmpty && !found.requestMade)
    }

    @Test("belongs(to:) compares the whole URL but for trailing slashes: scheme, host and port count")
    func belongs() {
        let identity = DeviceIdentity(deviceId: "d-1", deviceToken: "fsd_secret", server: "https://fleet.example.com/", enrolledAt: 0)
        #expect(identity.belongs(to: "https://fleet.example.com"))
        #expect(identity.belongs(to: "https://fleet.example.com//"))
        for other in [
            "http://fleet.example.com", "https://fleet.example.com:8443", "https://fleet.example.org", "https://fleet.example.com/v2",
        ] {
            #expect(!identity.belongs(to: other), "\(other)")
        }
    }
}
