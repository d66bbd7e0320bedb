import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestWaiting
import HTTPTypes
import Logging
import PosixThreads
import Synchronization
import Testing

/// A clock that moves only when the test moves it: a wait on it ends when ``advance(by:)``
/// passes its deadline, so a long-poll's timeout is tested without waiting for it.
final class ManualClock: Clock, Sendable {
    struct Instant: InstantProtocol {
        var offset: Duration

        func advanced(by duration: Duration) -> Instant { Instant(offset: offset + duration) }
        func duration(to other: Instant) -> Duration { other.offset - offset }
        static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.offset < rhs.offset }
    }

    private struct Sleeper {
        let deadline: Duration
        let continuation: CheckedContinuation<Void, any Error>
    }

    private struct State {
        var now: Duration = .zero
        var sleepers: [Int: Sleeper] = [:]
        var next = 0
    }

    private let state = Mutex(State())

    var now: Instant { Instant(offset: state.withLock { $0.now }) }
    var minimumResolution: Duration { .zero }

    func sleep(until deadline: Instant, tolerance: Duration?) async throws {
        let id = state.withLock { state in
            state.next += 1
            return state.next
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let due = state.withLock { state in
                    guard deadline.offset > state.now, !Task.isCancelled else { return true }
                    state.sleepers[id] = Sleeper(deadline: deadline.offset, continuation: continuation)
                    return false
                }
                if due { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.sleepers.removeValue(forKey: id) }?.continuation.resume(throwing: CancellationError())
        }
        try Task.checkCancellation()
    }

    /// Moves the time on by `duration`, ending the sleeps it passes.
    func advance(by duration: Duration) {
        let due = state.withLock { state in
            state.now += duration
            let due = state.sleepers.filter { $0.value.deadline <= state.now }
            for id in due.keys { state.sleepers[id] = nil }
            return Array(due.values)
        }
        for sleeper in due { sleeper.continuation.resume() }
    }
}

/// A wall clock the test sets.
final class SetWallClock: WallClock {
    private let seconds = Locked<Int64>(1_795_000_000)

    func secondsSinceEpoch() -> Int64 { seconds.withLock { $0 } }

    func advance(by delta: Int64) { seconds.withLock { $0 += delta } }
}

/// The services over an in-memory store, a manual clock and a set wall clock: no socket, no
/// file, no wait. Long-polls are not spread and a busy server asks for 90 s.
struct ServiceHarness {
    static let adminToken = "fsa_service-test-admin-token-0123"

    let store = InMemoryStore()
    let clock = ManualClock()
    let wallClock = SetWallClock()
    let services: FleetServices

    init(capacity: Int = .max, busyLimit: Int = .max) {
        let clock = clock
        services = FleetServices(
            store: store, adminTokenHash: Credentials.hash(Self.adminToken), wallClock: wallClock, clock: ServiceClock(clock),
            waitSpread: { $0 }, busyPollDelay: { .seconds(90) },
            notifier: ChangeNotifier(capacity: capacity, busyLimit: busyLimit, clock: ServiceClock(clock)),
            passwordParameters: PasswordHash.Parameters(cost: 10), logger: Logger(label: "service-test") { _ in SwiftLogNoOpLogHandler() })
    }

    var auth: Authenticator { services.auth }
    var gateway: DeviceGateway { services.gateway }
    var admin: SettingsAdmin { services.admin }
    var rollouts: RolloutService { services.rollouts }
    var directory: FleetDirectory { services.directory }

    /// `kiosk`: `volume` 0–10 (writable, default 5), `title` (default "Welcome"), `pin`
    /// (secret, four digits), `night` (writable). Version 3 and later cap volume at 8.
    static func kiosk(version: Int) -> [UInt8] {
        let maximum = version >= 3 ? 8 : 10
        return Array(
            """
            {"app": "kiosk", "version": \(version), "schema": {"type": "object", "additionalProperties": false, "properties": {
              "volume": {"type": "integer", "minimum": 0, "maximum": \(maximum), "default": 5, "x-writable": true},
              "title": {"type": "string", "default": "Welcome"},
              "pin": {"type": "string", "pattern": "^[0-9]{4}$", "default": "0000", "x-secret": true},
              "night": {"type": "boolean", "default": false, "x-writable": true}}}}
            """.utf8)
    }

    /// Stores `kiosk` at `version`.
    @discardableResult
    func putKiosk(version: Int = 1, force: Bool = false) async throws -> MetadataPutResult {
        try await admin.putMetadata(app: "kiosk", document: Self.kiosk(version: version), force: force, actor: "test")
    }

    /// A new device of `apps` in `groups`, enrolled with a token of its own.
    func enroll(apps: [String] = ["kiosk"], groups: [String] = []) async throws -> (device: Device, token: String) {
        let token = try await directory.makeEnrollmentToken(EnrollmentTokenRequest(apps: apps, groups: groups))
        let identity = try await gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "request-\(token.id)"))
        return (try await device(token: identity.deviceToken), identity.deviceToken)
    }

    /// A harness with `kiosk` and two of its devices that reported their Debian versions: 12
    /// (bookworm) and 11 (bullseye).
    static func bookwormAndBullseye() async throws -> (ServiceHarness, bookworm: Device, bullseye: Device) {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (bookworm, _) = try await harness.enroll()
        let (bullseye, _) = try await harness.enroll()
        _ = try await harness.gateway.patchDeviceInfo(device: bookworm, patch: ["os": ["version": "12"]])
        _ = try await harness.gateway.patchDeviceInfo(device: bullseye, patch: ["os": ["version": "11"]])
        return (harness, bookworm, bullseye)
    }

    /// The bootstrap owner, as the admin token file authenticates it.
    func owner() async throws -> Caller {
        try await account(token: Self.adminToken)
    }

    /// The account a token authenticates.
    func account(token: String, from address: String = "192.0.2.1") async throws -> Caller {
        guard case .account(let caller) = try await auth.authenticate(authorization: "Bearer " + token, from: address) else {
            throw ServiceError(500, .internalError, "not an account")
        }
        return caller
    }

    /// The device a token authenticates.
    func device(token: String) async throws -> Device {
        guard case .device(let device) = try await auth.authenticate(authorization: "Bearer " + token) else {
            throw ServiceError(500, .internalError, "not a device")
        }
        return device
    }

    /// Writes `patch` at `scope` as the admin.
    @discardableResult
    func set(_ patch: JSONObject, at scope: Scope = .app, force: Bool = false) async throws -> ScopedValues {
        try await admin.patchValues(app: "kiosk", scope: scope, patch: patch, actor: "test", force: force)
    }

    /// Waits until `count` long-polls are held. After 30 s the test fails, saying how many it
    /// awaited and how many were held.
    func untilHeld(_ count: Int) async throws {
        var held = 0
        try await Waiting.until(timeout: .seconds(30), "never saw \(count) long-poll(s) held: \(held) after 30 s") {
            held = await services.context.notifier.heldCount
            return held == count
        }
    }
}

/// The error `body` throws, which must be a ``ServiceError``.
func serviceError(_ body: () async throws -> some Any) async -> ServiceError? {
    do {
        _ = try await body()
        return nil
    } catch let error as ServiceError {
        return error
    } catch {
        Issue.record("not a ServiceError: \(error)")
        return nil
    }
}
