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
}
