import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// A device's own writes and reports, in process.
@Suite("Services: write-back, status and facts")
struct WriteBackServiceTests {
    private func fleet() async throws -> (ServiceHarness, Device) {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        return (harness, device)
    }

    @Test(
        "a write needs a current If-Match: missing 428, malformed 400, stale 409",
        arguments: [(nil, ErrorCode.ifMatchRequired), ("41", .badPrecondition), ("\"7\"", .staleRevision)] as [(String?, ErrorCode)])
    func preconditions(ifMatch: String?, code: ErrorCode) async throws {
        let (harness, device) = try await fleet()
        let error = await serviceError {
            try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: ifMatch, patch: ["volume": 3])
        }
        #expect(error?.code == code)
        #expect(try await harness.store.history(app: "kiosk").count == 1, "nothing written")
    }

    @Test("a setting not marked x-writable is refused with 403, naming it")
    func notWritable() async throws {
        let (harness, device) = try await fleet()
        let error = await serviceError {
            try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["title": "Mine"])
        }
        #expect(error?.code == .notWritable && error?.details.map(\.pointer) == ["/title"])
    }

    @Test("a value the schema refuses is 422 invalid-values at its pointer, and the last good settings stay")
    func invalid() async throws {
        let (harness, device) = try await fleet()
        let error = await serviceError {
            try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["volume": 99])
        }
        #expect(error?.code == .invalidValues && error?.details.first?.pointer == "/volume")
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).values["volume"] == 5)
    }

    @Test("a valid write becomes the device's values, a new revision and a history entry by the device")
    func written() async throws {
        let (harness, device) = try await fleet()
        let document = try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["volume": 3])
        #expect(document.revision == 2 && document.values["volume"] == 3)
        #expect(try await harness.store.values(app: "kiosk", scope: .device(device.id)) == ["volume": 3])
        let entry = try #require(try await harness.store.history(app: "kiosk").last)
        #expect(entry.change.actor == "device \(device.id)")
    }

    @Test("a write that changes nothing commits nothing and answers the current settings")
    func noOp() async throws {
        let (harness, device) = try await fleet()
        _ = try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["volume": 3])
        let entries = try await harness.store.history(app: "kiosk").count
        let again = try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"2\"", patch: ["volume": 3])
        #expect(again.revision == 2)
        #expect(try await harness.store.history(app: "kiosk").count == entries)
    }

    @Test("a device deleted meanwhile writes nothing (401)")
    func deletedMeanwhile() async throws {
        let (harness, device) = try await fleet()
        try await harness.directory.deleteDevice(id: device.id)
        let error = await serviceError {
            try await harness.gateway.patchSettings(app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["volume": 3])
        }
        #expect(error?.code == .unauthenticated)
    }

    @Test("a status report is kept as the device's latest; one for an app without metadata is 404")
    func status() async throws {
        let (harness, device) = try await fleet()
        let report = StatusReport(revision: 1, schemaVersion: 1, state: .applied, source: .agent)
        try await harness.gateway.recordStatus(app: "kiosk", device: device, report)
        #expect(try await harness.store.latestStatus(app: "kiosk", deviceID: device.id)?.report == report)
        let error = await serviceError { try await harness.gateway.recordStatus(app: "signage", device: device, report) }
        #expect(error?.code == .unknownApp)
    }

    @Test("a report's detail is kept with it and listed only when asked for (a 0.7.0 CLI reads each status strictly)")
    func statusDetail() async throws {
        let (harness, device) = try await fleet()
        let report = StatusReport(
            revision: 1, schemaVersion: 1, state: .applied, message: "settings.json was changed on the device; revision 1 was put back",
            source: .agent, detail: .restoredAfterLocalEdit)
        try await harness.gateway.recordStatus(app: "kiosk", device: device, report)
        #expect(try await harness.store.latestStatus(app: "kiosk", deviceID: device.id)?.report == report)
        let listed = try await harness.admin.devices(app: "kiosk", withDetails: true)
        #expect(listed.devices.first?.status?.report.detail == .restoredAfterLocalEdit)
        #expect(try DeviceList(json: listed.json).devices.first?.status?.report.detail == .restoredAfterLocalEdit)
        let plain = try await harness.admin.devices(app: "kiosk", withDetails: false)
        #expect(plain.devices.first?.status?.report.detail == nil)
        #expect(!plain.json.serialized().contains("detail"))
    }

    @Test("facts are merged in and stored; an unknown fact is 400 and changes nothing")
    func facts() async throws {
        let (harness, device) = try await fleet()
        let stored = try await harness.gateway.patchDeviceInfo(device: device, patch: ["os": ["version": "12"]])
        #expect(stored["os"] == ["version": "12"])
        let error = await serviceError { try await harness.gateway.patchDeviceInfo(device: device, patch: ["shoeSize": 44]) }
        #expect(error?.status == .badRequest)
        #expect(try await harness.directory.deviceFacts(id: device.id)?.info == ["os": ["version": "12"]])
    }

    @Test("a device's write at a key path keeps only that place")
    func keyPath() async throws {
        let harness = ServiceHarness()
        _ = try await harness.admin.putMetadata(
            app: "kiosk",
            document: Array(
                #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"player": {"type": "object", "x-writable": true, "default": {"volume": 5, "muted": false}}}}}"#
                    .utf8), force: false, actor: "test")
        let (device, _) = try await harness.enroll()
        let document = try await harness.gateway.patchSettings(
            app: "kiosk", device: device, ifMatch: "\"1\"", patch: ["/player/volume": 9])
        #expect(document.values["player"] == ["volume": 9, "muted": false])
        #expect(try await harness.store.values(app: "kiosk", scope: .device(device.id)) == ["/player/volume": 9])
    }
}
