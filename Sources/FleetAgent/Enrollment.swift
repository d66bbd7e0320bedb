import Curl
import FleetAgentCore
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetProtocol
import Logging
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// The device's identity: read from `identity.json`, or made once by enrolling with the token
/// in `enrollmentTokenFile` and saved (mode 0600). The enrollment token is not needed again.
///
/// Enrollment is idempotent: the request id in `enrollment-request.json` is made before the
/// first attempt and sent with every retry, so an answer lost on the way (a stop, a full disk,
/// a dropped connection) gives the same device again, not "token used up". An identity made by
/// another server than the configured one is never used: its token is not sent to a server that
/// did not issue it.
struct Enrollment: Sendable {
    let configuration: AgentConfiguration
    let http: HTTPClient
    let clock: any Clock<Duration>
    let wallClock: @Sendable () -> Int64
    let makeRandom: @Sendable () -> any RandomNumberGenerator
    let logger: Logger

    /// How often an identity of another server is reported while the agent waits for its
    /// owner to act.
    static let mismatchReportInterval: Duration = .seconds(300)

    /// The identity, enrolling first when there is none; retries with backoff until it has one.
    /// `nil` only when the task is cancelled.
    func identity() async -> DeviceIdentity? {
        let layout = configuration.layout
        var backoff = RetryBackoff(base: .seconds(2), cap: .seconds(300))
        var random = makeRandom()
        while !Task.isCancelled {
            var retryAfter: Duration?
            do {
                if let identity = try DeviceIdentity.load(layout.identityFile) {
                    if identity.belongs(to: configuration.server) { return identity }
                    logger.critical(
                        "identity.json was made by another server than the configured one; its token is never sent elsewhere",
                        metadata: [
                            "event": "server-mismatch", "enrolled_with": "\(identity.server)", "configured": "\(configuration.server)",
                            "fix":
                                "set server back to \(identity.server) in the configuration, or to move the device: remove \(layout.identityFile), put an enrollment token of the new server in \(configuration.enrollmentTokenFile), and restart fleetsetd",
                        ])
                    try? await clock.sleep(for: Self.mismatchReportInterval)
                    continue
                }
                guard let token = try readEnrollmentToken() else {
                    logger.error(
                        "not enrolled: no identity and no enrollment token",
                        metadata: [
                            "event": "enroll-failed", "identity": "\(layout.identityFile)",
                            "token_file": "\(configuration.enrollmentTokenFile)",
                        ])
                    try? await clock.sleep(for: backoff.delayAfterFailure(using: &random))
                    continue
                }
                let request = try EnrollmentRequestFile.loadOrMake(
                    layout.enrollmentRequestFile, server: configuration.server, random: { random.next() })
                let response = try await FleetClient(http: http, baseURL: configuration.server, token: nil)
                    .enroll(enrollmentToken: token, requestId: request.requestId)
                let identity = DeviceIdentity(
                    deviceId: response.deviceId, deviceToken: response.deviceToken, server: configuration.server, enrolledAt: wallClock())
                try identity.save(to: layout.identityFile)
                try? FileSystem.removeFile(layout.enrollmentRequestFile)
                logger.notice(
                    "enrolled",
                    metadata: [
                        "event": "enrolled", "device": "\(identity.deviceId)", "server": "\(configuration.server)",
                        "apps": "\(response.apps.joined(separator: ","))", "groups": "\(response.groups.joined(separator: ","))",
                    ])
                let missing = configuration.apps.map(\.id).filter { !response.apps.contains($0) }
                if !missing.isEmpty {
                    logger.error(
                        "the enrollment token does not give this device every configured app; the server answers those as unknown",
                        metadata: ["event": "apps-not-granted", "apps": "\(missing.joined(separator: ","))"])
                }
                return identity
            } catch is CancellationError {
                return nil
            } catch let error as FleetClientError {
                retryAfter = error.retryAfter
                logger.error("enrollment refused", metadata: ["event": "enroll-failed", "error": "\(error)"])
            } catch {
                logger.warning("cannot enroll", metadata: ["event": "enroll-failed", "error": "\(error)"])
            }
            try? await clock.sleep(for: backoff.delayAfterFailure(retryAfter: retryAfter, using: &random))
        }
        return nil
    }

    /// The enrollment token, `nil` when the file is missing or empty.
    private func readEnrollmentToken() throws(FileError) -> String? {
        do {
            let token = try FileSystem.readToken(configuration.enrollmentTokenFile)
            return token.isEmpty ? nil : token
        } catch  where error.code == ENOENT {
            return nil
        }
    }
}

/// The device's credentials while the agent runs: the identity every loop sends requests with,
/// and the rotation of its token when the admin asks for it.
///
/// A rotation saves the new token in `identity.json` before any loop uses it; the server keeps
/// the old token working until the new one is first used, so a stop or a lost answer at any
/// point leaves a token that works. Only one rotation runs at a time.
final class DeviceCredentials: Sendable {
    private struct State {
        var identity: DeviceIdentity
        var rotating = false
    }

    private let state: Locked<State>
    private let identityFile: String
    private let logger: Logger

    init(_ identity: DeviceIdentity, identityFile: String, logger: Logger) {
        state = Locked(State(identity: identity))
        self.identityFile = identityFile
        self.logger = logger
    }

    /// The identity requests are sent with now.
    var identity: DeviceIdentity { state.withLock { $0.identity } }

    /// A client for `http` with the current token.
    func client(http: HTTPClient, server: String) -> FleetClient {
        FleetClient(http: http, baseURL: server, token: identity.deviceToken)
    }

    /// Fetches a new token, saves it, and uses it from then on. Does nothing when another loop is
    /// rotating already.
    ///
    /// The request is sent with the *current* token, never a loop's older one: when several apps'
    /// loops see the admin's request, the second one's rotation then first promotes the token
    /// the first one saved, so the token on disk always works.
    ///
    /// - Throws: why the rotation failed (logged here); the current token keeps working, and the
    ///   loop backs off before it tries again.
    func rotate(http: HTTPClient, server: String) async throws {
        let current: DeviceIdentity? = state.withLock { state in
            guard !state.rotating else { return nil }
            state.rotating = true
            return state.identity
        }
        guard let current else { return }
        defer { state.withLock { $0.rotating = false } }
        do {
            let rotation = try await FleetClient(http: http, baseURL: server, token: current.deviceToken).rotateToken()
            var identity = current
            identity.deviceToken = rotation.deviceToken
            try identity.save(to: identityFile)
            state.withLock { $0.identity = identity }
            logger.notice("device token rotated", metadata: ["event": "token-rotated", "device": "\(identity.deviceId)"])
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            logger.error(
                "cannot rotate the device token; the current one keeps working",
                metadata: ["event": "token-rotation-failed", "error": "\(error)"])
            throw error
        }
    }
}
