import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStoreSQLite
import FleetTestSupport
import FleetWebhooks
import Foundation
import Testing

@Suite("Store conformance: batches and moving a fleet")
struct SnapshotAndBatchTests {
    /// A store with one of everything it can hold, written through the contract.
    static func fill(_ store: any SettingsStore) async throws {
        try await store.addWebhookSubscription(
            WebhookSubscription(
                id: "wh_1", url: "https://hooks.example.com/fleet", events: [.metadataStored, .deviceEnrolled], apps: [],
                secrets: [.init(secret: .generate(), until: nil), .init(secret: .generate(), until: 5_000)], createdAt: 1, createdBy: "ada")
        )
        #expect(
            try await store.replaceMetadata(
                StoredMetadata(app: "kiosk", version: 3, document: #"{"app":"kiosk","version":3}"#), expectedVersion: nil))
        try await store.setValues(["volume": 3], app: "kiosk", scope: .app)
        try await store.setValues(["volume": 5, "title": "Lobby ✓"], app: "kiosk", scope: .group("lobby"))
        try await store.addEnrollmentToken(
            EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 3, apps: ["kiosk"], groups: ["lobby"]))
        let attempt = EnrollmentAttempt(tokenHash: "t", requestID: "request-1", now: 10, retryWindow: 100)
        _ = try await store.enroll(attempt, newTokenHash: "h-1") { apps, groups in
            Device(id: "d-1", tokenHash: "h-1", apps: apps, groups: groups, enrolledAt: 10, lastSeenAt: 10)
        }
        try await store.addDevice(
            Device(
                id: "d-2", tokenHash: "h-2", apps: ["kiosk"], groups: [], enrolledAt: 11, disabled: true, pendingTokenHash: "p-2",
                rotationRequested: true))
        try await store.setValues(["volume": 9], app: "kiosk", scope: .device("d-1"))
        _ = try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 0xFFFF_0000_0000_0001)
        _ = try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 7)
        try await store.recordStatus(
            StatusReport(revision: 2, schemaVersion: 3, state: .error, message: "/volume: must be ≤ 10", source: .app), app: "kiosk",
            deviceID: "d-1", at: 12)
        _ = try await store.updateDeviceInfo(id: "d-1", at: 13) { _ in ["os": ["id": "debian"], "apps": ["kiosk": ["version": "2"]]] }
        _ = try await store.defineGroup(GroupDefinition(name: "debian", conditions: [try DeviceInfoFilter(parsing: "os.id~^deb")]))
        try await store.setAgentPolicy(AgentPolicy(logLevel: "debug", pollInterval: 120), scope: .group("lobby"))
        try await store.setAgentPolicy(AgentPolicy(statusReports: .brief), scope: .device("d-2"))
        // The first message delivered; the enrollment's claimed by an instance (a claim does not move).
        let claimed = try #require(try await store.claimOutboxEntries(now: 10, claimedUntil: 70, limit: 1).first)
        #expect(try await store.recordOutboxAttempt(claimed.entry.after(.delivered(status: 204), now: 11, fraction: 0.5), claimedUntil: 70))
        #expect(try await store.claimOutboxEntries(now: 12, claimedUntil: 72, limit: 1).count == 1)
    }

    @Test(
        "a snapshot restored into an empty store of either kind reads back the same, retries of enrollments included",
        arguments: ConformingStore.allCases)
    func snapshotRoundTrip(kind: ConformingStore) async throws {
        for source in ConformingStore.allCases {
            try await withStore(source) { (original: any SettingsStore) async throws in
                try await Self.fill(original)
                let snapshot = try await original.snapshot()
                #expect(Array(snapshot.counts.map(\.value)) == [1, 3, 2, 1, 1, 1, 4, 0, 1, 2, 0, 0, 0, 1, 2, 1], "from \(source)")
                #expect(snapshot.outbox.map(\.state) == [.delivered, .pending] && snapshot.webhookSubscriptions[0].secrets.count == 2)
                try await withStore(kind) { (copy: any SettingsStore) async throws in
                    try await copy.restore(snapshot)
                    #expect(try await copy.snapshot().sorted() == snapshot.sorted(), "from \(source) to \(kind)")
                    // What the copy holds works: the enrollment's retry finds its device, spending no use.
                    let retry = EnrollmentAttempt(tokenHash: "t", requestID: "request-1", now: 20, retryWindow: 100)
                    let outcome = try await copy.enroll(retry, newTokenHash: "h-again") { _, _ in
                        Device(id: "d-new", tokenHash: "h-again", apps: [], groups: [], enrolledAt: 20)
                    }
                    guard case .enrolled(let device) = outcome else {
                        Issue.record("the retry was refused: \(outcome)")
                        return
                    }
                    #expect(device.id == "d-1")
                    #expect(try await copy.enrollmentToken(hash: "t")?.usesLeft == 2)
                    #expect(try await copy.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 8).revision == 3)
                }
            }
        }
    }

    @Test("a restore into a store that holds a fleet is refused and writes nothing", arguments: ConformingStore.allCases)
    func restoreRefusesNonEmpty(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await Self.fill(store)
            var other = StoreSnapshot()
            other.metadata = [StoredMetadata(app: "signage", version: 1, document: "{}")]
            await #expect(throws: StoreNotEmpty.self) { try await store.restore(other) }
            #expect(try await store.metadata(app: "signage") == nil)
        }
    }

    @Test(
        "batched writes: revisions in order within one batch, the later of two reports stays, last-seen times",
        arguments: ConformingStore.allCases)
    func batches(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            for id in ["d-1", "d-2"] {
                try await store.addDevice(Device(id: id, tokenHash: "h-" + id, apps: ["kiosk"], groups: [], enrolledAt: 1))
            }
            let states = try await store.advanceRevisions([
                RevisionAdvance(app: "kiosk", deviceID: "d-2", fingerprint: 1),
                RevisionAdvance(app: "kiosk", deviceID: "d-1", fingerprint: 1),
                RevisionAdvance(app: "kiosk", deviceID: "d-2", fingerprint: 2),
                RevisionAdvance(app: "kiosk", deviceID: "d-2", fingerprint: 2),
            ])
            #expect(states.map(\.revision) == [1, 1, 2, 2])
            let first = StatusReport(revision: 1, schemaVersion: 1, state: .error, message: "first", source: .agent)
            let second = StatusReport(revision: 2, schemaVersion: 1, state: .applied, source: .agent)
            _ = try await store.recordStatuses([
                StatusRecord(report: first, app: "kiosk", deviceID: "d-2", time: 5),
                StatusRecord(report: second, app: "kiosk", deviceID: "d-2", time: 6),
            ])
            #expect(try await store.latestStatus(app: "kiosk", deviceID: "d-2")?.report == second)
            _ = try await store.touch([DeviceSeen(deviceID: "d-1", time: 40), DeviceSeen(deviceID: "d-2", time: 41)])
            #expect(try await store.devices().map(\.lastSeenAt) == [40, 41])
        }
    }
}
