import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetWebhooks
import Testing

/// Which changes write which webhook messages, in the change's own transaction, and the digests
/// that tell of many devices in few messages.
@Suite("Services: webhook events")
struct WebhookEventServiceTests {
    /// A harness with a subscription to every event type of every app.
    private func subscribed() async throws -> ServiceHarness {
        let harness = ServiceHarness()
        let every = WebhookEventType.allCases.filter { $0 != .ping }.map(\.rawValue)
        _ = try await harness.services.webhooks.create(WebhookRequest(url: "https://hooks.example.com/fleet", events: every), actor: "ada")
        return harness
    }

    /// The types of the messages queued so far, oldest first.
    private func queued(_ harness: ServiceHarness) async throws -> [String] {
        try await harness.store.outboxEntries(subscription: nil).reversed().map(\.message.type)
    }

    @Test("metadata, enrollment, a rollout started and aborted, a device disabled and deleted: one message each, in order")
    func changesTellTheirEvents() async throws {
        let harness = try await subscribed()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(groups: ["canary"])
        _ = try await harness.rollouts.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 9], waves: [.group("canary"), .everyone]), actor: "test")
        _ = try await harness.rollouts.abortRollout(app: "kiosk", actor: "test")
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(disabled: true))
        _ = try await harness.directory.updateDevice(id: device.id, DeviceUpdate(disabled: true))  // already disabled: nothing new
        try await harness.directory.deleteDevice(id: device.id)
        #expect(
            try await queued(harness) == [
                "metadata.stored", "device.enrolled", "rollout.started", "rollout.aborted", "device.disabled", "device.deleted",
            ])
        let started = try #require(try await harness.store.outboxEntries(subscription: nil).first { $0.message.type == "rollout.started" })
        let data = try #require(started.message.data.objectValue)
        #expect(data["app"] == "kiosk" && data["wave"] == .number(.integer(1)) && data["waves"] == .number(.integer(2)))
        let enrolled = try #require(try await harness.store.outboxEntries(subscription: nil).first { $0.message.type == "device.enrolled" })
        #expect(enrolled.message.data.objectValue?["device"] == .string(device.id))
    }

    @Test("a wave admitted, then the rollout completed; a value change alone tells nothing")
    func wavesAndCompletion() async throws {
        let harness = try await subscribed()
        try await harness.putKiosk()
        let (canary, _) = try await harness.enroll(groups: ["canary"])
        let (other, _) = try await harness.enroll(groups: ["lobby"])
        try await harness.set(["title": "Hello"])
        _ = try await harness.rollouts.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 9], waves: [.group("canary"), .everyone]), actor: "test")
        for device in [canary, other] {
            let served = try await harness.gateway.settings(app: "kiosk", device: device)
            try await harness.gateway.recordStatus(
                app: "kiosk", device: device, StatusReport(revision: served.revision, schemaVersion: 1, state: .applied, source: .agent))
            _ = try await harness.rollouts.superviseRollouts()
        }
        #expect(
            try await queued(harness) == [
                "metadata.stored", "device.enrolled", "device.enrolled", "rollout.started", "rollout.wave-admitted", "rollout.completed",
            ])
    }

    @Test("a rollout paused by a device's error tells rollout.paused with the reason")
    func pausedOnError() async throws {
        let harness = try await subscribed()
        try await harness.putKiosk()
        let (canary, _) = try await harness.enroll(groups: ["canary"])
        _ = try await harness.rollouts.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 9], waves: [.group("canary"), .everyone]), actor: "test")
        let served = try await harness.gateway.settings(app: "kiosk", device: canary)
        try await harness.gateway.recordStatus(
            app: "kiosk", device: canary,
            StatusReport(revision: served.revision, schemaVersion: 1, state: .error, message: "volume out of range", source: .app))
        _ = try await harness.rollouts.superviseRollouts()
        let paused = try #require(try await harness.store.outboxEntries(subscription: nil).first { $0.message.type == "rollout.paused" })
        let data = try #require(paused.message.data.objectValue)
        #expect(data["app"] == "kiosk" && data["phase"] == "paused" && data["reason"]?.stringValue?.isEmpty == false, "\(data)")
        // A forced value write that carries the paused rollout tells nothing again.
        try await harness.set(["volume": 1], force: true)
        #expect(try await queued(harness).filter { $0 == "rollout.paused" }.count == 1)
    }

    @Test("every audit entry goes to the audit stream's subscribers with its hash, in the entry's own write; not to one limited to apps")
    func auditStream() async throws {
        let harness = ServiceHarness()
        let made = try await harness.services.webhooks.create(
            WebhookRequest(url: "https://siem.example.com/in", events: ["audit.entry"]), actor: "ada")
        let limited = try await harness.services.webhooks.create(
            WebhookRequest(url: "https://siem.example.com/kiosk", events: ["audit.entry"], apps: ["kiosk"]), actor: "ada")
        let record = try await harness.store.appendAudit(
            AuditDraft(
                actor: "ada", credential: "at-1", address: "192.0.2.1", action: "createWebhook", target: "/v1/admin/webhooks", status: 201,
                outcome: "ok"), at: 1_795_000_100)
        let entry = try #require(try await harness.store.outboxEntries(subscription: made.info.id).first)
        let data = try #require(entry.message.data.objectValue)
        #expect(entry.message.type == "audit.entry" && data["hash"] == .string(record.hash))
        #expect(data["entry"]?.objectValue?["action"] == "createWebhook", "\(data)")
        #expect(try await harness.store.outboxEntries(subscription: limited.info.id).isEmpty)
    }

    @Test("a subscription of one app and one type gets only those; none written when nobody subscribed")
    func filtered() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        #expect(try await harness.store.outboxEntries(subscription: nil).isEmpty)
        let made = try await harness.services.webhooks.create(
            WebhookRequest(url: "https://hooks.example.com/x", events: ["metadata.stored"], apps: ["signage"]), actor: "ada")
        try await harness.putKiosk(version: 2)
        _ = try await harness.enroll()
        #expect(try await harness.store.outboxEntries(subscription: nil).isEmpty)
        _ = try await harness.admin.putMetadata(
            app: "signage", document: Array(#"{"app": "signage", "version": 1, "schema": {"type": "object"}}"#.utf8), force: false,
            actor: "test")
        #expect(try await harness.store.outboxEntries(subscription: made.info.id).map(\.message.type) == ["metadata.stored"])
    }
}

