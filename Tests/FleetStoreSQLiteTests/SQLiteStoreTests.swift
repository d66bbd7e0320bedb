import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStoreSQLite
import Foundation
import Testing

/// A store on a real SQLite file in a fresh temporary folder.
func withStore(_ body: (SQLiteStore, String) async throws -> Void) async throws {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-store-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: folder) }
    let path = folder.appendingPathComponent("fleet.sqlite").path
    try await body(try SQLiteStore(path: path), path)
}

@Suite("SQLite store")
struct SQLiteStoreTests {
    @Test("the database is in WAL mode and survives reopening, migrations applied once")
    func walAndReopen() async throws {
        try await withStore { (store: SQLiteStore, path: String) async throws in
            #expect(try await store.journalMode() == "wal")
            try await store.setValues(["volume": 3], app: "kiosk", scope: .app)
            let reopened = try SQLiteStore(path: path)
            #expect(try await reopened.values(app: "kiosk", scope: .app) == ["volume": 3])
        }
    }

    @Test("metadata is replaced only from the expected version (compare and set)")
    func metadataCompareAndSet() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
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

    @Test("values per scope; an empty object clears the scope")
    func scopedValues() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
            try await store.setValues(["volume": 3], app: "kiosk", scope: .group("lobby"))
            try await store.setValues(["volume": 9], app: "kiosk", scope: .device("d-1"))
            #expect(try await store.values(app: "kiosk", scope: .group("lobby")) == ["volume": 3])
            #expect(try await store.values(app: "kiosk", scope: .group("airport")) == [:])
            try await store.setValues([:], app: "kiosk", scope: .group("lobby"))
            #expect(try await store.values(app: "kiosk", scope: .group("lobby")) == [:])
            #expect(try await store.values(app: "kiosk", scope: .device("d-1")) == ["volume": 9])
        }
    }

    @Test("devices by token hash and id; a duplicate token hash is refused; last seen is recorded")
    func devices() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
            let device = Device(id: "d-1", tokenHash: "h1", groups: ["lobby", "north"], enrolledAt: 100)
            try await store.addDevice(device)
            #expect(try await store.device(tokenHash: "h1") == device)
            await #expect(throws: (any Error).self) {
                try await store.addDevice(Device(id: "d-2", tokenHash: "h1", groups: [], enrolledAt: 101))
            }
            try await store.touch(deviceID: "d-1", at: 150)
            #expect(try await store.device(id: "d-1")?.lastSeenAt == 150)
            #expect(try await store.devices().map(\.id) == ["d-1"])
        }
    }

    @Test("an enrollment token works until it expires or its uses run out")
    func enrollmentTokens() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
            try await store.addEnrollmentToken(EnrollmentTokenRecord(hash: "t", expiresAt: 1_000, usesLeft: 2, groups: ["lobby"]))
            #expect(try await store.consumeEnrollmentToken(hash: "t", now: 999) == ["lobby"])
            #expect(try await store.consumeEnrollmentToken(hash: "t", now: 1_000) == nil)  // expired
            #expect(try await store.consumeEnrollmentToken(hash: "t", now: 10) == ["lobby"])
            #expect(try await store.consumeEnrollmentToken(hash: "t", now: 10) == nil)  // used up
            #expect(try await store.consumeEnrollmentToken(hash: "unknown", now: 10) == nil)
        }
    }

    @Test("concurrent enrollments never use a token more often than allowed")
    func enrollmentRace() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
            try await store.addEnrollmentToken(EnrollmentTokenRecord(hash: "t", expiresAt: 1_000, usesLeft: 5, groups: []))
            let successes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<20 { group.addTask { try await store.consumeEnrollmentToken(hash: "t", now: 1) != nil } }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(successes == 5)
        }
    }

    @Test("revisions and the latest status report per device and app, fingerprints above 2^63 included")
    func revisionsAndStatus() async throws {
        try await withStore { (store: SQLiteStore, _: String) async throws in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h", groups: [], enrolledAt: 1))
            let state = RevisionState(revision: 7, fingerprint: 0xF000_0000_0000_0001)
            try await store.setRevision(state, app: "kiosk", deviceID: "d-1")
            #expect(try await store.revision(app: "kiosk", deviceID: "d-1") == state)
            #expect(try await store.revision(app: "other", deviceID: "d-1") == nil)

            let first = StatusReport(revision: 6, schemaVersion: 2, state: .error, message: "/duration: bad", source: .agent)
            let second = StatusReport(revision: 7, schemaVersion: 2, state: .applied, source: .app)
            try await store.recordStatus(first, app: "kiosk", deviceID: "d-1", at: 10)
            try await store.recordStatus(second, app: "kiosk", deviceID: "d-1", at: 20)
            let latest = try await store.latestStatus(app: "kiosk", deviceID: "d-1")
            #expect(latest?.report == second)
            #expect(latest?.receivedAt == 20)
        }
    }
}
