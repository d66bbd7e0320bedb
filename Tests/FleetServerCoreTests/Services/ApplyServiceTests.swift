import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Several scopes' whole values as one change (`POST /v1/admin/apps/{app}/apply`), in process.
@Suite("Services: apply")
struct ApplyServiceTests {
    func newest(_ harness: ServiceHarness) async throws -> Int64 {
        try await harness.admin.scopes(app: "kiosk").newest
    }

    @Test("the scopes that change are written as one history entry; the same request again writes nothing")
    func oneEntry() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        try await harness.set(["volume": 3, "title": "Lobby"])
        let base = try await newest(harness)
        let request = ApplyRequest(
            scopes: [
                .init(scope: "app", values: ["volume": 4, "title": "Lobby"]), .init(scope: "group:lobby", values: ["volume": 6]),
                .init(scope: "group:empty", values: [:]),
            ], base: base, message: "from git")
        let dry = try await harness.admin.apply(app: "kiosk", request, actor: "test", dryRun: true)
        #expect(
            dry.dryRun && dry.entry == nil
                && dry.changed == [.init(scope: "app", keys: ["volume"]), .init(scope: "group:lobby", keys: ["volume"])])
        #expect(try await newest(harness) == base, "a dry run writes nothing")
        let written = try await harness.admin.apply(app: "kiosk", request, actor: "test", dryRun: false)
        #expect(written.entry == base + 1 && written.changed.count == 2)
        let entry = try #require(try await harness.admin.history(app: "kiosk", scope: nil, limit: 1).entries.last)
        #expect(entry.message == "from git" && entry.scopes.map(\.scope) == ["app", "group:lobby"])
        // The same values again: nothing written (base is stale now but unchecked without it).
        let again = try await harness.admin.apply(
            app: "kiosk", ApplyRequest(scopes: request.scopes), actor: "test", dryRun: false)
        let after = try await newest(harness)
        #expect(again.changed.isEmpty && again.entry == nil && after == base + 1)
        // An empty object removes a scope's values.
        let removed = try await harness.admin.apply(
            app: "kiosk", ApplyRequest(scopes: [.init(scope: "group:lobby", values: [:])]), actor: "test", dryRun: false)
        #expect(removed.changed == [.init(scope: "group:lobby", keys: ["volume"])])
        #expect(try await harness.admin.scopes(app: "kiosk").scopes.map(\.scope) == ["app"])
    }

    @Test("a scope that makes devices' settings invalid refuses the whole change with 422; a stale base is 409")
    func allOrNothing() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        _ = try await harness.enroll(groups: ["lobby"])
        let base = try await newest(harness)
        let invalid = await serviceError {
            try await harness.admin.apply(
                app: "kiosk",
                ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 4]), .init(scope: "group:lobby", values: ["volume": 11])]),
                actor: "test", dryRun: false)
        }
        #expect(invalid?.code == .invalidValues && invalid?.details.contains { $0.pointer.contains("volume") } == true)
        #expect(try await harness.admin.values(app: "kiosk", scope: .app).values.isEmpty)
        try await harness.set(["title": "meanwhile"])
        let stale = await serviceError {
            try await harness.admin.apply(
                app: "kiosk", ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 4])], base: base), actor: "test", dryRun: true)
        }
        #expect(stale?.status == .conflict && stale?.code == .concurrentWrite)
    }

    @Test("a kept place keeps the stored secret (left out when none is stored); a sent secret is compared with the stored one")
    func keptSecrets() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let keep = ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 2, "pin": "********"], keep: ["/pin"])])
        let unset = try await harness.admin.apply(app: "kiosk", keep, actor: "test", dryRun: false)
        #expect(unset.changed == [.init(scope: "app", keys: ["volume"])])
        try await harness.set(["pin": "1234"])
        let kept = try await harness.admin.apply(app: "kiosk", keep, actor: "test", dryRun: true)
        #expect(kept.changed.isEmpty)
        let same = ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 2, "pin": "1234"])])
        #expect(try await harness.admin.apply(app: "kiosk", same, actor: "test", dryRun: true).changed.isEmpty)
        let other = ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 2, "pin": "5678"])])
        #expect(
            try await harness.admin.apply(app: "kiosk", other, actor: "test", dryRun: true).changed == [.init(scope: "app", keys: ["pin"])])
        // What is shown of the scopes is masked.
        #expect(try await harness.admin.scopes(app: "kiosk").scopes.first?.values["pin"] == SettingsValues.mask)
    }

    @Test("with a rollout, a change of one scope is staged; of several scopes it is refused with 400")
    func staged() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        _ = try await harness.enroll()
        let waves = ApplyRequest.Staging(waves: [.share(basisPoints: 5000), .everyone])
        let two = await serviceError {
            try await harness.admin.apply(
                app: "kiosk",
                ApplyRequest(
                    scopes: [.init(scope: "app", values: ["volume": 4]), .init(scope: "group:lobby", values: ["volume": 6])], rollout: waves
                ),
                actor: "test", dryRun: false)
        }
        #expect(two?.status == .badRequest)
        let one = try await harness.admin.apply(
            app: "kiosk", ApplyRequest(scopes: [.init(scope: "app", values: ["volume": 4])], rollout: waves), actor: "test", dryRun: false)
        #expect(one.rollout != nil && one.entry == nil)
        #expect(try await harness.rollouts.rolloutStatus(app: "kiosk").patch == ["volume": 4])
    }
}
