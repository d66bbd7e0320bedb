import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

/// Groups defined by a query: the same contract on every store. A device's stored groups are
/// those given by hand and those its facts put it in.
@Suite("Store conformance: groups defined by a query")
struct GroupStoreTests {
    static func definition(_ name: String, _ conditions: String...) throws -> GroupDefinition {
        GroupDefinition(name: name, conditions: try conditions.map { try DeviceInfoFilter(parsing: $0) })
    }

    static func report(_ store: any SettingsStore, _ id: String, _ facts: JSONObject) async throws -> FactsUpdate? {
        try await store.updateDeviceInfo(id: id, at: 10) { _ in facts }
    }

    @Test(
        "a definition takes in the devices whose facts meet it and keeps their groups given by hand; reports move devices in and out",
        arguments: ConformingStore.allCases)
    func membershipFollowsFacts(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            for (id, groups) in [("d-1", ["lobby"]), ("d-2", []), ("d-3", ["zoo"])] {
                try await store.addDevice(Device(id: id, tokenHash: "h-" + id, apps: ["kiosk"], groups: groups, enrolledAt: 0))
            }
            _ = try await Self.report(store, "d-1", ["machine": ["arch": "aarch64"], "os": ["version": "12"]])
            _ = try await Self.report(store, "d-2", ["machine": ["arch": "x86_64"], "os": ["version": "12"]])
            let change = try await store.defineGroup(try Self.definition("rpi-12", "machine.arch=aarch64", "os.version=12"))
            #expect(change.joined == ["d-1"] && change.left.isEmpty && change.changedDevices == ["d-1"])
            #expect(try await store.device(id: "d-1")?.groups == ["lobby", "rpi-12"])
            #expect(try await store.groupDefinitions() == [try Self.definition("rpi-12", "machine.arch=aarch64", "os.version=12")])

            // A report that makes d-2 match moves it in; one that makes d-1 stop matching moves it out.
            let joined = try #require(try await Self.report(store, "d-2", ["machine": ["arch": "aarch64"], "os": ["version": "12"]]))
            #expect(joined.groups?.before == [] && joined.groups?.after == ["rpi-12"])
            let left = try #require(try await Self.report(store, "d-1", ["machine": ["arch": "aarch64"], "os": ["version": "13"]]))
            #expect(left.groups?.before == ["lobby", "rpi-12"] && left.groups?.after == ["lobby"])
            // The same facts again: nothing moves.
            #expect(try await Self.report(store, "d-1", ["machine": ["arch": "aarch64"], "os": ["version": "13"]])?.groups == nil)

            // Groups given by hand are replaced, those of queries stay; a defined group cannot be given by hand.
            #expect(try await store.updateDevice(id: "d-2", DeviceChange(groups: ["hall"]))?.groups == ["hall", "rpi-12"])
            await #expect(throws: GroupRefusal.definedByQuery(group: "rpi-12")) {
                try await store.updateDevice(id: "d-3", DeviceChange(groups: ["rpi-12"]))
            }
            #expect(try await store.device(id: "d-3")?.groups == ["zoo"])
            // A group devices hold by hand cannot be taken over by a query.
            await #expect(throws: GroupRefusal.heldByHand(group: "zoo", devices: 1)) {
                try await store.defineGroup(try Self.definition("zoo", "os.version=12"))
            }
            #expect(try await store.groupDefinitions().map(\.name) == ["rpi-12"])

            // A changed query regroups at once; a removed one lets every member go.
            let widened = try await store.defineGroup(try Self.definition("rpi-12", "machine.arch=aarch64"))
            #expect(widened.joined == ["d-1"] && widened.left.isEmpty)
            let removed = try #require(try await store.removeGroupDefinition(name: "rpi-12"))
            #expect(removed.left == ["d-1", "d-2"])
            #expect(try await store.device(id: "d-1")?.groups == ["lobby"])
            #expect(try await store.device(id: "d-2")?.groups == ["hall"])
            #expect(try await store.removeGroupDefinition(name: "rpi-12") == nil)
        }
    }

    @Test(
        "an app taken from a device takes its facts out of the queries: it leaves a group its app's fact put it in",
        arguments: ConformingStore.allCases)
    func appTakenAway(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            try await store.addDevice(Device(id: "d-1", tokenHash: "h-d-1", apps: ["kiosk", "menu"], groups: [], enrolledAt: 0))
            _ = try await Self.report(store, "d-1", ["apps": ["kiosk": ["player": "2.1"]]])
            _ = try await store.defineGroup(try Self.definition("player-2", #"apps.kiosk.player~^2\."#))
            #expect(try await store.device(id: "d-1")?.groups == ["player-2"])
            #expect(try await store.updateDevice(id: "d-1", DeviceChange(apps: ["menu"]))?.groups == [])
            #expect(try await store.updateDevice(id: "d-1", DeviceChange(apps: ["kiosk", "menu"]))?.groups == ["player-2"])
        }
    }

    @Test("a token's group that a query has defined since is not given at enrollment", arguments: ConformingStore.allCases)
    func enrollmentLeavesDefinedGroups(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            try await store.addEnrollmentToken(
                EnrollmentTokenRecord(hash: "t", id: "et-1", expiresAt: 1_000, usesLeft: 1, apps: ["kiosk"], groups: ["lobby", "rpi"]))
            _ = try await store.defineGroup(try Self.definition("rpi", "machine.arch=aarch64"))
            let outcome = try await store.enroll(
                EnrollmentAttempt(tokenHash: "t", requestID: "r", now: 10, retryWindow: 60), newTokenHash: "h-d-1"
            ) { apps, groups in Device(id: "d-1", tokenHash: "h-d-1", apps: apps, groups: groups, enrolledAt: 10) }
            guard case .enrolled(let device) = outcome else {
                Issue.record("not enrolled: \(outcome)")
                return
            }
            #expect(device.groups == ["lobby"])
            #expect(try await Self.report(store, "d-1", ["machine": ["arch": "aarch64"]])?.groups?.after == ["lobby", "rpi"])
        }
    }
}
