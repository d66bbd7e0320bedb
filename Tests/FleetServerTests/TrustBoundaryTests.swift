import Curl
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import NIOCore
import Testing

/// The attacks of issue 13 performed against the real server on 127.0.0.1: a device reaching for
/// apps it was not given, revoked devices and tokens, idempotent enrollment, amplification,
/// hostile patterns and numbers, and secrets at any depth.
@Suite("Trust boundaries over HTTP")
struct TrustBoundaryTests {
    /// `kiosk` (the test metadata) and `payments`, whose secrets a kiosk device must never see.
    static let payments = """
        {"app": "payments", "version": 1, "schema": {"type": "object", "properties": {
          "apiKey": {"type": "string", "default": "sk_live_payments", "x-secret": true},
          "volume": {"type": "integer", "default": 1, "x-writable": true}}}}
        """

    @Test(
        "a device reads, writes and reports only its own apps; another app answers exactly as one that does not exist",
        arguments: StoreKind.allCases)
    func confinedToItsApps(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            _ = try await server.admin.putMetadata(app: "payments", document: Array(Self.payments.utf8))
            let kioskDevice = try await server.enrollDevice(apps: ["kiosk"])
            #expect(try await kioskDevice.client.settings(app: "kiosk") != nil)

            // Every device route, for an app that exists but is not the device's, and for one that does not exist.
            let requests: [(HTTPClient.Method, String, [String: String], String?)] = [
                (.get, "/v1/apps/%@/settings", [:], nil),
                (.get, "/v1/apps/%@/settings?wait=1", ["If-None-Match": #""1""#], nil),
                (.get, "/v1/apps/%@/metadata", [:], nil),
                (.get, "/v1/apps/%@/explain", [:], nil),
                (.patch, "/v1/apps/%@/settings", ["Content-Type": "application/merge-patch+json", "If-Match": #""1""#], #"{"volume": 2}"#),
                (
                    .post, "/v1/apps/%@/status", ["Content-Type": "application/json"],
                    #"{"revision": 1, "schemaVersion": 1, "state": "error", "message": "x", "source": "agent"}"#
                ),
            ]
            for (method, template, headers, body) in requests {
                var answers: [String: (Int, String)] = [:]
                for app in ["payments", "nosuchapp"] {
                    let response = try await server.raw(
                        method, template.replacingOccurrences(of: "%@", with: app), token: kioskDevice.token,
                        headers: HTTPClient.Headers(headers.map { ($0.key, $0.value) }), body: body)
                    answers[app] = (
                        response.status, String(decoding: response.body, as: UTF8.self).replacingOccurrences(of: app, with: "APP")
                    )
                }
                #expect(answers["payments"]?.0 == 404, "\(method) \(template)")
                #expect(
                    answers["payments"]?.0 == answers["nosuchapp"]?.0 && answers["payments"]?.1 == answers["nosuchapp"]?.1,
                    "\(method) \(template)")
            }
            // Nothing of payments leaked, nothing was written or recorded for it.
            #expect(!server.log.all.joined().contains("sk_live_payments"))
            #expect(try await server.admin.devices(app: "payments").devices.isEmpty)
            #expect(try await server.admin.values(app: "payments", scope: "device:\(kioskDevice.id)").values.isEmpty)
            #expect(try await server.store.latestStatuses(app: "payments").isEmpty)

            // The admin gives the device payments: now it may; takes kiosk away: now it may not.
            _ = try await server.admin.updateDevice(id: kioskDevice.id, DeviceUpdate(apps: ["payments"]))
            #expect(try await kioskDevice.client.settings(app: "payments")?.values["apiKey"] == "sk_live_payments")
            let gone = await refusal { try await kioskDevice.client.settings(app: "kiosk") }
            #expect(gone?.status == 404 && gone?.code == .unknownApp)
        }
    }

    @Test("taking an app away answers the device's waiting long-poll for it at once with 404", arguments: StoreKind.allCases)
    func appTakenAwayWhileWaiting(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(apps: ["kiosk"])
            let current = try #require(try await device.client.settings(app: "kiosk"))
            let started = ContinuousClock.now
            async let waiting = refusal { try await device.client.settings(app: "kiosk", knownRevision: current.revision, wait: 60) }
            try await server.waitForWaiters(app: "kiosk")
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(apps: ["other"]))
            let answer = await waiting
            #expect(answer?.status == 404 && answer?.code == .unknownApp)
            #expect(ContinuousClock.now - started < .seconds(30))
        }
    }

