import FleetClient
import FleetConsole
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import HTTPTypes
import Testing

@Suite("The console's write and what its form was drawn from")
struct ConsoleWritePreconditionTests {
    @Test(
        "a form drawn before another change is refused by the write itself (checked in the write section), and one drawn from the current values is written",
        arguments: StoreKind.allCases)
    func precondition(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let drawn = SettingsForm.drawnDigest(of: try await server.service.admin.scopeValues(app: "kiosk", scope: .app))
            // Another admin's change after the form was drawn.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Theirs"])
            let unchangedSinceDrawn: @Sendable (ScopeValuesView) throws -> Void = { current in
                guard SettingsForm.drawnDigest(of: current) == drawn else { throw ServiceError(409, .changedSinceDrawn, "changed") }
            }
            let refused = await #expect(throws: ServiceError.self) {
                try await server.service.admin.patchValues(
                    app: "kiosk", scope: .app, patch: ["volume": 3], actor: "console test", precondition: unchangedSinceDrawn)
            }
            #expect(refused?.code == .changedSinceDrawn)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Theirs"], "nothing written")

            let current = SettingsForm.drawnDigest(of: try await server.service.admin.scopeValues(app: "kiosk", scope: .app))
            _ = try await server.service.admin.patchValues(app: "kiosk", scope: .app, patch: ["volume": 3], actor: "console test") {
                view in
                guard SettingsForm.drawnDigest(of: view) == current else { throw ServiceError(409, .changedSinceDrawn, "changed") }
            }
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Theirs", "volume": 3])
        }
    }
}
