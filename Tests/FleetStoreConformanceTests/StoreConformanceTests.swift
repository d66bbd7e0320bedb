import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import Testing

/// The store contract (`SettingsStore`), the same tests run against SQLite and against a real
/// PostgreSQL (a throw-away cluster, a database per test).
@Suite("Store conformance")
struct StoreConformanceTests {
    @Test("metadata is replaced only from the expected version (compare and set)", arguments: ConformingStore.allCases)
    func metadataCompareAndSet(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            let first = StoredMetadata(app: "kiosk", version: 1, document: #"{"app":"kiosk","version":1}"#)
            #expect(try await store.replaceMetadata(first, expectedVersion: nil))
            #expect(try await store.replaceMetadata(first, expectedVersion: nil) == false)
            let second = StoredMetadata(app: "kiosk", version: 2, document: #"{"app":"kiosk","version":2}"#)
            #expect(try await store.replaceMetadata(second, expectedVersion: 3) == false)
            #expect(try await store.replaceMetadata(second, expectedVersion: 1))
            #expect(try await store.metadata(app: "kiosk") == second)
            #expect(try await store.metadata(app: "other") == nil)
        }
    }

    @Test("a report's detail is kept with the latest report and in the recent ones", arguments: ConformingStore.allCases)
    func reportDetail(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h-d-1", apps: ["kiosk"], groups: [], enrolledAt: 0))
            let restored = StatusReport(revision: 3, schemaVersion: 1, state: .applied, source: .agent, detail: .restoredAfterLocalEdit)
            _ = try await store.recordStatuses([StatusRecord(report: restored, app: "kiosk", deviceID: "d-1", time: 10)])
            #expect(try await store.latestStatus(app: "kiosk", deviceID: "d-1")?.report == restored)
            #expect(try await store.latestStatuses(app: "kiosk")["d-1"]?.report.detail == .restoredAfterLocalEdit)
            #expect(try await store.recentStatuses(deviceID: "d-1").map(\.report) == [restored])
            // The next report, without one, replaces it.
            let plain = StatusReport(revision: 4, schemaVersion: 1, state: .applied, source: .agent)
            _ = try await store.recordStatuses([StatusRecord(report: plain, app: "kiosk", deviceID: "d-1", time: 11)])
            #expect(try await store.latestStatus(app: "kiosk", deviceID: "d-1")?.report.detail == nil)
            #expect(try await store.recentStatuses(deviceID: "d-1").map(\.report.detail) == [nil, .restoredAfterLocalEdit])
        }
    }