    @Test(
        "a deleted or disabled device is refused at once, its waiting long-poll included (401); enabling brings it back",
        arguments: StoreKind.allCases)
    func revocation(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let doomed = try await server.enrollDevice()
            let paused = try await server.enrollDevice()
            for device in [doomed, paused] { _ = try await device.client.settings(app: "kiosk") }

            async let doomedWait = refusal { try await doomed.client.settings(app: "kiosk", knownRevision: 1, wait: 120) }
            async let pausedWait = refusal { try await paused.client.settings(app: "kiosk", knownRevision: 1, wait: 120) }
            try await server.waitForWaiters(app: "kiosk", count: 2)
            let started = ContinuousClock.now
            try await server.admin.deleteDevice(id: doomed.id)
            _ = try await server.admin.updateDevice(id: paused.id, DeviceUpdate(disabled: true))
            let (deleted, disabled) = await (doomedWait, pausedWait)
            #expect(deleted?.status == 401 && deleted?.code == .unauthenticated)
            #expect(disabled?.status == 401 && disabled?.code == .deviceDisabled)
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(await server.waiters(app: "kiosk") == 0)

            #expect(await refusal { try await doomed.client.settings(app: "kiosk") }?.status == 401)
            #expect(await refusal { try await paused.client.settings(app: "kiosk") }?.code == .deviceDisabled)
            let devices = try await server.admin.allDevices().devices
            #expect(devices.map(\.id) == [paused.id] && devices.first?.disabled == true)
            _ = try await server.admin.updateDevice(id: paused.id, DeviceUpdate(disabled: false))
            #expect(try await paused.client.settings(app: "kiosk") != nil)
            #expect(await refusal { try await server.admin.deleteDevice(id: doomed.id) }?.code == .unknownDevice)
            let delete = try await server.raw(.delete, "/v1/admin/devices/\(paused.id)", token: TestFleetServer.adminToken)
            #expect(delete.status == 204 && delete.body.isEmpty)
        }
    }

    @Test("a revoked enrollment token enrolls nobody; devices enrolled with it stay", arguments: StoreKind.allCases)
    func revokedEnrollmentToken(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let made = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], uses: 10))
            let anonymous = server.client(token: nil)
            let first = try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: newRequestID())
            let listed = try await server.admin.enrollmentTokens().tokens
            #expect(listed.map(\.id) == [made.id] && listed.first?.usesLeft == 9 && listed.first?.apps == ["kiosk"])
            try await server.admin.revokeEnrollmentToken(id: made.id)
            let refused = await refusal { try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: newRequestID()) }
            #expect(refused?.status == 401 && refused?.code == .invalidEnrollmentToken)
            #expect(try await server.admin.enrollmentTokens().tokens.isEmpty)
            #expect(try await server.client(token: first.deviceToken).settings(app: "kiosk") != nil)
            #expect(await refusal { try await server.admin.revokeEnrollmentToken(id: made.id) }?.code == .unknownEnrollmentToken)
            #expect(!server.log.all.joined().contains(made.enrollmentToken))
        }
    }

    @Test(
        "enrollment is idempotent: a retry with the same request id after a lost answer gets the same device, not 'used up'",
        arguments: StoreKind.allCases)
    func idempotentEnrollment(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let made = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], groups: ["lobby"], uses: 1))
            let anonymous = server.client(token: nil)
            let request = newRequestID()
            let lost = try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: request)  // the answer "never arrived"
            let retry = try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: request)
            #expect(retry.deviceId == lost.deviceId && retry.deviceToken != lost.deviceToken && retry.groups == ["lobby"])
            #expect(try await server.admin.allDevices().devices.map(\.id) == [lost.deviceId])
            #expect(await refusal { try await server.client(token: lost.deviceToken).settings(app: "kiosk") }?.status == 401)
            #expect(try await server.client(token: retry.deviceToken).settings(app: "kiosk") != nil)
            let other = await refusal { try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: newRequestID()) }
            #expect(other?.description.contains("used as often as it allows") == true)
        }
    }

    @Test(
        "an agent from before request ids enrolls (v1 keeps that form): each request is an enrollment of its own, using the token once",
        arguments: StoreKind.allCases)
    func enrollmentWithoutRequestID(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let made = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], uses: 2))
            let body = #"{"enrollmentToken": "\#(made.enrollmentToken)"}"#
            let json: HTTPClient.Headers = ["Content-Type": "application/json"]
            let first = try await server.raw(.post, "/v1/enroll", headers: json, body: body)
            let second = try await server.raw(.post, "/v1/enroll", headers: json, body: body)
            #expect(first.status == 201 && second.status == 201, "\(String(decoding: first.body, as: UTF8.self))")
            let ids = try [first, second].map { try EnrollResponse(json: JSONParser.parse($0.body)).deviceId }
            let enrolled = try await server.admin.allDevices().devices.map(\.id)
            #expect(Set(ids).count == 2 && Set(enrolled) == Set(ids))
            #expect(try await server.raw(.post, "/v1/enroll", headers: json, body: body).status == 401, "the token's two uses are spent")
        }
    }

    @Test("a rotated token: the old one works until the new one is used, then only the new one", arguments: StoreKind.allCases)
    func tokenRotation(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(rotateToken: true))
            let asked = try await server.raw(.get, "/v1/apps/kiosk/settings", token: device.token)
            #expect(asked.headers["Fleetset-Rotate-Token"] == "requested")
            let lost = try await device.client.rotateToken()  // its answer is lost
            let rotation = try await device.client.rotateToken()
            #expect(try await device.client.settings(app: "kiosk") != nil)  // the old one still works
            #expect(await refusal { try await server.client(token: lost.deviceToken).settings(app: "kiosk") }?.status == 401)
            let fresh = server.client(token: rotation.deviceToken)
            #expect(try await fresh.settings(app: "kiosk") != nil)
            #expect(await refusal { try await device.client.settings(app: "kiosk") }?.status == 401)
            let after = try await server.raw(.get, "/v1/apps/kiosk/settings", token: rotation.deviceToken)
            #expect(after.headers["Fleetset-Rotate-Token"] == nil)
            #expect(try await server.admin.device(id: device.id).tokenRotationRequested == false)
            #expect(!server.log.all.joined().contains(rotation.deviceToken))
        }
    }

    @Test(
        "the synchronous authentication knows only a current token of an enabled device seen lately; anything else goes the full way",
        arguments: StoreKind.allCases)
    func knownPrincipal(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let bearer = "Bearer \(device.token)"
            #expect(try server.service.auth.knownPrincipal(authorization: "Bearer \(TestFleetServer.adminToken)") == nil)
            _ = try await device.client.settings(app: "kiosk")  // seen now, and known
            guard case .device(let known) = try server.service.auth.knownPrincipal(authorization: bearer) else {
                Issue.record("a device that was just seen is not known")
                return
            }
            #expect(known.id == device.id)
            #expect(try server.service.auth.knownPrincipal(authorization: "Bearer fsd_unknown") == nil)
            #expect(throws: ServiceError.self) { try server.service.auth.knownPrincipal(authorization: "Basic abc") }

            // Last seen too long ago: the full way, which records the time; then known again.
            server.clock.advance(by: Authenticator.lastSeenResolution)
            #expect(try server.service.auth.knownPrincipal(authorization: bearer) == nil)
            _ = try await device.client.settings(app: "kiosk")
            #expect(try await server.admin.device(id: device.id).lastSeenAt == server.clock.secondsSinceEpoch())
            #expect(try server.service.auth.knownPrincipal(authorization: bearer) != nil)

            // A pending token (a rotation under way) is never known: its first use promotes it.
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(rotateToken: true))
            let rotation = try await device.client.rotateToken()
            #expect(try server.service.auth.knownPrincipal(authorization: "Bearer \(rotation.deviceToken)") == nil)
            let rotated = server.client(token: rotation.deviceToken)
            _ = try await rotated.settings(app: "kiosk")  // promotes it (and forgets the device)
            _ = try await rotated.settings(app: "kiosk")  // reads it again
            #expect(try server.service.auth.knownPrincipal(authorization: "Bearer \(rotation.deviceToken)") != nil)
            #expect(try server.service.auth.knownPrincipal(authorization: bearer) == nil)

            // A disabled device is not known (the full way refuses it).
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(disabled: true))
            #expect(try server.service.auth.knownPrincipal(authorization: "Bearer \(rotation.deviceToken)") == nil)
            #expect(await refusal { try await rotated.settings(app: "kiosk") }?.code == .deviceDisabled)
        }
    }

    @Test(
        "a device-scope write wakes only that device's long-poll; a group write only the group's; a newer long-poll replaces the older",
        arguments: StoreKind.allCases)
    func scopedWakeUps(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            var devices: [(id: String, token: String, client: FleetClient)] = []
            for index in 0..<6 { devices.append(try await server.enrollDevice(groups: index < 2 ? ["lobby"] : [])) }
            for device in devices { _ = try await device.client.settings(app: "kiosk") }
            let waits = devices.map { device in
                Task { try await device.client.settings(app: "kiosk", knownRevision: 1, wait: 120) }
            }
            try await server.waitForWaiters(app: "kiosk", count: 6)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(devices[5].id)", patch: ["volume": 7])
            #expect(await server.notifier.lastWakeCount == 1)
            #expect(try await waits[5].value?.values["volume"] == 7)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 2])
            #expect(await server.notifier.lastWakeCount == 2)
            #expect(try await waits[0].value?.values["volume"] == 2)
            #expect(try await waits[1].value?.values["volume"] == 2)
            #expect(await server.waiters(app: "kiosk") == 3)
            // A second long-poll of device 2 replaces its first, which is answered 304 (nil).
            let replacement = Task { try await devices[2].client.settings(app: "kiosk", knownRevision: 1, wait: 120) }
            #expect(try await waits[2].value == nil)
            #expect(await server.waiters(app: "kiosk") == 3)
            for wait in waits[3...4] { wait.cancel() }
            replacement.cancel()
        }
    }

    @Test("a client that disconnects ends its long-poll and its waiter goes away", arguments: StoreKind.allCases)
    func disconnectEndsLongPoll(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            _ = try await device.client.settings(app: "kiosk")
            let waiting = Task { try await device.client.settings(app: "kiosk", knownRevision: 1, wait: 300) }
            try await server.waitForWaiters(app: "kiosk")
            waiting.cancel()  // libcurl drops the connection
            let started = ContinuousClock.now
            while await server.waiters(app: "kiosk") > 0 {
                #expect(ContinuousClock.now - started < .seconds(30), "the waiter stayed after the client left")
                if ContinuousClock.now - started > .seconds(30) { break }
                try await Task.sleep(for: .milliseconds(10))
            }
        }
    }

    @Test("enrollment bodies are capped at 4 KiB", arguments: StoreKind.allCases)
    func enrollmentCap(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let body = #"{"enrollmentToken": ""# + String(repeating: "x", count: 5000) + #"", "requestId": "0123456789abcdef"}"#
            let response = try await server.raw(.post, "/v1/enroll", headers: ["Content-Type": "application/json"], body: body)
            #expect(response.status == 413)
            #expect(String(decoding: response.body, as: UTF8.self).contains("larger than 4096 bytes"))
        }
    }

    /// A writable greeting whose pattern backtracks catastrophically.
    static let catastrophic = """
        {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
          "greeting": {"type": "string", "pattern": "^(a+)+$", "default": "aaa", "x-writable": true},
          "title": {"type": "string", "default": "x"}}}}
        """

    @Test(
        "a catastrophic pattern cannot stall the server: the write is refused with a clear error in milliseconds, and other writes go on",
        arguments: StoreKind.allCases)
    func regexAttack(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            _ = try await server.admin.putMetadata(app: "kiosk", document: Array(Self.catastrophic.utf8))
            // Another app for the write that must go on meanwhile: a write of the device's own app
            // would change the revision its PATCH is based on (a 409 when it lands first).
            let lobby = Self.catastrophic.replacingOccurrences(of: #""app": "kiosk""#, with: #""app": "lobby""#)
            _ = try await server.admin.putMetadata(app: "lobby", document: Array(lobby.utf8))
            let device = try await server.enrollDevice()
            let current = try #require(try await device.client.settings(app: "kiosk"))
            let attack = String(repeating: "a", count: 40) + "!"
            let started = ContinuousClock.now
            async let refused = refusal {
                try await device.client.patchSettings(app: "kiosk", patch: ["greeting": .string(attack)], basedOn: current.revision)
            }
            async let admin = server.admin.patchValues(app: "lobby", scope: "app", patch: ["title": "still served"])
            let (answer, adminWrite) = try await (refused, admin)
            #expect(answer?.status == 422 && answer?.code == .invalidValues)
            #expect(answer?.description.contains("too expensive to check against #/properties/greeting/pattern") == true)
            #expect(adminWrite.values["title"] == "still served")
            // A bound, not a measure of speed: without the step budget this match takes hours.
            #expect(ContinuousClock.now - started < .seconds(60))
            // The same from the admin side.
            let adminAttack = await refusal {
                try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["greeting": .string(attack)])
            }
            #expect(adminAttack?.status == 422)
        }
    }

    @Test(
        "patterns of 200,000 and of 10,000 nested groups are refused at upload with a short message, and the server stays up",
        arguments: StoreKind.allCases)
    func deepPatternUpload(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            for (depth, reason) in [(200_000, "at most 32768 are allowed"), (10_000, "groups nest more than 100 deep")] {
                let pattern = String(repeating: "(", count: depth) + "a" + String(repeating: ")", count: depth)
                let document: JSONValue = [
                    "app": "kiosk", "version": 1,
                    "schema": ["type": "object", "properties": ["code": ["type": "string", "pattern": .string(pattern)]]],
                ]
                let refused = await refusal {
                    try await server.admin.putMetadata(app: "kiosk", document: Array(document.serialized().utf8))
                }
                #expect(refused?.status == 422 && refused?.code == .unsupportedMetadata, "\(String(describing: refused).prefix(300))")
                #expect(refused?.description.contains(reason) == true)
                #expect((refused?.description.utf8.count ?? .max) < 1_000)
            }
            try await server.putKioskMetadata()
        }
    }

    @Test("an integer just past maximum at the Int64 edge is refused", arguments: StoreKind.allCases)
    func exactIntegers(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let document = """
                {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
                  "counter": {"type": "integer", "maximum": 9223372036854775807, "default": 0, "x-writable": true}}}}
                """
            _ = try await server.admin.putMetadata(app: "kiosk", document: Array(document.utf8))
            let response = try await server.raw(
                .patch, "/v1/admin/apps/kiosk/values?scope=app", token: TestFleetServer.adminToken,
                headers: ["Content-Type": "application/merge-patch+json"], body: #"{"counter": 9223372036854775808}"#)
            #expect(response.status == 422)
            #expect(String(decoding: response.body, as: UTF8.self).contains("must be <= 9223372036854775807 (got 9223372036854775808)"))
            let fits = try await server.raw(
                .patch, "/v1/admin/apps/kiosk/values?scope=app", token: TestFleetServer.adminToken,
                headers: ["Content-Type": "application/merge-patch+json"], body: #"{"counter": 9223372036854775807}"#)
            #expect(fits.status == 200)
        }
    }

    @Test("a secret inside a list item is masked in admin values and explanations", arguments: StoreKind.allCases)
    func nestedSecrets(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let document = """
                {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
                  "streams": {"type": "array", "default": [], "items": {"type": "object", "properties": {
                    "url": {"type": "string"}, "password": {"type": "string", "x-secret": true}}}}}}}
                """
            _ = try await server.admin.putMetadata(app: "kiosk", document: Array(document.utf8))
            let device = try await server.enrollDevice()
            let stored = try await server.admin.patchValues(
                app: "kiosk", scope: "app", patch: ["streams": [["url": "rtsp://cam", "password": "hunter2"]]])
            #expect(stored.values["streams"] == [["url": "rtsp://cam", "password": "********"]])
            let values = try await server.admin.values(app: "kiosk", scope: "app")
            let explained = try await server.admin.explain(app: "kiosk", deviceID: device.id)
            let own = try await device.client.explainSelf(app: "kiosk")
            for text in [values.json.serialized(), explained.json.serialized(), own.json.serialized(), server.log.all.joined()] {
                #expect(!text.contains("hunter2"))
            }
            #expect(explained.values["streams"] == [["url": "rtsp://cam", "password": "********"]])
            // The device itself gets the real value: it is its setting.
            #expect(try await device.client.settings(app: "kiosk")?.values["streams"] == [["url": "rtsp://cam", "password": "hunter2"]])
        }
    }
}

