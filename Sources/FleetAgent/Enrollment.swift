import Curl
import FleetAgentCore
import FleetClient
import FleetDeviceFiles
import FleetIO
import FleetProtocol
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// The device's identity: read from `identity.json`, or made once by enrolling with the token
/// in `enrollmentTokenFile` and saved (mode 0600). The enrollment token is not needed again.
struct Enrollment: Sendable {
    let configuration: AgentConfiguration
    let http: HTTPClient
    let clock: any Clock<Duration>
    let wallClock: @Sendable () -> Int64
    let logger: Logger

    /// The identity, enrolling first when there is none; retries with backoff until it has one.
    /// `nil` only when the task is cancelled.
    func identity() async -> DeviceIdentity? {
        let path = configuration.layout.identityFile
        var backoff = RetryBackoff(base: .seconds(2), cap: .seconds(300))
        var random = SystemRandomNumberGenerator()
        while !Task.isCancelled {
            var retryAfter: Duration?
            do {
                if let identity = try DeviceIdentity.load(path) { return identity }
                guard let token = try readEnrollmentToken() else {
                    logger.error(
                        "not enrolled: no identity and no enrollment token",
                        metadata: ["event": "enroll-failed", "identity": "\(path)", "token_file": "\(configuration.enrollmentTokenFile)"])
                    try? await clock.sleep(for: backoff.delayAfterFailure(using: &random))
                    continue
                }
                let response = try await FleetClient(http: http, baseURL: configuration.server, token: nil).enroll(enrollmentToken: token)
                let identity = DeviceIdentity(
                    deviceId: response.deviceId, deviceToken: response.deviceToken, server: configuration.server, enrolledAt: wallClock())
                try identity.save(to: path)
                logger.notice("enrolled", metadata: ["event": "enrolled", "device": "\(identity.deviceId)", "server": "\(configuration.server)"])
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
        } catch where error.code == ENOENT {
            return nil
        }
    }
}
