import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Enrollment and enrollment tokens, in process.
@Suite("Services: enrollment")
struct EnrollmentServiceTests {
    private func token(_ harness: ServiceHarness, uses: Int64 = 1, expires: Int64 = 3_600) async throws -> EnrollmentTokenResponse {
        try await harness.directory.makeEnrollmentToken(
            EnrollmentTokenRequest(apps: ["kiosk"], groups: ["lobby"], expiresInSeconds: expires, uses: uses))
    }

    @Test("a token enrolls a device into its apps and groups")
    func enrolls() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness)
        let identity = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-1"))
        #expect(identity.apps == ["kiosk"] && identity.groups == ["lobby"] && identity.deviceToken.hasPrefix("fsd_"))
        #expect(try await harness.store.device(id: identity.deviceId) != nil)
    }

    @Test("an unknown token is 401 invalid-enrollment-token and makes no device")
    func unknown() async throws {
        let harness = ServiceHarness()
        let error = await serviceError {
            try await harness.gateway.enroll(EnrollRequest(enrollmentToken: "fse_unknown", requestId: "r-1"))
        }
        #expect(error?.code == .invalidEnrollmentToken && error?.message.contains("not one this server issued") == true)
        #expect(try await harness.store.devices().isEmpty)
    }

    @Test("an expired token is refused, saying so")
    func expired() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness, expires: 60)
        harness.wallClock.advance(by: 61)
        let error = await serviceError {
            try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-1"))
        }
        #expect(error?.code == .invalidEnrollmentToken && error?.message.contains("expired") == true)
    }

    @Test("a token's uses are spent: the next device is refused")
    func usedUp() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness, uses: 2)
        for request in ["r-1", "r-2"] {
            _ = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: request))
        }
        let error = await serviceError {
            try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-3"))
        }
        #expect(error?.code == .invalidEnrollmentToken && error?.message.contains("used as often") == true)
        #expect(try await harness.store.devices().count == 2)
    }

    @Test("a retry with the same request id is the same device with a new token; the first token stops working")
    func retry() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness)
        let first = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-1"))
        harness.wallClock.advance(by: 5)
        let again = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-1"))
        #expect(again.deviceId == first.deviceId && again.deviceToken != first.deviceToken)
        #expect(try await harness.device(token: again.deviceToken).id == first.deviceId)
        let error = await serviceError { try await harness.auth.authenticate(authorization: "Bearer " + first.deviceToken) }
        #expect(error?.code == .unauthenticated)
    }

    @Test("an older agent's enrollment without a request id is an enrollment of its own each time")
    func withoutRequestID() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness, uses: 2)
        let first = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: nil))
        let second = try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: nil))
        #expect(first.deviceId != second.deviceId)
    }

    @Test(
        "a token request is held to the wire's rules however it was made",
        arguments: [
            EnrollmentTokenRequest(apps: []), EnrollmentTokenRequest(apps: ["kiosk"], uses: 0),
            EnrollmentTokenRequest(apps: ["kiosk"], expiresInSeconds: 10), EnrollmentTokenRequest(apps: ["kiosk"], groups: ["bad\u{7}"]),
            EnrollmentTokenRequest(apps: ["Not An App"]),
        ])
    func badTokenRequest(request: EnrollmentTokenRequest) async throws {
        let harness = ServiceHarness()
        let error = await serviceError { try await harness.directory.makeEnrollmentToken(request) }
        #expect(error?.status == .badRequest)
        #expect(try await harness.directory.enrollmentTokens().tokens.isEmpty)
    }

    @Test("tokens are listed by id and revoked; a revoked token enrolls nobody; revoking an unknown one is 404")
    func revoke() async throws {
        let harness = ServiceHarness()
        let token = try await token(harness)
        #expect(try await harness.directory.enrollmentTokens().tokens.map(\.id) == [token.id])
        try await harness.directory.revokeEnrollmentToken(id: token.id)
        #expect(try await harness.directory.enrollmentTokens().tokens.isEmpty)
        let refused = await serviceError {
            try await harness.gateway.enroll(EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "r-1"))
        }
        #expect(refused?.code == .invalidEnrollmentToken)
        let unknown = await serviceError { try await harness.directory.revokeEnrollmentToken(id: token.id) }
        #expect(unknown?.status == .notFound)
    }
}