@Suite("Limits over HTTP: rates and slow clients")
struct RequestLimitTests {
    @Test(
        "a held long-poll's connection is probed by TCP keepalive, so a device that vanished behind NAT is found",
        arguments: StoreKind.allCases)
    func keepaliveOnHeldConnections(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            _ = try await device.client.settings(app: "kiosk")
            let waiting = Task { try await device.client.settings(app: "kiosk", knownRevision: 1, wait: 60) }
            try await server.waitForWaiters(app: "kiosk")
            // /proc/net/tcp: the server's side of each connection, local port = the server's. Its
            // `tr` column is 2 while a keepalive timer runs, and `tm->when` the ticks until it fires.
            let hex = String(server.port, radix: 16, uppercase: true)
            let localSuffix = ":" + String(repeating: "0", count: 4 - hex.count) + hex
            let text = String(decoding: try FileSystem.readFile("/proc/net/tcp", maximumSize: 1 << 26), as: UTF8.self)
            let lines: [[Substring]] = text.split(separator: "\n").map { $0.split(separator: " ") }
            let serverSides = lines.filter { fields in fields.count > 5 && fields[1].hasSuffix(localSuffix) && fields[3] == "01" }
            #expect(!serverSides.isEmpty)
            for fields in serverSides {
                let timer = fields[5].split(separator: ":")
                #expect(timer.first == "02", "no keepalive timer on \(fields.joined(separator: " "))")
                let ticks = Int(timer.last ?? "", radix: 16) ?? .max
                #expect(ticks <= 45 * 100 + 100, "the first probe is due in \(ticks) ticks")
            }
            waiting.cancel()
        }
    }

    @Test("a device that loops is answered 429 with Retry-After; others are not affected", arguments: StoreKind.allCases)
    func deviceRate(store: StoreKind) async throws {
        // The default burst (50) with a rate that barely refills: the count below does not depend
        // on how fast the machine sends.
        try await TestFleetServer.with(store: store, limits: .init(perDevice: .init(rate: 0.01, burst: 50))) { server in
            try await server.putKioskMetadata()
            let looping = try await server.enrollDevice()
            let quiet = try await server.enrollDevice()
            var limited: [HTTPClient.Response] = []
            for _ in 0..<120 {
                let response = try await server.raw(
                    .get, "/v1/apps/kiosk/settings", token: looping.token, headers: ["If-None-Match": #""1""#])
                if response.status == 429 { limited.append(response) }
            }
            #expect(limited.count == 70, "\(limited.count) of 120 limited")
            #expect(limited.allSatisfy { ($0.headers["Retry-After"].flatMap { Int($0) } ?? 0) >= 1 })
            #expect(limited.first.map { String(decoding: $0.body, as: UTF8.self).contains("rate-limited") } == true)
            #expect(try await quiet.client.settings(app: "kiosk") != nil)
        }
    }

    @Test(
        "an address that keeps guessing tokens is slowed (429 after 20 failures); a valid device at the same address is not",
        arguments: StoreKind.allCases)
    func guessing(store: StoreKind) async throws {
        // A bucket that barely refills, so that a slow machine does not refill it mid-test.
        try await TestFleetServer.with(store: store, limits: .init(failures: .init(rate: 0.01, burst: 20))) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            var statuses: [Int] = []
            for attempt in 0..<40 {
                let response = try await server.raw(.get, "/v1/apps/kiosk/settings", token: "fsd_guess-\(attempt)")
                statuses.append(response.status)
                if response.status == 429 { #expect((response.headers["Retry-After"].flatMap { Int($0) } ?? 0) >= 1) }
            }
            #expect(statuses.prefix(20).allSatisfy { $0 == 401 }, "\(statuses)")
            #expect(statuses.suffix(20).allSatisfy { $0 == 429 }, "\(statuses)")
            #expect(try await device.client.settings(app: "kiosk") != nil)
            let enroll = try await server.raw(
                .post, "/v1/enroll", headers: ["Content-Type": "application/json"],
                body: #"{"enrollmentToken": "fse_guess", "requestId": "0123456789abcdef"}"#)
            #expect(enroll.status == 429 && enroll.headers["Retry-After"] != nil)
        }
    }

    // The HTTP layer's timeouts, which no store call takes part in: SQLite only.
    @Test("a client that sends nothing, or trickles its request, is disconnected after the read timeout")
    func slowClients() async throws {
        // 3 s: the steady client below pauses 1.2 s between requests (5 of them outlast it), and
        // the margin must hold while the suite's other tests keep both cores busy.
        try await TestFleetServer.with(readTimeout: .seconds(3)) { server in
            // Raw sockets: libcurl would never send so slowly.
            let silent = try LoopbackSocket(port: server.port)
            let trickling = try LoopbackSocket(port: server.port)
            var trickleClosed = false
            for byte in "GET /healthz HTTP/1.1\r\nHost: x\r\n".utf8 {
                if !trickling.send([byte]) {
                    trickleClosed = true
                    break
                }
                try await Task.sleep(for: .milliseconds(150))
            }
            let silentClosed = await silent.waitForClose(timeout: .seconds(10))
            #expect(silentClosed)
            if !trickleClosed { trickleClosed = await trickling.waitForClose(timeout: .seconds(10)) }
            // The trickle would take 5 s; the 3-s read timeout ended it first.
            #expect(trickleClosed)
            // A client answered before its body came (401 first) that sends the body afterwards is
            // not held either: the body's end does not stop the clock the answer started.
            let early = try LoopbackSocket(port: server.port)
            #expect(early.send(Array("PATCH /v1/apps/kiosk/settings HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n".utf8)))
            if await early.readResponseHead() != nil { _ = early.send(Array("0123456789".utf8)) }
            let earlyClosed = await early.waitForClose(timeout: .seconds(10))
            #expect(earlyClosed)
            // A prompt client on a kept-alive connection is served, twice.
            let prompt = try LoopbackSocket(port: server.port)
            let promptHeads = await prompt.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 2, gap: .zero)
            #expect(promptHeads.map { $0?.hasPrefix("HTTP/1.1 200") == true } == [true, true], "\(promptHeads)")
            // Requests each in time, over more than the read timeout in all: every answer starts
            // the clock again, so the connection stays. (The exchange runs on a thread of its own:
            // a test task that the busy concurrency pool resumes late would be a slow client.)
            let steady = try LoopbackSocket(port: server.port)
            let heads = await steady.exchange("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", count: 5, gap: .seconds(1.2))
            #expect(heads.map { $0?.hasPrefix("HTTP/1.1 200") == true } == Array(repeating: true, count: 5), "\(heads)")
            // ...and once it goes quiet, the timeout still ends it (the check that came early
            // and was set again for the later deadline fires).
            let steadyClosed = await steady.waitForClose(timeout: .seconds(10))
            #expect(steadyClosed)
        }
    }
}
