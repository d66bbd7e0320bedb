import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Serving settings and long-polls, with the manual clock: timeouts pass without waiting.
@Suite("Services: serving and long-polls")
struct ServingServiceTests {
    private func fleet() async throws -> (ServiceHarness, Device) {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(groups: ["lobby"])
        return (harness, device)
    }

    @Test("a new device gets the defaults at revision 1; the metadata document has a strong ETag")
    func defaults() async throws {
        let (harness, device) = try await fleet()
        let settings = try await harness.gateway.settings(app: "kiosk", device: device)
        #expect(settings.revision == 1 && settings.values == ["volume": 5, "title": "Welcome", "pin": "0000", "night": false])
        let (document, etag) = try await harness.gateway.metadataDocument(app: "kiosk")
        #expect(document == String(decoding: ServiceHarness.kiosk(version: 1), as: UTF8.self))
        #expect(etag.hasPrefix("\"1-") && etag.hasSuffix("\""))
        let unknown = await serviceError { try await harness.gateway.metadataDocument(app: "signage") }
        #expect(unknown?.code == .unknownApp)
    }

    @Test("the device scope wins over its groups, the groups over the app scope")
    func layers() async throws {
        let (harness, device) = try await fleet()
        try await harness.set(["volume": 2, "title": "Fleet"])
        try await harness.set(["volume": 3], at: .group("lobby"))
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).values["volume"] == 3)
        try await harness.set(["volume": 4], at: .device(device.id))
        let settings = try await harness.gateway.settings(app: "kiosk", device: device)
        #expect(settings.values["volume"] == 4 && settings.values["title"] == "Fleet")
    }

    @Test("the revision moves when the values change and stays when they do not")
    func revisions() async throws {
        let (harness, device) = try await fleet()
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).revision == 1)
        try await harness.set(["title": "Now"])
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).revision == 2)
        try await harness.set(["volume": 7], at: .group("elsewhere"))
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).revision == 2)
    }

    @Test("a long-poll on the current revision times out unchanged when the clock passes its wait, with no real wait")
    func timesOut() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(30)) }
        try await harness.untilHeld(1)
        harness.clock.advance(by: .seconds(29))
        await Task.yield()
        #expect(await harness.services.context.notifier.heldCount == 1, "not before its time")
        harness.clock.advance(by: .seconds(1))
        let answer = try await waiting.value
        #expect(answer.settings == nil && answer.nextPoll == nil)
        #expect(await harness.services.context.notifier.heldCount == 0)
    }

    @Test("a write the device sees wakes its long-poll with the new settings")
    func woken() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        try await harness.set(["title": "Breaking"], at: .group("lobby"))
        let answer = try await waiting.value
        #expect(answer.document?.revision == 2 && answer.document?.values["title"] == "Breaking")
    }

    @Test("a write the device does not see leaves its long-poll waiting")
    func notWoken() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        try await harness.set(["title": "Elsewhere"], at: .group("garage"))
        for _ in 0..<100 { await Task.yield() }
        #expect(await harness.services.context.notifier.heldCount == 1)
        harness.clock.advance(by: .seconds(300))
        #expect(try await waiting.value.settings == nil)
    }

    @Test("an older revision is answered at once, without waiting")
    func stale() async throws {
        let (harness, device) = try await fleet()
        #expect(try await harness.gateway.settings(app: "kiosk", device: device).revision == 1)
        try await harness.set(["title": "Now"])
        let answer = try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300))
        #expect(answer.document?.revision == 2)
    }

    @Test("a cancelled long-poll (its client went away) ends unchanged at once")
    func cancelled() async throws {
        let (harness, device) = try await fleet()
        let cancellation = WaitCancellation()
        let waiting = Task {
            try await harness.gateway.longPoll(
                app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300), cancellation: cancellation)
        }
        try await harness.untilHeld(1)
        harness.gateway.cancelLongPoll(cancellation)
        #expect(try await waiting.value.settings == nil)
    }

    @Test("a newer long-poll of the same device and app replaces the older, which ends unchanged")
    func replaced() async throws {
        let (harness, device) = try await fleet()
        let first = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        let second = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        #expect(try await first.value.settings == nil)
        try await harness.untilHeld(1)
        harness.clock.advance(by: .seconds(300))
        #expect(try await second.value.settings == nil)
    }

    @Test("an admin's request to rotate the token ends the wait at once, the device told of it")
    func rotationRequested() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(rotateToken: true))
        let answer = try await waiting.value
        #expect(answer.settings == nil && answer.device.rotationRequested)
    }

    @Test("a new agent policy for the device ends its wait with the new policy tag")
    func policyChange() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task {
            try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, knownPolicyTag: "0", wait: .seconds(300))
        }
        try await harness.untilHeld(1)
        _ = try await harness.directory.patchPolicy(scope: .group("lobby"), patch: ["logLevel": "debug"])
        let answer = try await waiting.value
        #expect(answer.settings == nil && answer.policyTag != "0")
    }

    @Test("a disabled device's waiting long-poll is answered 401 when it wakes")
    func disabledWhileWaiting() async throws {
        let (harness, device) = try await fleet()
        let waiting = Task { try await harness.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(disabled: true))
        let error = await serviceError { try await waiting.value }
        #expect(error?.code == .deviceDisabled)
    }

    @Test("past the busy limit a long-poll is answered at once and told when to come back")
    func busy() async throws {
        let harness = ServiceHarness(busyLimit: 1)
        try await harness.putKiosk()
        let (first, _) = try await harness.enroll()
        let (second, _) = try await harness.enroll()
        let held = Task { try await harness.gateway.longPoll(app: "kiosk", device: first, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        let answer = try await harness.gateway.longPoll(app: "kiosk", device: second, knownRevision: 1, wait: .seconds(300))
        #expect(answer.settings == nil && answer.nextPoll == .seconds(90))
        harness.clock.advance(by: .seconds(300))
        _ = try await held.value
    }

    @Test("past the capacity a long-poll is refused with 503 overloaded")
    func shed() async throws {
        let harness = ServiceHarness(capacity: 1)
        try await harness.putKiosk()
        let (first, _) = try await harness.enroll()
        let (second, _) = try await harness.enroll()
        let held = Task { try await harness.gateway.longPoll(app: "kiosk", device: first, knownRevision: 1, wait: .seconds(300)) }
        try await harness.untilHeld(1)
        let error = await serviceError {
            try await harness.gateway.longPoll(app: "kiosk", device: second, knownRevision: 1, wait: .seconds(300))
        }
        #expect(error?.code == .overloaded && error?.status == .serviceUnavailable)
        harness.clock.advance(by: .seconds(300))
        _ = try await held.value
    }

    @Test("a long-poll's wait is spread below what it asks, never above", arguments: [0.0, 0.5, 1.0])
    func spread(fraction: Double) {
        let wait = DeviceGateway.spreadWait(.seconds(160), fraction: fraction)
        #expect(wait <= .seconds(160) && wait >= .seconds(150))
    }
}
