import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

@Suite("Enrollment and authorization over HTTP")
struct EnrollmentAndAuthTests {
    @Test("an enrollment token enrolls a device into its groups; the device token then works", arguments: StoreKind.allCases)
    func enrollment(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let token = try await server.admin.makeEnrollmentToken(
                EnrollmentTokenRequest(apps: ["kiosk"], groups: ["lobby", "north"], uses: 2))
            #expect(token.enrollmentToken.hasPrefix("fse_"))
            #expect(token.expiresAt == server.clock.secondsSinceEpoch() + 86_400)
            let identity = try await server.client(token: nil).enroll(enrollmentToken: token.enrollmentToken, requestId: newRequestID())
            #expect(identity.deviceId.hasPrefix("d-"))
            #expect(identity.deviceToken.hasPrefix("fsd_"))
            let devices = try await server.admin.devices(app: "kiosk")
            #expect(devices.devices.map(\.id) == [identity.deviceId])
            #expect(devices.devices.first?.groups == ["lobby", "north"])
            #expect(try await server.client(token: identity.deviceToken).settings(app: "kiosk")?.revision == 1)
            // Only hashes are stored: the tokens appear nowhere in the database's files.
            #expect(try await server.databaseFilesContain(identity.deviceId), "the files read are not the database's")
            #expect(try await !server.databaseFilesContain(identity.deviceToken))
            #expect(try await !server.databaseFilesContain(token.enrollmentToken))
            #expect(!server.log.all.joined().contains(identity.deviceToken))
        }
    }

    @Test("wrong, expired and used-up enrollment tokens are refused with 401 saying which", arguments: StoreKind.allCases)
    func refusedEnrollment(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let anonymous = server.client(token: nil)
            let wrong = await refusal { try await anonymous.enroll(enrollmentToken: "fse_not-a-token", requestId: newRequestID()) }
            #expect(wrong?.status == 401 && wrong?.code == .invalidEnrollmentToken)
            #expect(wrong?.description.contains("not one this server issued") == true)

            let once = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], uses: 1))
            _ = try await anonymous.enroll(enrollmentToken: once.enrollmentToken, requestId: newRequestID())
            let usedUp = await refusal { try await anonymous.enroll(enrollmentToken: once.enrollmentToken, requestId: newRequestID()) }
            #expect(usedUp?.status == 401 && usedUp?.description.contains("used as often as it allows") == true)

            let short = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], expiresInSeconds: 60, uses: 5))
            server.clock.advance(by: 61)
            let expired = await refusal { try await anonymous.enroll(enrollmentToken: short.enrollmentToken, requestId: newRequestID()) }
            #expect(expired?.status == 401 && expired?.description.contains("expired") == true)
            #expect(server.log.events("enrollment-refused").count == 3)
        }
    }

    @Test("an enrollment-token request out of range is a 400 naming the member", arguments: StoreKind.allCases)
    func badTokenRequest(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let response = try await server.raw(
                .post, "/v1/admin/enrollment-tokens", token: TestFleetServer.adminToken, headers: ["Content-Type": "application/json"],
                body: #"{"apps": ["kiosk"], "uses": 0}"#)
            #expect(response.status == 400)
            #expect(String(decoding: response.body, as: UTF8.self).contains("/uses: must be an integer from 1 to 100000"))
            let noApps = try await server.raw(
                .post, "/v1/admin/enrollment-tokens", token: TestFleetServer.adminToken, headers: ["Content-Type": "application/json"],
                body: #"{"groups": ["lobby"]}"#)
            #expect(noApps.status == 400)
            #expect(String(decoding: noApps.body, as: UTF8.self).contains("/apps: must name at least one app"))
        }
    }

    @Test("no token, an unknown token, and a malformed header are 401 with WWW-Authenticate", arguments: StoreKind.allCases)
    func unauthenticated(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            for header: String? in [nil, "Bearer fsd_unknown", "Basic Zm9vOmJhcg==", "Bearer"] {
                var headers: HTTPClient.Headers = [:]
                if let header { headers["Authorization"] = header }
                for path in ["/v1/apps/kiosk/settings", "/v1/admin/apps/kiosk/devices"] {
                    let response = try await server.raw(.get, path, headers: headers)
                    #expect(response.status == 401, "\(path) with \(header ?? "no header")")
                    #expect(response.headers["WWW-Authenticate"] == #"Bearer realm="fleetset""#)
                    let body = try ErrorBody(json: try JSONParser.parse(response.body))
                    #expect(body.error == .unauthenticated)
                }
            }
        }
    }

    @Test("device tokens are refused on admin routes, the admin token on device routes", arguments: StoreKind.allCases)
    func roles(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let adminRoutes: [(HTTPClient.Method, String)] = [
                (.get, "/v1/admin/apps/kiosk/devices"), (.get, "/v1/admin/apps/kiosk/devices/\(device.id)/explain"),
                (.get, "/v1/admin/apps/kiosk/values?scope=app"), (.patch, "/v1/admin/apps/kiosk/values?scope=app"),
                (.put, "/v1/admin/apps/kiosk/metadata"), (.post, "/v1/admin/enrollment-tokens"),
            ]
            let deviceToken = device.token
            for (method, path) in adminRoutes {
                let response = try await server.raw(
                    method, path, token: deviceToken, headers: ["Content-Type": "application/json"], body: "{}")
                #expect(response.status == 403, "\(method) \(path)")
                #expect(try ErrorBody(json: try JSONParser.parse(response.body)).error == .adminOnly)
            }
            let asDevice = await refusal { try await server.admin.settings(app: "kiosk") }
            #expect(asDevice?.status == 403 && asDevice?.code == .deviceOnly)
        }
    }

    @Test("device A can neither read nor change device B's settings", arguments: StoreKind.allCases)
    func isolation(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let a = try await server.enrollDevice()
            let b = try await server.enrollDevice()
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(b.id)", patch: ["title": "Only B"])
            let seenByA = try #require(try await a.client.settings(app: "kiosk"))
            #expect(seenByA.values["title"] == "Welcome")
            _ = try await a.client.patchSettings(app: "kiosk", patch: ["volume": 9], basedOn: seenByA.revision)
            let seenByB = try #require(try await b.client.settings(app: "kiosk"))
            #expect(seenByB.values["title"] == "Only B")
            #expect(seenByB.values["volume"] == 5)
            #expect(try await server.admin.values(app: "kiosk", scope: "device:\(a.id)").values == ["volume": 9])
            #expect(try await server.admin.values(app: "kiosk", scope: "device:\(b.id)").values == ["title": "Only B"])
        }
    }

}
