import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Metadata, values, explanations and the history, in process.
@Suite("Services: settings admin")
struct SettingsAdminServiceTests {
    @Test("metadata is stored with a higher version only: the same or a lower one is 409 version-not-increased")
    func metadataVersions() async throws {
        let harness = ServiceHarness()
        let first = try await harness.putKiosk(version: 2)
        #expect(first.version == 2 && first.previousVersion == nil)
        for version in [2, 1] {
            let error = await serviceError { try await harness.putKiosk(version: version) }
            #expect(error?.code == .versionNotIncreased)
        }
        #expect(try await harness.putKiosk(version: 3).previousVersion == 2)
    }

    @Test("metadata that is not JSON, or names another app, is refused with 400")
    func badMetadata() async throws {
        let harness = ServiceHarness()
        let notJSON = await serviceError {
            try await harness.admin.putMetadata(app: "kiosk", document: Array("{".utf8), force: false, actor: "test")
        }
        #expect(notJSON?.status == .badRequest)
        let other = await serviceError {
            try await harness.admin.putMetadata(app: "signage", document: ServiceHarness.kiosk(version: 1), force: false, actor: "test")
        }
        #expect(other?.code == .appMismatch)
    }

    @Test("a version that makes stored values invalid is refused naming them, unless forced")
    func versionBreaksValues() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk(version: 1)
        try await harness.set(["volume": 10])
        let error = await serviceError { try await harness.putKiosk(version: 3) }
        #expect(error?.code == .valuesInvalid && error?.details.first?.pointer.contains("volume") == true)
        #expect(try await harness.putKiosk(version: 3, force: true).version == 3)
    }

    @Test("a preview says what storing a version would break, storing nothing")
    func preview() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk(version: 2)
        try await harness.set(["volume": 10])
        let preview = try await harness.admin.previewMetadata(app: "kiosk", document: ServiceHarness.kiosk(version: 3))
        #expect(preview.versionProblem == nil && !preview.breaks.isEmpty && preview.stored?.version == 2)
        #expect(try await harness.admin.previewMetadata(app: "kiosk", document: ServiceHarness.kiosk(version: 1)).versionProblem != nil)
        #expect(try await harness.admin.currentMetadata(app: "kiosk")?.version == 2)
    }

    @Test("values for an app without metadata are 404 unknown-app; at an unknown device 404 unknown-device")
    func unknowns() async throws {
        let harness = ServiceHarness()
        let app = await serviceError { try await harness.admin.values(app: "kiosk", scope: .app) }
        #expect(app?.code == .unknownApp)
        try await harness.putKiosk()
        let device = await serviceError { try await harness.set(["volume": 1], at: .device("d-nobody")) }
        #expect(device?.code == .unknownDevice)
    }

    @Test("a patch that makes a device's settings invalid is 422, naming the device; nothing is written")
    func invalidValues() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        let error = await serviceError { try await harness.set(["volume": 11]) }
        #expect(error?.code == .invalidValues && error?.details.contains { $0.message.contains(device.id) } == true)
        #expect(try await harness.admin.values(app: "kiosk", scope: .app).values.isEmpty)
    }

    @Test("a merge patch sets and removes (null) values at a scope")
    func mergePatch() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        try await harness.set(["volume": 7, "title": "Hi"])
        let after = try await harness.set(["title": nil])
        #expect(after.values == ["volume": 7] && after.scope == "app")
    }

    @Test("one value inside a setting, by key path, set and removed")
    func setValue() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let set = try await harness.admin.setValue(app: "kiosk", scope: .app, keyPath: "volume", to: 4, actor: "test")
        #expect(set.values == ["volume": 4])
        let removed = try await harness.admin.setValue(app: "kiosk", scope: .app, keyPath: "volume", to: nil, actor: "test")
        #expect(removed.values.isEmpty)
        let missing = await serviceError {
            try await harness.admin.setValue(app: "kiosk", scope: .app, keyPath: "volume", to: nil, actor: "test")
        }
        #expect(missing?.code == .unknownKey)
    }

    @Test("the history: each write with who and why, secrets masked, paged and by scope")
    func history() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        _ = try await harness.admin.patchValues(app: "kiosk", scope: .app, patch: ["pin": "1234"], actor: "alice", message: "new pin")
        _ = try await harness.admin.patchValues(app: "kiosk", scope: .group("lobby"), patch: ["volume": 2], actor: "bob")
        let all = try await harness.admin.history(app: "kiosk", scope: nil, limit: nil).entries
        #expect(all.map(\.number) == [1, 2, 3] && all[1].actor == "alice" && all[1].message == "new pin")
        #expect(all[1].scopes.first?.values["pin"] == "********")
        #expect(try await harness.admin.history(app: "kiosk", scope: .group("lobby"), limit: nil).entries.map(\.number) == [3])
        #expect(try await harness.admin.history(app: "kiosk", scope: nil, before: 3, limit: 1).entries.map(\.number) == [2])
        let error = await serviceError { try await harness.admin.history(app: "kiosk", scope: nil, limit: 0) }
        #expect(error?.code == .badParameter)
    }

    @Test("a revert puts back the values as they were after an entry, as a new entry")
    func revert() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        try await harness.set(["volume": 2])
        try await harness.set(["volume": 9, "title": "Later"])
        let record = try await harness.admin.revert(app: "kiosk", RevertRequest(to: 2), actor: "test")
        #expect(record.number == 4)
        #expect(try await harness.admin.values(app: "kiosk", scope: .app).values == ["volume": 2])
        let nothing = await serviceError { try await harness.admin.revert(app: "kiosk", RevertRequest(to: 4), actor: "test") }
        #expect(nothing?.code == .nothingToRevert)
    }

    @Test("pruning keeps the newest entries and each scope's newest, and counts what went")
    func prune() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        for volume in 1...6 { try await harness.set(["volume": .number(.integer(Int64(volume)))]) }
        let removed = try await harness.admin.pruneHistory(keeping: HistoryRetention(maximumCount: 2))
        #expect(removed > 0)
        let numbers = try await harness.admin.history(app: "kiosk", scope: nil, limit: nil).entries.map(\.number)
        #expect(numbers.last == 7 && numbers.count <= 3)
    }

    @Test("explain: each value and the scope that set it, secrets masked")
    func explain() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(groups: ["lobby"])
        try await harness.set(["pin": "4321"])
        try await harness.set(["volume": 3], at: .group("lobby"))
        let explanation = try await harness.admin.explain(app: "kiosk", deviceID: device.id)
        #expect(explanation.sources["volume"] == "group:lobby" && explanation.sources["pin"] == "app")
        #expect(explanation.sources["title"] == "defaults" && explanation.values["pin"] == "********")
        let unknown = await serviceError { try await harness.admin.explain(app: "kiosk", deviceID: "d-nobody") }
        #expect(unknown?.code == .unknownDevice)
    }

    @Test("the app's devices with the revision each was served and its latest report")
    func devices() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll()
        _ = try await harness.gateway.settings(app: "kiosk", device: device)
        try await harness.gateway.recordStatus(
            app: "kiosk", device: device, StatusReport(revision: 1, schemaVersion: 1, state: .applied, source: .agent))
        let list = try await harness.admin.devices(app: "kiosk")
        #expect(list.devices.map(\.id) == [device.id])
        #expect(list.devices.first?.servedRevision == 1 && list.devices.first?.status?.report.state == .applied)
    }

    @Test("a scope's view: its own values and what it inherits, with where from")
    func scopeView() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        try await harness.set(["volume": 7])
        try await harness.set(["title": "Lobby"], at: .group("lobby"))
        let view = try await harness.admin.scopeValues(app: "kiosk", scope: .group("lobby"))
        #expect(view.values == ["title": "Lobby"] && view.inherited["volume"] == 7 && view.inheritedSources["volume"] == .app)
    }
}