@Suite struct EventDigestTests {
    @Test func oneEventPerAppAndStatePerMinute() {
        var digest = ReportDigest()
        for index in 0..<500 { digest.record(app: "kiosk", device: "d-\(index % 250)", state: .error, at: 1000 + Int64(index % 50)) }
        digest.record(app: "kiosk", device: "d-1", state: .applied, at: 1010)
        digest.record(app: "kiosk", device: "d-9", state: .unsupported, at: 1020)
        digest.record(app: "signage", device: "s-1", state: .error, at: 1030)
        #expect(digest.due(now: 1059).isEmpty)
        let first = digest.due(now: 1060)
        #expect(first.map(\.type) == [.deviceError])
        #expect(first[0].data["devices"] == .number(.integer(250)) && first[0].data["sample"]?.arrayValue?.count == 20)
        #expect(first[0].apps == ["kiosk"] && first[0].occurredAt == 1049)
        #expect(digest.due(now: 1080).map(\.type) == [.deviceUnsupported])
        #expect(digest.due(now: 1090).map(\.apps) == [["signage"]])
        #expect(digest.isEmpty && digest.due(now: 5000).isEmpty)
    }

    @Test func silentDevicesAreToldOncePerAppAsMoreFallSilent() {
        func device(_ id: String, seen: Int64?, apps: [String] = ["kiosk"], disabled: Bool = false) -> Device {
            Device(id: id, tokenHash: id, apps: apps, groups: [], enrolledAt: 0, lastSeenAt: seen, disabled: disabled)
        }
        var watch = SilenceWatch(threshold: 3600)
        // The first look learns who is silent already.
        #expect(watch.look([device("a", seen: 0), device("b", seen: 9000)], now: 10_000).isEmpty)
        let fleet = (0..<5000).map { device("d-\($0)", seen: 9000, apps: ["kiosk", "signage"]) } + [device("a", seen: 0)]
        #expect(watch.look(fleet, now: 10_000).isEmpty)
        let events = watch.look(fleet, now: 12_601)
        #expect(events.map(\.apps) == [["kiosk"], ["signage"]])
        #expect(events[0].data["newlySilent"] == .number(.integer(5000)) && events[0].data["silent"] == .number(.integer(5001)))
        #expect(watch.look(fleet, now: 12_700).isEmpty)
        // Seen again, then silent again: told again; a disabled device is never silent.
        var back = fleet
        back[0] = device("d-0", seen: 12_700, apps: ["kiosk"])
        back.append(device("off", seen: 0, disabled: true))
        #expect(watch.look(back, now: 12_701).isEmpty)
        #expect(watch.look(fleet, now: 12_702).map(\.data["newlySilent"]) == [.number(.integer(1)), .number(.integer(1))])
    }
}
