import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

/// A device as these tests play it: fetches its settings and reports on them over HTTP.
struct PlayedDevice {
    let id: String
    let client: FleetClient
    var document: SettingsDocument?

    /// Fetches the settings; returns whether a new revision came (the long-poll's `wait` in seconds).
    @discardableResult
    mutating func fetch(wait: Int = 0) async throws -> Bool {
        guard let new = try await client.settings(app: "kiosk", knownRevision: document?.revision, wait: wait) else { return false }
        document = new
        return true
    }

    func report(_ state: StatusReport.State, _ message: String = "", source: StatusReport.Source = .agent) async throws {
        let document = try #require(document)
        try await client.reportStatus(
            app: "kiosk",
            StatusReport(revision: document.revision, schemaVersion: document.schemaVersion, state: state, message: message, source: source)
        )
    }

    var title: String? { document?.values["title"]?.stringValue }
}

@Suite("History, revert and staged rollouts over HTTP")
struct HistoryAndRolloutRouteTests {
    /// Three devices, one in each of the groups w1, w2, w3, each holding its first settings.
    static func threeDevices(_ server: TestFleetServer) async throws -> [PlayedDevice] {
        var devices: [PlayedDevice] = []
        for group in ["w1", "w2", "w3"] {
            let enrolled = try await server.enrollDevice(groups: [group])
            var device = PlayedDevice(id: enrolled.id, client: enrolled.client)
            try await device.fetch()
            try await device.report(.applied)
            devices.append(device)
        }
        return devices
    }

    static let groupWaves: [RolloutWave] = [.group("w1"), .group("w2"), .everyone]

