import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Rollouts, the fleet directory and the console's read models, in process.
@Suite("Services: rollouts")
struct RolloutServiceTests {
    private func fleet() async throws -> (ServiceHarness, canary: Device, other: Device) {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (canary, _) = try await harness.enroll(groups: ["canary"])
        let (other, _) = try await harness.enroll(groups: ["lobby"])
        return (harness, canary, other)
    }

    private func start(_ harness: ServiceHarness) async throws -> RolloutView {
        try await harness.rollouts.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 9], waves: [.group("canary"), .everyone]), actor: "test")
    }

    @Test("an app that never had a rollout has no status: 404 no-rollout")
    func none() async throws {
        let (harness, _, _) = try await fleet()
        let error = await serviceError { try await harness.rollouts.rolloutStatus(app: "kiosk") }
        #expect(error?.code == .noRollout)
    }

    @Test("a started rollout reaches its first wave only; the others keep the fleet's values")
    func firstWave() async throws {
        let (harness, canary, other) = try await fleet()
        let view = try await start(harness)
        #expect(view.phase == .running && view.waves.count == 2)
        #expect(try await harness.gateway.settings(app: "kiosk", device: canary).values["volume"] == 9)
        #expect(try await harness.gateway.settings(app: "kiosk", device: other).values["volume"] == 5)
        #expect(try await harness.rollouts.rolloutStatus(app: "kiosk").id == view.id)
    }

    @Test("one active rollout per app: a second is 409 rollout-in-progress")
    func oneAtATime() async throws {
        let (harness, _, _) = try await fleet()
        _ = try await start(harness)
        let error = await serviceError { try await start(harness) }
        #expect(error?.code == .rolloutInProgress)
    }

    @Test("a value the rollout stages cannot be written meanwhile unless forced")
    func stagedKeys() async throws {
        let (harness, _, other) = try await fleet()
        _ = try await start(harness)
        let error = await serviceError { try await harness.set(["volume": 1]) }
        #expect(error?.code == .rolloutInProgress)
        try await harness.set(["title": "Other keys are free"])
        try await harness.set(["volume": 1], force: true)
        #expect(try await harness.gateway.settings(app: "kiosk", device: other).values["volume"] == 1)
    }

    @Test("an aborted rollout leaves every device on the fleet's values")
    func abort() async throws {
        let (harness, canary, _) = try await fleet()
        _ = try await start(harness)
        let view = try await harness.rollouts.abortRollout(app: "kiosk", actor: "test")
        #expect(view.phase == .aborted)
        #expect(try await harness.gateway.settings(app: "kiosk", device: canary).values["volume"] == 5)
    }

    @Test("resuming a rollout that is not paused is 409 rollout-not-paused")
    func resumeRunning() async throws {
        let (harness, _, _) = try await fleet()
        _ = try await start(harness)
        let error = await serviceError { try await harness.rollouts.resumeRollout(app: "kiosk", actor: "test") }
        #expect(error?.code == .rolloutNotPaused)
    }

    @Test("supervision admits the next wave once the first applied, then completes into the values")
    func supervised() async throws {
        let (harness, canary, other) = try await fleet()
        _ = try await start(harness)
        let served = try await harness.gateway.settings(app: "kiosk", device: canary)
        try await harness.gateway.recordStatus(
            app: "kiosk", device: canary, StatusReport(revision: served.revision, schemaVersion: 1, state: .applied, source: .agent))
        _ = try await harness.rollouts.superviseRollouts()
        #expect(try await harness.gateway.settings(app: "kiosk", device: other).values["volume"] == 9)
        let again = try await harness.gateway.settings(app: "kiosk", device: other)
        try await harness.gateway.recordStatus(
            app: "kiosk", device: other, StatusReport(revision: again.revision, schemaVersion: 1, state: .applied, source: .agent))
        _ = try await harness.rollouts.superviseRollouts()
        #expect(try await harness.rollouts.rolloutStatus(app: "kiosk").phase == .completed)
        #expect(try await harness.admin.values(app: "kiosk", scope: .app).values["volume"] == 9)
    }
}

@Suite("Services: the fleet directory")
struct DirectoryServiceTests {
    @Test("a device's apps and groups change; an unknown device is 404")
    func updateDevice() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        let record = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(groups: ["garage"]))
        #expect(record.groups == ["garage"])
        #expect(try await harness.directory.device(id: device.id).groups == ["garage"])
        let error = await serviceError { try await harness.directory.updateDevice(id: "d-nobody", DeviceUpdate(disabled: true)) }
        #expect(error?.code == .unknownDevice)
    }

    @Test("a deleted device's token is refused and its own values go with it")
    func deleteDevice() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, token) = try await harness.enroll()
        try await harness.set(["volume": 2], at: .device(device.id))
        try await harness.directory.deleteDevice(id: device.id)
        let refused = await serviceError { try await harness.auth.authenticate(authorization: "Bearer " + token) }
        #expect(refused?.code == .unauthenticated)
        #expect(try await harness.store.values(app: "kiosk", scope: .device(device.id)).isEmpty)
        let again = await serviceError { try await harness.directory.deleteDevice(id: device.id) }
        #expect(again?.code == .unknownDevice)
    }

    @Test("devices are found by their facts")
    func filters() async throws {
        let (harness, bookworm, _) = try await ServiceHarness.bookwormAndBullseye()
        let found = try await harness.directory.allDevices(matching: [try #require(DeviceInfoFilter("os.version=12"))])
        #expect(found.devices.map(\.id) == [bookworm.id])
        #expect(try await harness.directory.allDevices().devices.count == 2)
    }

    @Test("policies: set at a scope by merge patch, listed, resolved for a device; an unknown key or device is refused")
    func policies() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(groups: ["lobby"])
        _ = try await harness.directory.patchPolicy(scope: .group("lobby"), patch: ["logLevel": "debug"])
        #expect(try await harness.directory.policyList().policies.map(\.scope) == [.group("lobby")])
        #expect(try await harness.directory.devicePolicy(id: device.id) == (try await harness.gateway.devicePolicy(device)))
        let key = await serviceError { try await harness.directory.patchPolicy(scope: .group("lobby"), patch: ["colour": "red"]) }
        #expect(key?.status == .badRequest)
        let unknown = await serviceError {
            try await harness.directory.patchPolicy(scope: .device("d-nobody"), patch: ["logLevel": "info"])
        }
        #expect(unknown?.code == .unknownDevice)
        _ = try await harness.directory.patchPolicy(scope: .group("lobby"), patch: ["logLevel": nil])
        #expect(try await harness.directory.policyList().policies.isEmpty)
    }

}