    @Test(
        "recent reports: one per revision and source for the last revisions of each app, newest first; gone with the device",
        arguments: ConformingStore.allCases)
    func recentStatuses(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            for id in ["d-1", "d-2"] {
                try await store.addDevice(Device(id: id, tokenHash: "h-" + id, apps: ["kiosk"], groups: [], enrolledAt: 0))
            }
            var time: Int64 = 100
            func report(_ revision: Int64, _ state: StatusReport.State, _ source: StatusReport.Source, device: String = "d-1")
                -> StatusRecord
            {
                time += 1
                return StatusRecord(
                    report: StatusReport(revision: revision, schemaVersion: 1, state: state, message: "r\(revision)", source: source),
                    app: "kiosk", deviceID: device, time: time)
            }
            // Revisions 1–7 from the agent, the app's ack of 7, a second agent report of 7 (it replaces
            // the first), and another device's report, in two batches.
            _ = try await store.recordStatuses((1...4).map { report($0, .applied, .agent) })
            _ = try await store.recordStatuses(
                (5...7).map { report($0, .applied, .agent) } + [
                    report(7, .error, .app), report(7, .error, .agent), report(1, .applied, .agent, device: "d-2"),
                ])
            let recent = try await store.recentStatuses(deviceID: "d-1")
            #expect(recent.map(\.report.revision) == [7, 7, 6, 5, 4, 3])
            #expect(recent.map(\.report.source) == [.agent, .app, .agent, .agent, .agent, .agent])
            #expect(recent.first?.report.state == .error && recent.first?.time == 109)
            #expect(recent.allSatisfy { $0.app == "kiosk" && $0.deviceID == "d-1" })
            #expect(try await store.latestStatus(app: "kiosk", deviceID: "d-1")?.report.source == .agent)
            #expect(try await store.deleteDevice(id: "d-1"))
            #expect(try await store.recentStatuses(deviceID: "d-1").isEmpty)
            #expect(try await store.recentStatuses(deviceID: "d-2").count == 1)
        }
    }

    @Test("every app's metadata, by app id in byte order", arguments: ConformingStore.allCases)
    func allMetadata(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            #expect(try await store.allMetadata().isEmpty)
            for app in ["signage", "kiosk", "Z-app", "kiosk-2"] {
                #expect(try await store.replaceMetadata(StoredMetadata(app: app, version: 1, document: "{}"), expectedVersion: nil))
            }
            #expect(try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 4, document: "{\"v\":4}"), expectedVersion: 1))
            let all = try await store.allMetadata()
            #expect(all.map(\.app) == ["Z-app", "kiosk", "kiosk-2", "signage"])
            #expect(all[1] == StoredMetadata(app: "kiosk", version: 4, document: "{\"v\":4}"))
        }
    }

    @Test("values per scope; an empty object clears the scope", arguments: ConformingStore.allCases)
    func scopedValues(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.setValues(["volume": 3], app: "kiosk", scope: .group("lobby"))
            try await store.setValues(["volume": 9], app: "kiosk", scope: .device("d-1"))
            #expect(try await store.values(app: "kiosk", scope: .group("lobby")) == ["volume": 3])
            #expect(try await store.values(app: "kiosk", scope: .group("airport")) == [:])
            try await store.setValues([:], app: "kiosk", scope: .group("lobby"))
            #expect(try await store.values(app: "kiosk", scope: .group("lobby")) == [:])
            #expect(try await store.values(app: "kiosk", scope: .device("d-1")) == ["volume": 9])
        }
    }

    @Test("devices by token hash and id; a duplicate token hash is refused; last seen is recorded", arguments: ConformingStore.allCases)
    func devices(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            let device = Device(id: "d-1", tokenHash: "h1", apps: ["kiosk"], groups: ["lobby", "north"], enrolledAt: 100)
            try await store.addDevice(device)
            #expect(try await store.device(tokenHash: "h1") == device)
            await #expect(throws: (any Error).self) {
                try await store.addDevice(Device(id: "d-2", tokenHash: "h1", apps: [], groups: [], enrolledAt: 101))
            }
            try await store.touch(deviceID: "d-1", at: 150)
            #expect(try await store.device(id: "d-1")?.lastSeenAt == 150)
            #expect(try await store.devices().map(\.id) == ["d-1"])
        }
    }

    @Test(
        "a device's apps and groups change, it is disabled and deleted with its values, revisions and reports",
        arguments: ConformingStore.allCases)
    func deviceChanges(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h1", apps: ["kiosk"], groups: ["lobby"], enrolledAt: 100))
            let changed = try await store.updateDevice(id: "d-1", DeviceChange(apps: ["kiosk", "signage"], disabled: true))
            #expect(changed?.apps == ["kiosk", "signage"] && changed?.groups == ["lobby"] && changed?.disabled == true)
            #expect(try await store.device(id: "d-1") == changed)
            #expect(try await store.updateDevice(id: "d-9", DeviceChange(disabled: true)) == nil)
            try await store.setValues(["volume": 3], app: "kiosk", scope: .device("d-1"))
            _ = try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 1)
            try await store.recordStatus(
                StatusReport(revision: 1, schemaVersion: 1, state: .applied, source: .agent), app: "kiosk", deviceID: "d-1", at: 1)
            #expect(try await store.deleteDevice(id: "d-1"))
            #expect(try await store.device(id: "d-1") == nil)
            #expect(try await store.device(tokenHash: "h1") == nil)
            #expect(try await store.values(app: "kiosk", scope: .device("d-1")).isEmpty)
            #expect(try await store.revisions(app: "kiosk").isEmpty)
            #expect(try await store.latestStatuses(app: "kiosk").isEmpty)
            #expect(try await !store.deleteDevice(id: "d-1"))
        }
    }

    @Test("a rotated token: both work until the new one is promoted, then only the new one", arguments: ConformingStore.allCases)
    func tokenRotation(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addDevice(
                Device(id: "d-1", tokenHash: "old", apps: ["kiosk"], groups: [], enrolledAt: 100, rotationRequested: true))
            try await store.setPendingToken(deviceID: "d-1", hash: "lost")
            try await store.setPendingToken(deviceID: "d-1", hash: "new")  // the first answer was lost: asked again
            #expect(try await store.device(tokenHash: "old")?.id == "d-1")
            #expect(try await store.device(tokenHash: "new")?.id == "d-1")
            #expect(try await store.device(tokenHash: "lost") == nil)
            // A request made with a pending token that a newer rotation replaced promotes nothing.
            #expect(try await store.promotePendingToken(deviceID: "d-1", hash: "lost")?.tokenHash == "old")
            let promoted = try await store.promotePendingToken(deviceID: "d-1", hash: "new")
            #expect(promoted?.tokenHash == "new" && promoted?.pendingTokenHash == nil && promoted?.rotationRequested == false)
            #expect(try await store.device(tokenHash: "old") == nil)
        }
    }

    static func make(_ id: String) -> @Sendable ([String], [String]) -> Device {
        { apps, groups in Device(id: id, tokenHash: "h-" + id, apps: apps, groups: groups, enrolledAt: 5) }
    }

    static func attempt(_ token: String, _ request: String, now: Int64) -> EnrollmentAttempt {
        EnrollmentAttempt(tokenHash: token, requestID: request, now: now, retryWindow: 100)
    }

    @Test(
        "an enrollment token enrolls a device into its apps and groups until it expires or its uses run out",
        arguments: ConformingStore.allCases)
    func enrollmentTokens(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addEnrollmentToken(
                EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 2, apps: ["kiosk"], groups: ["lobby"]))
            let first = try await store.enroll(Self.attempt("t", "r1", now: 999), newTokenHash: "h-d-1", makeDevice: Self.make("d-1"))
            #expect(first == .enrolled(Device(id: "d-1", tokenHash: "h-d-1", apps: ["kiosk"], groups: ["lobby"], enrolledAt: 5)))
            #expect(try await store.device(id: "d-1")?.groups == ["lobby"])
            #expect(
                try await store.enroll(Self.attempt("t", "r2", now: 1_000), newTokenHash: "x", makeDevice: Self.make("d-x")) == .expired)
            #expect(
                try await store.enroll(Self.attempt("t", "r3", now: 10), newTokenHash: "h-d-2", makeDevice: Self.make("d-2"))
                    == .enrolled(Device(id: "d-2", tokenHash: "h-d-2", apps: ["kiosk"], groups: ["lobby"], enrolledAt: 5)))
            #expect(try await store.enroll(Self.attempt("t", "r4", now: 10), newTokenHash: "y", makeDevice: Self.make("d-y")) == .usedUp)
            #expect(
                try await store.enroll(Self.attempt("unknown", "r5", now: 10), newTokenHash: "z", makeDevice: Self.make("d-z")) == .unknown)
            #expect(try await store.devices().map(\.id) == ["d-1", "d-2"])
            #expect(try await store.enrollmentTokens().map(\.usesLeft) == [0])
            #expect(try await store.enrollmentToken(hash: "t")?.id == "et-1")
            #expect(try await store.deleteEnrollmentToken(id: "et-1"))
            #expect(try await store.enrollmentToken(hash: "t") == nil)
            #expect(try await !store.deleteEnrollmentToken(id: "et-1"))
        }
    }

    @Test(
        "a retry with the same request id gets the same device with a new token, spending no use, within the window",
        arguments: ConformingStore.allCases)
    func idempotentEnrollment(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addEnrollmentToken(
                EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 1, apps: ["kiosk"], groups: []))
            let first = try await store.enroll(Self.attempt("t", "request-1", now: 5), newTokenHash: "h-d-1", makeDevice: Self.make("d-1"))
            guard case .enrolled(let device) = first else {
                Issue.record("not enrolled: \(first)")
                return
            }
            // The answer was lost; the agent retries with the same request id: the token is used up, yet
            // the same device comes back with the retry's token, and the first token no longer works.
            let retry = try await store.enroll(
                Self.attempt("t", "request-1", now: 50), newTokenHash: "h-retry", makeDevice: Self.make("d-2"))
            #expect(retry == .enrolled(Device(id: device.id, tokenHash: "h-retry", apps: ["kiosk"], groups: [], enrolledAt: 5)))
            #expect(try await store.device(tokenHash: "h-d-1") == nil)
            #expect(try await store.devices().map(\.id) == ["d-1"])
            // Another request id is another device: refused, the token is used up.
            #expect(
                try await store.enroll(Self.attempt("t", "request-2", now: 50), newTokenHash: "q", makeDevice: Self.make("d-3")) == .usedUp)
            // Outside the window the request id is forgotten.
            #expect(
                try await store.enroll(Self.attempt("t", "request-1", now: 500), newTokenHash: "w", makeDevice: Self.make("d-4")) == .usedUp
            )
        }
    }

    @Test("concurrent enrollments never use a token more often than allowed", arguments: ConformingStore.allCases)
    func enrollmentRace(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addEnrollmentToken(
                EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 5, apps: ["kiosk"], groups: []))
            let successes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        let outcome = try await store.enroll(
                            Self.attempt("t", "request-\(index)", now: 1), newTokenHash: "h-\(index)", makeDevice: Self.make("d-\(index)"))
                        return outcome != .usedUp
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(successes == 5)
            #expect(try await store.devices().count == 5)
        }
    }

    @Test(
        "revisions and the latest status report per device and app, fingerprints above 2^63 included", arguments: ConformingStore.allCases)
    func revisionsAndStatus(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h", apps: ["kiosk"], groups: [], enrolledAt: 1))
            let first = try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 0xF000_0000_0000_0001)
            #expect(first == RevisionState(revision: 1, fingerprint: 0xF000_0000_0000_0001))
            #expect(try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 0xF000_0000_0000_0001) == first)
            let second = try await store.advanceRevision(app: "kiosk", deviceID: "d-1", fingerprint: 42)
            #expect(second == RevisionState(revision: 2, fingerprint: 42))
            #expect(try await store.revision(app: "kiosk", deviceID: "d-1") == second)
            #expect(try await store.revisions(app: "kiosk") == ["d-1": second])
            #expect(try await store.revision(app: "other", deviceID: "d-1") == nil)

            let earlier = StatusReport(revision: 6, schemaVersion: 2, state: .error, message: "/duration: bad", source: .agent)
            let later = StatusReport(revision: 7, schemaVersion: 2, state: .applied, source: .app)
            try await store.recordStatus(earlier, app: "kiosk", deviceID: "d-1", at: 10)
            try await store.recordStatus(later, app: "kiosk", deviceID: "d-1", at: 20)
            let latest = try await store.latestStatus(app: "kiosk", deviceID: "d-1")
            #expect(latest?.report == later)
            #expect(latest?.receivedAt == 20)
            #expect(try await store.latestStatuses(app: "kiosk")["d-1"]?.report == later)
            #expect(try await store.latestStatuses(app: "other").isEmpty)
        }
    }
}
