import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

@Suite("A status report on the settings request (Fleetset-Status)")
struct StatusOnPollRouteTests {
    static let applied = StatusReport(revision: 1, schemaVersion: 1, state: .applied, message: "übernommen ✓", source: .agent)

    @Test(
        "recorded as a POST records it (one event=status line, the latest report), on 200 and 304; every settings answer says Fleetset-Accepts: status",
        arguments: StoreKind.allCases)
    func recorded(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let first = try await device.client.settingsAnswer(app: "kiosk")
            #expect(first.document?.revision == 1 && first.acceptsStatus)
            #expect(server.log.events("status").isEmpty)

            let unchanged = try await device.client.settingsAnswer(
                app: "kiosk", knownRevision: 1, status: StatusOnPoll.Carried(Self.applied))
            #expect(unchanged.document == nil && unchanged.acceptsStatus)
            let lines = server.log.events("status")
            #expect(lines.count == 1)
            #expect(
                lines.first?.contains(
                    "level=info msg=\"status report\" event=status app=kiosk device=\(device.id) revision=1 schema_version=1 state=applied source=agent message=\"übernommen ✓\""
                ) == true, "\(lines)")
            let status = try #require(try await server.admin.devices(app: "kiosk").devices.first?.status)
            #expect(status.report == Self.applied)

            // On a 200 too, and on the key-path route (its 200 and its 304).
            let error = StatusReport(revision: 1, schemaVersion: 1, state: .error, message: "/volume: too loud", source: .app)
            #expect(try await device.client.settingsAnswer(app: "kiosk", status: StatusOnPoll.Carried(error)).document?.revision == 1)
            for known in [nil, #""1""#] {
                var headers: HTTPClient.Headers = [FleetHeader.status: try StatusOnPoll.headerValue(for: Self.applied)]
                if let known { headers["If-None-Match"] = known }
                let value = try await server.raw(.get, "/v1/apps/kiosk/settings/volume", token: device.token, headers: headers)
                #expect(value.status == (known == nil ? 200 : 304))
                #expect(value.headers[FleetHeader.accepts] == "status")
            }
            #expect(server.log.events("status").count == 4)
            #expect(try await server.admin.devices(app: "kiosk").devices.first?.status?.report == Self.applied)
        }
    }

    @Test("a long-poll's report is recorded before it waits")
    func recordedBeforeTheWait() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let waiting = Task {
                try await device.client.settingsAnswer(app: "kiosk", knownRevision: 1, wait: 60, status: StatusOnPoll.Carried(Self.applied))
            }
            try await SettingsRouteTests.waitUntilWaiting(server)
            #expect(server.log.events("status").count == 1)
            #expect(try await server.admin.devices(app: "kiosk").devices.first?.status?.report == Self.applied)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Now"])
            let answer = try await waiting.value
            #expect(answer.document?.revision == 2 && answer.acceptsStatus)
            #expect(server.log.events("status").count == 1)
        }
    }

    @Test(
        "a header that cannot be read: 400 bad-status-header naming the header and what is wrong; nothing recorded, no long-poll",
        arguments: [
            ("Zm9v+A", "Fleetset-Status is not base64url: '+' at offset 4"),
            (Base64URL.encoded(Array("{\"revision\":".utf8)), "Fleetset-Status does not encode JSON"),
            (
                Base64URL.encoded(Array(#"{"revision":1,"schemaVersion":1,"state":"done","source":"agent"}"#.utf8)),
                "Fleetset-Status is not a status report: /state: must be one of"
            ),
            (String(repeating: "A", count: 4100), "Fleetset-Status is 4100 characters, more than 4096"),
        ])
    func malformed(value: String, expected: String) async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            for path in ["/v1/apps/kiosk/settings?wait=30", "/v1/apps/kiosk/settings/volume?wait=30"] {
                let response = try await server.raw(
                    .get, path, token: device.token, headers: ["If-None-Match": #""1""#, FleetHeader.status: value])
                let body = try ErrorBody(json: try JSONParser.parse(response.body))
                #expect(response.status == 400)
                #expect(body.error == .badStatusHeader)
                #expect(body.message.hasPrefix(expected), "\(body.message)")
            }
            #expect(server.log.events("status").isEmpty)
        }
    }

    @Test("a report with a control character in its message is refused as the POST refuses it, naming the header and the member")
    func controlCharacter() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let json = #"{"revision":1,"schemaVersion":1,"state":"error","source":"agent","message":"red \u001b[31m"}"#
            let response = try await server.raw(
                .get, "/v1/apps/kiosk/settings", token: device.token, headers: [FleetHeader.status: Base64URL.encoded(Array(json.utf8))])
            let body = try ErrorBody(json: try JSONParser.parse(response.body))
            #expect(response.status == 400 && body.error == .badStatusHeader)
            #expect(body.message.contains("Fleetset-Status is not a status report: /message: contains a control character (U+001B)"))
            #expect(server.log.events("status").isEmpty)
        }
    }
}