    @Test(
        "every write is kept: who, when, why, each scope's patch and values, secrets masked; by scope and newest first",
        arguments: StoreKind.allCases)
    func history(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            _ = try await server.admin.putMetadata(
                app: "kiosk", document: Array(TestMetadata.kiosk(version: 1).utf8), message: "first version")
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Hello"], message: "greet — ünïcode & more")
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["pin": "1234"])
            let enrolled = try await server.enrollDevice(groups: ["lobby"])
            var device = PlayedDevice(id: enrolled.id, client: enrolled.client)
            try await device.fetch()
            _ = try await enrolled.client.patchSettings(app: "kiosk", patch: ["volume": 7], basedOn: try #require(device.document).revision)

            let history = try await server.admin.history(app: "kiosk")
            #expect(history.entries.map(\.number) == [1, 2, 3, 4])
            #expect(history.entries.map(\.kind) == ["metadata", "values", "values", "values"])
            // Who: the account's name (the admin token file acts as the bootstrap owner), never a token.
            let admin = Authenticator.bootstrapOwner
            #expect(history.entries.map(\.actor) == [admin, admin, admin, "device \(enrolled.id)"])
            #expect(history.entries.map(\.message) == ["first version", "greet — ünïcode & more", "", ""])
            #expect(history.entries[0].metadataVersion == 1)
            #expect(history.entries.map(\.at) == Array(repeating: server.clock.secondsSinceEpoch(), count: 4))
            #expect(history.entries[1].scopes == [.init(scope: "app", patch: ["title": "Hello"], values: ["title": "Hello"])])
            #expect(history.entries[2].scopes == [.init(scope: "group:lobby", patch: ["pin": "********"], values: ["pin": "********"])])
            #expect(history.entries[3].scopes == [.init(scope: "device:\(enrolled.id)", patch: ["volume": 7], values: ["volume": 7])])
            #expect(!history.json.serialized().contains("1234"))

            let lobby = try await server.admin.history(app: "kiosk", scope: "group:lobby")
            #expect(lobby.entries.map(\.number) == [3])
            #expect(try await server.admin.history(app: "kiosk", limit: 2).entries.map(\.number) == [3, 4])
            let badScope = await refusal { try await server.admin.history(app: "kiosk", scope: "nowhere") }
            #expect(badScope?.status == 400)
            let unknown = await refusal { try await server.admin.history(app: "nope") }
            #expect(unknown?.status == 404)
        }
    }

    @Test(
        "a revert makes every scope as it was after a revision, as a new revision; what it cannot do it refuses",
        arguments: StoreKind.allCases)
    func revert(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)  // 1
            let enrolled = try await server.enrollDevice(groups: ["lobby"])
            var device = PlayedDevice(id: enrolled.id, client: enrolled.client)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "A"])  // 2
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 3])  // 3
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "B"])  // 4
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 9])  // 5
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(enrolled.id)", patch: ["night": true])  // 6
            try await device.fetch()
            let before = try #require(device.document)
            #expect(before.values["title"] == "B" && before.values["volume"] == 9 && before.values["night"] == true)

            let reverted = try await server.admin.revert(app: "kiosk", RevertRequest(to: 3, message: "B was wrong"))
            #expect(reverted.number == 7 && reverted.kind == "revert" && reverted.message == "B was wrong")
            #expect(
                reverted.scopes == [
                    .init(scope: "app", patch: ["title": "A"], values: ["title": "A"]),
                    .init(scope: "device:\(enrolled.id)", patch: ["night": .null], values: [:]),
                    .init(scope: "group:lobby", patch: ["volume": 3], values: ["volume": 3]),
                ])
            #expect(try await device.fetch())
            let after = try #require(device.document)
            #expect(after.revision > before.revision)
            #expect(after.values["title"] == "A" && after.values["volume"] == 3 && after.values["night"] == false)
            // History is never rewritten.
            #expect(try await server.admin.history(app: "kiosk").entries.map(\.number) == Array(1...7))

            let again = await refusal { try await server.admin.revert(app: "kiosk", RevertRequest(to: 3)) }
            #expect(again?.status == 409 && again?.code == .nothingToRevert)
            let missing = await refusal { try await server.admin.revert(app: "kiosk", RevertRequest(to: 99)) }
            #expect(
                missing?.status == 400
                    && missing?.description.contains("kiosk has no history entry 99; its history runs from 1 to 7") == true)
            // One scope only.
            let appOnly = try await server.admin.revert(app: "kiosk", RevertRequest(to: 5, scope: "app"))
            #expect(appOnly.scopes.map(\.scope) == ["app"])
            #expect(try await server.admin.values(app: "kiosk", scope: "group:lobby").values == ["volume": 3])
            // Values the current metadata refuses are not brought back.
            try await server.putKioskMetadata(version: 3)  // volume at most 8
            let invalid = await refusal { try await server.admin.revert(app: "kiosk", RevertRequest(to: 5)) }
            #expect(invalid?.status == 422 && invalid?.code == .invalidValues)
            #expect(try await server.admin.values(app: "kiosk", scope: "group:lobby").values == ["volume": 3])
        }
    }

    @Test(
        "a staged change reaches one wave at a time, the others' long-polls stay quiet, each wave waits for applied reports, and it ends in the stored values",
        arguments: StoreKind.allCases)
    func stagedRollout(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)
            var devices = try await Self.threeDevices(server)
            let started = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: Self.groupWaves, message: "new title"))
            #expect(started.phase == .running && started.currentWave == 0 && started.actor == Authenticator.bootstrapOwner)
            #expect(started.progress == [RolloutWaveProgress(wave: .group("w1"), devices: 1, applied: 0, failed: 0, waiting: 1)])
            #expect(started.devices.map(\.detail) == ["has not fetched the staged values"])

            // Only the first wave gets it; the third's long-poll waits out its time unanswered.
            #expect(try await devices[0].fetch())
            #expect(devices[0].title == "Staged")
            #expect(try await devices[1].fetch() == false)
            #expect(try await devices[2].fetch(wait: 1) == false)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values.isEmpty)

            // Fetched but not reported: the wave waits.
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").currentWave == 0)
            #expect(try await server.admin.rollout(app: "kiosk").devices.first?.detail.hasPrefix("no report on revision") == true)
            try await devices[0].report(.applied)
            try await server.service.rollouts.superviseRollouts()
            var status = try await server.admin.rollout(app: "kiosk")
            #expect(status.currentWave == 1 && status.phase == .running)
            #expect(status.progress.first == RolloutWaveProgress(wave: .group("w1"), devices: 1, applied: 1, failed: 0, waiting: 0))

            #expect(try await devices[1].fetch())
            #expect(devices[1].title == "Staged")
            #expect(try await devices[2].fetch() == false)
            try await devices[1].report(.applied)
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").currentWave == 2)
            #expect(try await devices[2].fetch())
            try await devices[2].report(.applied)
            try await server.service.rollouts.superviseRollouts()
            status = try await server.admin.rollout(app: "kiosk")
            #expect(status.phase == .completed && status.endedAt != nil)

            // The patch is in the stored values now, and nobody gets a new revision for it.
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Staged"])
            for index in devices.indices { #expect(try await devices[index].fetch() == false) }
            let history = try await server.admin.history(app: "kiosk")
            let rolloutEntries = history.entries.filter { $0.kind == "rollout" }
            #expect(rolloutEntries.count == 4)
            #expect(rolloutEntries.first?.message.contains("started at app: title in waves group:w1, group:w2, 100% — new title") == true)
            #expect(rolloutEntries.last?.scopes == [.init(scope: "app", patch: ["title": "Staged"], values: ["title": "Staged"])])
            #expect(server.log.events("rollout").count == 4)
        }
    }

    @Test(
        "an error pauses the rollout naming the device; the staged keys are guarded; resume admits the next wave; abort gives every device the previous values",
        arguments: StoreKind.allCases)
    func pauseResumeAbort(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)
            var devices = try await Self.threeDevices(server)
            let firstRevision = try #require(devices[0].document).revision
            _ = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: Self.groupWaves))
            try await devices[0].fetch()
            try await devices[0].report(.error, "hook exited 1")
            try await server.service.rollouts.superviseRollouts()
            var status = try await server.admin.rollout(app: "kiosk")
            #expect(status.phase == .paused)
            #expect(status.reason.contains("1 of 1 admitted device(s) (100%) reported error or unsupported, more than the 0% allowed"))
            #expect(status.reason.contains("\(devices[0].id) (error on revision \(firstRevision + 1): hook exited 1)"))
            #expect(status.devices.map(\.outcome) == [.failed])
            #expect(server.log.events("rollout").last?.contains("level=warning") == true)
            // Paused: nothing moves on by itself.
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").currentWave == 0)

            // The staged keys are guarded; other keys go to everyone, the admitted devices included.
            let guarded = await refusal { try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Other"]) }
            #expect(guarded?.status == 409 && guarded?.code == .rolloutInProgress)
            #expect(guarded?.description.contains("of title is paused (wave 1 of 3)") == true)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:w1", patch: ["volume": 2])
            #expect(try await devices[0].fetch())
            #expect(devices[0].title == "Staged" && devices[0].document?.values["volume"] == 2)
            let metadata = await refusal { try await server.putKioskMetadata(version: 2) }
            #expect(metadata?.code == .rolloutInProgress)

            status = try await server.admin.resumeRollout(app: "kiosk")
            #expect(status.phase == .running && status.currentWave == 1 && status.reason.isEmpty)
            #expect(try await devices[1].fetch())
            #expect(devices[1].title == "Staged")

            status = try await server.admin.abortRollout(app: "kiosk")
            #expect(status.phase == .aborted && status.reason == "aborted by \(Authenticator.bootstrapOwner)")
            for index in 0..<2 {
                #expect(try await devices[index].fetch())
                #expect(devices[index].title == "Welcome")
            }
            #expect(try await devices[2].fetch() == false)
            let again = await refusal { try await server.admin.abortRollout(app: "kiosk") }
            #expect(again?.status == 404 && again?.code == .noRollout)
            let messages = try await server.admin.history(app: "kiosk").entries.filter { $0.kind == "rollout" }.map(\.message)
            #expect(messages.count == 4)
            #expect(messages[1].contains("paused: 1 of 1 admitted device(s)"))
            #expect(messages[2].contains("wave 2 of 3 (group:w2) admitted — resumed by \(Authenticator.bootstrapOwner)"))
            #expect(messages[3].hasSuffix("aborted"))
        }
    }

    @Test("a wave that does not report in time pauses; a forced write of every staged key ends the rollout", arguments: StoreKind.allCases)
    func timeoutAndForce(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)
            let devices = try await Self.threeDevices(server)
            _ = try await server.admin.startRollout(
                app: "kiosk",
                RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: Self.groupWaves, waveWaitSeconds: 60))
            server.clock.advance(by: 59)
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").phase == .running)
            server.clock.advance(by: 1)
            try await server.service.rollouts.superviseRollouts()
            let status = try await server.admin.rollout(app: "kiosk")
            #expect(status.phase == .paused)
            #expect(
                status.reason
                    == "1 of 1 admitted device(s) did not report within 1m of wave 1 (group:w1): \(devices[0].id) (has not fetched the staged values)"
            )

            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Forced"], force: true)
            let ended = try await server.admin.rollout(app: "kiosk")
            #expect(ended.phase == .aborted && ended.reason == "a forced write took over every setting it staged")
            var first = devices[0]
            #expect(try await first.fetch())
            #expect(first.title == "Forced")
        }
    }

    @Test(
        "a staged change is checked as a write would be; a device scope, a second rollout and a bad wave list are refused",
        arguments: StoreKind.allCases)
    func refusals(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata(version: 1)
            let device = try await server.enrollDevice(groups: ["w1"])
            let invalid = await refusal {
                try await server.admin.startRollout(
                    app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 11], waves: Self.groupWaves))
            }
            #expect(invalid?.status == 422 && invalid?.code == .invalidValues)
            let deviceScope = await refusal {
                try await server.admin.startRollout(
                    app: "kiosk", RolloutRequest(scope: "device:\(device.id)", patch: ["volume": 1], waves: Self.groupWaves))
            }
            #expect(deviceScope?.status == 400 && deviceScope?.description.contains("a device scope reaches one device") == true)
            let badWaves = try await server.raw(
                .post, "/v1/admin/apps/kiosk/rollouts", token: TestFleetServer.adminToken, headers: ["Content-Type": "application/json"],
                body: #"{"scope": "app", "patch": {"volume": 1}, "waves": ["5%", "50%"]}"#)
            #expect(badWaves.status == 400)
            #expect(String(decoding: badWaves.body, as: UTF8.self).contains("/waves/1: the last wave must be 100%"))
            _ = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["volume": 1], waves: Self.groupWaves))
            let second = await refusal {
                try await server.admin.startRollout(
                    app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "x"], waves: Self.groupWaves))
            }
            #expect(second?.status == 409 && second?.code == .rolloutInProgress)
            let forcedRevert = try await server.admin.revert(app: "kiosk", RevertRequest(to: 1, force: true))
            #expect(forcedRevert.kind == "revert")
            #expect(try await server.admin.rollout(app: "kiosk").phase == .aborted)
        }
    }

    @Test("a device whose own values hide the staged setting counts as applied: the rollout changes nothing for it")
    func hiddenByOwnValues() async throws {
        try await TestFleetServer.with(store: .sqlite) { server in
            try await server.putKioskMetadata(version: 1)
            var devices = try await Self.threeDevices(server)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(devices[0].id)", patch: ["title": "Mine"])
            try await devices[0].fetch()
            try await devices[0].report(.error, "an old problem")
            _ = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: Self.groupWaves))
            let started = try await server.admin.rollout(app: "kiosk")
            #expect(started.progress.first == RolloutWaveProgress(wave: .group("w1"), devices: 1, applied: 1, failed: 0, waiting: 0))
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").currentWave == 1)
            #expect(try await devices[0].fetch() == false)
        }
    }

    @Test("a device whose app acknowledges counts once its app reported too; an app's error fails it")
    func appAcknowledgements() async throws {
        try await TestFleetServer.with(store: .sqlite) { server in
            try await server.putKioskMetadata(version: 1)
            var devices = try await Self.threeDevices(server)
            try await devices[0].report(.applied, source: .app)  // this app acknowledges revisions
            try await devices[1].report(.applied, source: .app)
            _ = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: Self.groupWaves))
            try await devices[0].fetch()
            try await devices[0].report(.applied)
            try await server.service.rollouts.superviseRollouts()
            let waiting = try await server.admin.rollout(app: "kiosk")
            #expect(waiting.currentWave == 0)
            #expect(waiting.devices.first?.detail.hasPrefix("its app has not acknowledged revision") == true)
            try await devices[0].report(.applied, source: .app)
            try await server.service.rollouts.superviseRollouts()
            #expect(try await server.admin.rollout(app: "kiosk").currentWave == 1)
            try await devices[1].fetch()
            try await devices[1].report(.applied)
            try await devices[1].report(.error, "cannot show the title", source: .app)
            try await server.service.rollouts.superviseRollouts()
            let paused = try await server.admin.rollout(app: "kiosk")
            #expect(paused.phase == .paused && paused.reason.contains("(app error on revision"))
            #expect(paused.reason.contains("cannot show the title"))
        }
    }
}
