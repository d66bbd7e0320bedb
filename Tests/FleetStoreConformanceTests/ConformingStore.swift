import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import Logging
import Testing

/// The stores the conformance suite runs against: the two databases the server runs on, and
/// the in-memory store the service tests use.
enum ConformingStore: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case sqlite
    case postgres
    case memory

    var testDescription: String { rawValue }
}

/// A quiet logger for postgres-nio's background messages.
let storeTestLogger = Logger(label: "store-test") { _ in SwiftLogNoOpLogHandler() }

/// A fresh, empty store of `kind`: a SQLite file in a new temporary folder, a new database
/// in the test process's PostgreSQL cluster, or a new in-memory store.
func withStore(_ kind: ConformingStore, _ body: (any SettingsStore) async throws -> Void) async throws {
    switch kind {
    case .sqlite:
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await body(try SQLiteStore(path: folder.appendingPathComponent("fleet.sqlite").path))
    case .postgres:
        let url = try await PostgresCluster.shared().makeDatabase()
        try await PostgresStore.with(try PostgresLocation(url: url), logger: storeTestLogger) { store in try await body(store) }
    case .memory:
        try await body(InMemoryStore())
    }
}

/// Two stores on one new PostgreSQL database, as two server instances have them.
func withTwoPostgresInstances(_ body: (PostgresStore, PostgresStore, String) async throws -> Void) async throws {
    let url = try await PostgresCluster.shared().makeDatabase()
    let location = try PostgresLocation(url: url)
    try await PostgresStore.with(location, logger: storeTestLogger) { first in
        try await PostgresStore.with(location, logger: storeTestLogger) { second in try await body(first, second, url) }
    }
}
