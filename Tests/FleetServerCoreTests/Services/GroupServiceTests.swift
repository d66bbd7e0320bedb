import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Groups defined by a query, and rollout waves by query, in process.
@Suite("Services: groups defined by what devices report")
struct GroupServiceTests {
    static func facts(arch: String, os: String) -> JSONObject { ["machine": ["arch": .string(arch)], "os": ["version": .string(os)]] }

    @Test(
        "5,000 devices with facts: a query takes in those that match; one device's changed fact moves it in, its waiting long-poll answers with the group's value, and out again"
    )
    func fleetOfFiveThousand() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        for index in 0..<4_999 {
            let id = "d-\(index)"
            try await harness.store.addDevice(Device(id: id, tokenHash: "h-\(id)", apps: ["kiosk"], groups: [], enrolledAt: 0))
            let arch = index.isMultiple(of: 2) ? "aarch64" : "x86_64"
            _ = try await harness.store.updateDeviceInfo(id: id, at: 1) { _ in Self.facts(arch: arch, os: "12") }
        }
        let (watched, _) = try await harness.enroll(groups: ["lobby"])
        _ = try await harness.gateway.patchDeviceInfo(device: watched, patch: Self.facts(arch: "x86_64", os: "12"))
        try await harness.set(["title": "Pi"], at: .group("rpi-12"))
        let defined = try await harness.directory.defineGroup(name: "rpi-12", body: ["where": ["machine.arch=aarch64", "os.version=12"]])
        #expect(defined.summary.members == 2_500 && !defined.devices.contains(watched.id))
        let listed = try await harness.directory.groups()
        #expect(listed.groups.map(\.name) == ["lobby", "rpi-12"])
        #expect(listed.groups.map(\.members) == [1, 2_500] && listed.groups[0].conditions == nil)

        // The watched device waits on its current revision; its agent reports it is a Pi now.
        let current = try await harness.gateway.settings(app: "kiosk", device: watched)
        #expect(current.values["title"] == "Welcome")
        let waiting = Task {
            try await harness.gateway.longPoll(app: "kiosk", device: watched, knownRevision: current.revision, wait: .seconds(300))
        }
        try await harness.untilHeld(1)
        _ = try await harness.gateway.patchDeviceInfo(device: watched, patch: ["machine": ["arch": "aarch64"]])
        let answer = try await waiting.value
        #expect(answer.document?.values["title"] == "Pi")
        #expect(answer.device.groups == ["lobby", "rpi-12"])
        #expect(try await harness.directory.group(name: "rpi-12").summary.members == 2_501)

