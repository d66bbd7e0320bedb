import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Who is calling: the admin and device tokens, rotation and last-seen times, in process.
@Suite("Services: authentication")
struct AuthenticatorServiceTests {
    @Test("the admin token file acts as the bootstrap owner, made at its first use on a store without accounts")
    func admin() async throws {
        let harness = ServiceHarness()
        #expect(try await harness.store.accounts().isEmpty)
        let principal = try await harness.auth.authenticate(authorization: "Bearer " + ServiceHarness.adminToken)
        guard case .account(let caller) = principal else {
            Issue.record("not an account: \(principal)")
            return
        }
        #expect(caller.name == Authenticator.bootstrapOwner && caller.role == .owner && caller.credential == .adminTokenFile)
        #expect(try await harness.store.accounts().map(\.name) == [Authenticator.bootstrapOwner])
        // Never from memory alone: a disabled owner is refused on every instance at once.
        #expect(try harness.auth.knownPrincipal(authorization: "Bearer " + ServiceHarness.adminToken) == nil)
        #expect(harness.auth.isAdminToken(ServiceHarness.adminToken) && !harness.auth.isAdminToken("fsa_other"))
    }

    @Test(
        "a missing, malformed or unknown bearer token is 401 unauthenticated",
        arguments: [nil, "", "Basic abc", "Bearer", "Bearer two words", "Bearer fsd_unknown-token"])
    func refused(header: String?) async throws {
        let harness = ServiceHarness()
        let error = await serviceError { try await harness.auth.authenticate(authorization: header) }
        #expect(error?.status == .unauthorized && error?.code == .unauthenticated)
    }

    @Test(
        "the bearer token of an Authorization header: the scheme in any case, spaces around, one token of at most 512 bytes",
        arguments: [
            ("Bearer abc", "abc"), ("bearer   abc  ", "abc"), ("BEARER x", "x"), ("Bearer a b", nil), ("Token abc", nil),
            ("Bearer " + String(repeating: "t", count: 512), String(repeating: "t", count: 512)),
            ("Bearer " + String(repeating: "t", count: 513), nil),
        ] as [(String, String?)])
    func bearerToken(header: String, token: String?) {
        #expect(Authenticator.bearerToken(header) == token)
    }

    @Test("a device's token is that device, with its apps and groups")
    func device() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, token) = try await harness.enroll(groups: ["lobby"])
        #expect(try await harness.device(token: token) == device)
        #expect(device.apps == ["kiosk"] && device.groups == ["lobby"])
    }

    @Test("a disabled device is refused with 401 device-disabled; enabled again, it is let in")
    func disabled() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, token) = try await harness.enroll()
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(disabled: true))
        let error = await serviceError { try await harness.auth.authenticate(authorization: "Bearer " + token) }
        #expect(error?.code == .deviceDisabled)
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(disabled: false))
        #expect(try await harness.device(token: token).id == device.id)
    }

    @Test("device routes refuse the admin (403 device-only), and an app the device was not given is 404 like any unknown app")
    func requireDevice() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        let owner = try await harness.owner()
        #expect(throws: ServiceError.self) { try Authenticator.requireDevice(.account(owner)) }
        do {
            _ = try Authenticator.requireDevice(.device(device), app: "signage")
            Issue.record("an app the device was not given was let through")
        } catch {
            #expect(error.code == .unknownApp && error.status == .notFound)
        }
        #expect(try Authenticator.requireDevice(.device(device), app: "kiosk") == device)
    }

    @Test("admin routes refuse a device with 403 admin-only")
    func requireAccount() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        do {
            _ = try Authenticator.requireAccount(.device(device))
            Issue.record("a device passed as an account")
        } catch {
            #expect(error.code == .adminOnly && error.status == .forbidden)
        }
        let owner = try await harness.owner()
        #expect(try Authenticator.requireAccount(.account(owner)) == owner)
    }

    @Test("a rotated token: the old one works until the new one is first used, then only the new one")
    func rotation() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, old) = try await harness.enroll()
        let rotation = try await harness.gateway.rotateToken(device: device)
        #expect(try await harness.device(token: old).id == device.id)
        #expect(try await harness.device(token: rotation.deviceToken).id == device.id)
        let error = await serviceError { try await harness.auth.authenticate(authorization: "Bearer " + old) }
        #expect(error?.code == .unauthenticated)
    }

    @Test("a request records when the device was seen, at most once a minute")
    func lastSeen() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, token) = try await harness.enroll()
        let enrolledAt = harness.wallClock.secondsSinceEpoch()
        #expect(try await harness.store.device(id: device.id)?.lastSeenAt == enrolledAt)
        harness.wallClock.advance(by: Authenticator.lastSeenResolution - 1)
        _ = try await harness.device(token: token)
        #expect(try await harness.store.device(id: device.id)?.lastSeenAt == enrolledAt)
        harness.wallClock.advance(by: 2)
        _ = try await harness.device(token: token)
        #expect(try await harness.store.device(id: device.id)?.lastSeenAt == enrolledAt + Authenticator.lastSeenResolution + 1)
    }
}
