import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Testing

@Suite("Admin API over HTTP")
struct AdminRouteTests {
    @Test("metadata versions must increase: the same or a lower version is 409 with a message saying so", arguments: StoreKind.allCases)
    func versionRule(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let first = try await server.putKioskMetadata(version: 2)
            #expect(first == MetadataPutResult(app: "kiosk", version: 2, previousVersion: nil))
            for version in [2, 1] {
                let refused = await refusal { try await server.putKioskMetadata(version: version) }
                #expect(refused?.status == 409 && refused?.code == .versionNotIncreased)
                #expect(refused?.description.contains("version \(version) is not greater than the stored version 2") == true)
            }
            #expect(try await server.putKioskMetadata(version: 5) == MetadataPutResult(app: "kiosk", version: 5, previousVersion: 2))
            #expect(server.log.events("metadata").count == 2)
        }
    }

    @Test("metadata that is not valid is 422 with pointers; another app's document is 400", arguments: StoreKind.allCases)
    func invalidMetadata(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            let bad =
                #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"v": {"type": "integer", "maximum": 3, "default": 4}}}}"#
            let invalid = await refusal { try await server.admin.putMetadata(app: "kiosk", document: Array(bad.utf8)) }
            #expect(invalid?.status == 422 && invalid?.code == .invalidMetadata)
            #expect(invalid?.description.contains("/schema/properties/v/default: the default is not valid") == true)

            let unsupported =
                #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"v": {"type": "integer", "maxLenght": 3}}}}"#
            let refusedUnsupported = await refusal { try await server.admin.putMetadata(app: "kiosk", document: Array(unsupported.utf8)) }
            #expect(refusedUnsupported?.status == 422 && refusedUnsupported?.code == .unsupportedMetadata)

            let mismatch = await refusal {
                try await server.admin.putMetadata(app: "other", document: Array(TestMetadata.kiosk(version: 1).utf8))
            }
            #expect(mismatch?.status == 400 && mismatch?.code == .appMismatch)

            let notJSON = await refusal { try await server.admin.putMetadata(app: "kiosk", document: Array("{".utf8)) }
            #expect(notJSON?.status == 400 && notJSON?.code == .badRequest)
        }
    }

    @Test("a version that makes stored values invalid is refused with the offending values, unless forced", arguments: StoreKind.allCases)
    func valuesInvalidUnderNewVersion(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)
            let device = try await server.enrollDevice(groups: ["lobby"])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 9])
            let refused = await refusal { try await server.putKioskMetadata(version: 3) }  // version 3 caps volume at 8
            #expect(refused?.status == 409 && refused?.code == .valuesInvalid)
            guard case .refused(_, let body?, _) = refused else { Issue.record("no error body"); return }
            #expect(body.details.map(\.pointer) == ["/volume"])
            #expect(body.details.first?.message == "set at group:lobby: must be <= 8 (got 9); for \(device.id)")
            // Nothing changed; forcing stores it and the device gets the new version.
            #expect(try await device.client.settings(app: "kiosk")?.schemaVersion == 1)
            #expect(try await server.putKioskMetadata(version: 3, force: true).version == 3)
            #expect(try await device.client.settings(app: "kiosk")?.schemaVersion == 3)
            // With the value invalid already, a write that does not touch it is still accepted.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Still works"])
        }
    }

    @Test("values layer defaults < app < groups (by name) < device, and explain names each source", arguments: StoreKind.allCases)
    func scopePrecedence(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["b-north", "a-lobby"])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 1, "title": "App", "night": true])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:a-lobby", patch: ["volume": 2, "title": "Lobby"])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:b-north", patch: ["volume": 3])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(device.id)", patch: ["volume": 4])
            let settings = try #require(try await device.client.settings(app: "kiosk"))
            #expect(settings.values == ["volume": 4, "title": "Lobby", "night": true, "pin": "0000"])
            let explanation = try await server.admin.explain(app: "kiosk", deviceID: device.id)
            #expect(
                explanation.sources == ["volume": "device:\(device.id)", "title": "group:a-lobby", "night": "app", "pin": "defaults"])
            #expect(explanation.values["pin"] == "********")
            #expect(explanation.servedRevision == settings.revision)
            // Clearing the device value falls back to the later group.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(device.id)", patch: ["volume": .null])
            #expect(try await device.client.settings(app: "kiosk")?.values["volume"] == 3)
        }
    }

    @Test("secrets are write-only through the admin API; the device gets them", arguments: StoreKind.allCases)
    func secretsMasked(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let stored = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["pin": "4711"])
            #expect(stored.values["pin"] == "********")
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values["pin"] == "********")
            #expect(try await device.client.settings(app: "kiosk")?.values["pin"] == "4711")
            #expect(!mentions(server.log.all.joined(), secret: "4711"))
        }
    }

    @Test("value writes are validated for every device they reach and for devices enrolling later", arguments: StoreKind.allCases)
    func valueValidation(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["lobby"])
            let refused = await refusal { try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 20]) }
            #expect(refused?.status == 422 && refused?.code == .invalidValues)
            #expect(
                refused?.description.contains(
                    "/volume: set at group:lobby: must be <= 10 (got 20); for \(device.id), new devices in group lobby") == true)
            let unknownKey = await refusal { try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["colour": "red"]) }
            #expect(unknownKey?.status == 422)
            #expect(try await server.admin.values(app: "kiosk", scope: "group:lobby").values.isEmpty)
        }
    }

    @Test("bad scopes are 400, unknown devices and apps 404", arguments: StoreKind.allCases)
    func scopeErrors(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            for scope in ["", "defaults", "group:", "everyone"] {
                let refused = await refusal { try await server.admin.values(app: "kiosk", scope: scope) }
                #expect(refused?.status == 400 && refused?.code == .badParameter, "scope \(scope)")
            }
            let missing = try await server.raw(.get, "/v1/admin/apps/kiosk/values", token: TestFleetServer.adminToken)
            #expect(missing.status == 400)
            let unknownDevice = await refusal {
                try await server.admin.patchValues(app: "kiosk", scope: "device:d-nobody", patch: ["volume": 1])
            }
            #expect(unknownDevice?.status == 404 && unknownDevice?.code == .unknownDevice)
            let explainNobody = await refusal { try await server.admin.explain(app: "kiosk", deviceID: "d-nobody") }
            #expect(explainNobody?.status == 404 && explainNobody?.code == .unknownDevice)
            let unknownApp = await refusal { try await server.admin.devices(app: "nope") }
            #expect(unknownApp?.status == 404 && unknownApp?.code == .unknownApp)
            let route = try await server.raw(.get, "/v1/nothing-here", token: TestFleetServer.adminToken)
            #expect(route.status == 404)
            #expect(try ErrorBody(json: try JSONParser.parse(route.body)).error == .notFound)
        }
    }

    @Test("the device list shows last seen, the revision served and the latest status", arguments: StoreKind.allCases)
    func deviceList(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let seen = try await server.enrollDevice(groups: ["lobby"])
            let quiet = try await server.enrollDevice()
            let enrolledAt = server.clock.secondsSinceEpoch()
            server.clock.advance(by: 120)
            _ = try await seen.client.settings(app: "kiosk")
            let list = try await server.admin.devices(app: "kiosk")
            let byID = Dictionary(uniqueKeysWithValues: list.devices.map { ($0.id, $0) })
            #expect(byID[seen.id]?.lastSeenAt == enrolledAt + 120)
            #expect(byID[seen.id]?.servedRevision == 1)
            #expect(byID[quiet.id]?.lastSeenAt == enrolledAt)
            #expect(byID[quiet.id]?.servedRevision == nil && byID[quiet.id]?.status == nil)
            #expect(list.devices.map(\.id) == list.devices.map(\.id).sorted())
        }
    }
}