        // Its facts stop matching: it leaves, and its next answer is the fleet's value again.
        let joined = try #require(answer.document)
        let second = Task {
            try await harness.gateway.longPoll(app: "kiosk", device: answer.device, knownRevision: joined.revision, wait: .seconds(300))
        }
        try await harness.untilHeld(1)
        _ = try await harness.gateway.patchDeviceInfo(device: answer.device, patch: ["os": ["version": "13"]])
        let left = try await second.value
        #expect(left.document?.values["title"] == "Welcome" && left.device.groups == ["lobby"])
        #expect(try await harness.directory.group(name: "rpi-12").summary.members == 2_500)
    }

    @Test("a query is refused at its pointer, a group held by hand or given by hand is refused with 409, an unknown one is 404")
    func refusals() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(groups: ["lobby"])
        let unreadable = await serviceError {
            try await harness.directory.defineGroup(name: "pi", body: ["where": ["machine.arch=aarch64", "x~("]])
        }
        #expect(unreadable?.status == .badRequest && unreadable?.code == .badGroup)
        #expect(unreadable?.message.hasPrefix("/where/1: condition \"x~(\" holds an invalid regular expression") == true)
        let held = await serviceError { try await harness.directory.defineGroup(name: "lobby", body: ["where": ["os.version=12"]]) }
        #expect(held?.status == .conflict && held?.message.contains("1 device is in group lobby by hand") == true)
        _ = try await harness.directory.defineGroup(name: "pi", body: ["where": ["machine.arch=aarch64"]])
        let byHand = await serviceError { try await harness.directory.updateDevice(id: device.id, DeviceUpdate(groups: ["pi"])) }
        #expect(byHand?.status == .conflict && byHand?.message.contains("group pi is defined by a query") == true)
        let token = await serviceError {
            try await harness.directory.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], groups: ["pi"]))
        }
        #expect(token?.status == .conflict && token?.code == .badGroup)
        #expect(await serviceError { try await harness.directory.group(name: "nowhere") }?.code == .unknownGroup)
        #expect(await serviceError { try await harness.directory.removeGroupDefinition(name: "lobby") }?.code == .unknownGroup)
        try await harness.directory.removeGroupDefinition(name: "pi")
        #expect(try await harness.directory.groups().groups.map(\.name) == ["lobby"])
    }

    @Test("an account limited in scope sees the groups holding devices it sees, and no query naming other devices")
    func scopedReaders() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (kiosk, _) = try await harness.enroll(apps: ["kiosk"], groups: ["lobby"])
        let (_, _) = try await harness.enroll(apps: ["menu"], groups: ["kitchen"])
        _ = try await harness.gateway.patchDeviceInfo(device: kiosk, patch: ["os": ["version": "12"]])
        _ = try await harness.directory.defineGroup(name: "bookworm", body: ["where": ["os.version=12"]])
        _ = try await harness.directory.defineGroup(name: "menu-v2", body: ["where": ["apps.menu.version~^2"]])
        func viewer(_ scope: AccountScope) -> Caller {
            Caller(
                account: Account(name: "v", displayName: "", kind: .person, role: .viewer, scope: scope, createdAt: 0, updatedAt: 0),
                credential: .apiToken(id: "at-v"))
        }
        let kioskViewer = viewer(AccountScope(apps: ["kiosk"]))
        #expect(try await harness.directory.groups(visibleTo: kioskViewer).groups.map(\.name) == ["bookworm", "lobby"])
        #expect(try await harness.directory.group(name: "bookworm", visibleTo: kioskViewer).devices == [kiosk.id])
        #expect(await serviceError { try await harness.directory.group(name: "menu-v2", visibleTo: kioskViewer) }?.code == .unknownGroup)
        #expect(await serviceError { try await harness.directory.group(name: "kitchen", visibleTo: kioskViewer) }?.code == .unknownGroup)
        let owner = try await harness.owner()
        #expect(try await harness.directory.groups(visibleTo: owner).groups.map(\.name) == ["bookworm", "kitchen", "lobby", "menu-v2"])
    }

    @Test("a where: wave takes the devices whose facts meet its query when the rollout starts; the rest wait for the next wave")
    func queryWave() async throws {
        let (harness, bookworm, bullseye) = try await ServiceHarness.bookwormAndBullseye()
        let waves = try RolloutWave.list(["where:os.version=12", "100%"]).get()
        let view = try await harness.rollouts.startRollout(
            app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 9], waves: waves), actor: "test")
        #expect(view.waves.first?.description == "where:os.version=12")
        #expect(try await harness.gateway.settings(app: "kiosk", device: bookworm).values["volume"] == 9)
        #expect(try await harness.gateway.settings(app: "kiosk", device: bullseye).values["volume"] == 5)
        // Stored with the rollout: a device that starts matching later is not taken into the running wave.
        _ = try await harness.gateway.patchDeviceInfo(device: bullseye, patch: ["os": ["version": "12"]])
        #expect(try await harness.gateway.settings(app: "kiosk", device: bullseye).values["volume"] == 5)
        let stored = try #require(try await harness.store.activeRollout(app: "kiosk"))
        #expect(stored.queryMembers == [0: [bookworm.id]])
        #expect(try Rollout(storedText: stored.storedJSON.serialized()) == stored)
    }
}
