import FleetJSON
import FleetProtocol
import FleetServerCore
import Testing

@Suite("Rollouts as values: waves, admission, the gate")
struct RolloutTests {
    static func rollout(
        waves: [String] = ["5%", "25%", "100%"], scope: Scope = .app, threshold: Int = 200, wave: Int = 0, phase: RolloutPhase = .running
    ) throws -> Rollout {
        let parsed = try RolloutWave.list(waves).get()
        return Rollout(
            id: "r-1", app: "kiosk", scope: scope, patch: ["greeting": "hi"], waves: parsed, pauseOnErrorsBasisPoints: threshold,
            waveWaitSeconds: 600, phase: phase, currentWave: wave, waveStartedAt: 1_000, startedAt: 1_000, actor: "admin")
    }

    static func device(_ id: String, groups: [String] = []) -> Device {
        Device(id: id, tokenHash: "h", apps: ["kiosk"], groups: groups, enrolledAt: 0)
    }

    @Test("waves are read strictly: shares grow, the last is 100%, groups are named once")
    func waveLists() throws {
        #expect(try RolloutWave.list(["5%", "25%", "100%"]).get() == [.share(basisPoints: 500), .share(basisPoints: 2500), .everyone])
        #expect(try RolloutWave.list(["group:canary", "0.5%", "100%"]).get() == [.group("canary"), .share(basisPoints: 50), .everyone])
        #expect(RolloutWave("0.25%")?.description == "0.25%" && RolloutWave("2.5%")?.description == "2.5%")
        let query = try #require(RolloutWave(#"where:os.version=12;apps.kiosk.player~^2\."#))
        #expect(query.description == #"where:os.version=12;apps.kiosk.player~^2\."#)
        #expect(try RolloutWave.list([query.description, "25%", "100%"]).get().count == 3)
        let refusals: [([String], String)] = [
            (["5%", "25%"], "the last wave must be 100%"),
            (["25%", "5%", "100%"], "5% is not more than the wave before it"),
            (["5", "100%"], "\"5\" is not a wave"),
            (["101%"], "\"101%\" is not a wave"),
            (["0.125%", "100%"], "\"0.125%\" is not a wave"),
            (["group:", "100%"], "\"group:\" is not a wave"),
            (["group:a", "group:a", "100%"], "group:a is named twice"),
            (["where:os.version=12", "where:os.version=12", "100%"], "where:os.version=12 is named twice"),
            (["where:", "100%"], "\"where:\" is not a wave"),
            (["where:x~(", "100%"], "\"where:x~(\" is not a wave"),
            ([], "name 1 to 20 waves"),
        ]
        for (texts, message) in refusals {
            guard case .failure(let error) = RolloutWave.list(texts) else {
                Issue.record("\(texts) was accepted")
                continue
            }
            #expect(error.message.contains(message), "\(texts): \(error.message)")
        }
    }

    @Test("a device's wave: its group's wave first, else by a stable hash bucket; the shares are near their size")
    func assignment() throws {
        let rollout = try Self.rollout(waves: ["group:canary", "10%", "50%", "100%"])
        #expect(rollout.wave(of: Self.device("d-x", groups: ["canary"])) == 0)
        var counts = [0, 0, 0, 0]
        for index in 0..<10_000 {
            let device = Self.device("d-\(index)")
            let wave = rollout.wave(of: device)
            #expect(wave == rollout.wave(of: device))  // stable
            counts[wave] += 1
            let bucket = RolloutWave.bucket(device.id)
            #expect((0..<10_000).contains(bucket))
            #expect(wave == (bucket < 1_000 ? 1 : bucket < 5_000 ? 2 : 3))
        }
        #expect(counts[0] == 0)
        #expect((850...1_150).contains(counts[1]), "10% wave: \(counts[1]) of 10,000")
        #expect((3_700...4_300).contains(counts[2]), "50% wave: \(counts[2]) of 10,000")
    }

    @Test("only admitted devices the scope reaches get the staged layer; paused keeps them, aborted and completed give it back")
    func admission() throws {
        var rollout = try Self.rollout(waves: ["group:canary", "100%"], scope: .group("lobby"))
        let canary = Self.device("d-1", groups: ["lobby", "canary"])
        let other = Self.device("d-2", groups: ["lobby"])
        let outside = Self.device("d-3", groups: ["canary"])
        #expect(rollout.admits(canary) && !rollout.admits(other) && !rollout.admits(outside))
        let layers = ValueLayers(app: ["greeting": "app"], groups: ["lobby": ["volume": 3]])
        #expect(rollout.layers(layers, for: canary).groups["lobby"] == ["volume": 3, "greeting": "hi"])
        #expect(rollout.layers(layers, for: other) == layers)
        rollout.phase = .paused
        #expect(rollout.admits(canary))
        rollout.currentWave = 1
        #expect(rollout.admits(other) && !rollout.admits(outside))
        rollout.end(.aborted, at: 2_000, reason: "r")
        #expect(!rollout.admits(canary) && rollout.version == 2 && rollout.endedAt == 2_000)
    }

    @Test("the stored form reads back as it was")
    func storedForm() throws {
        var rollout = try Self.rollout(waves: ["group:canary", "0.5%", "100%"], scope: .group("lobby"))
        rollout.patch = ["list": [1, ["a": .null]], "secret": "x"]
        rollout.accepted = ["d-1", "d-2"]
        rollout.end(.aborted, at: 9, reason: "why — ünïcode")
        #expect(try Rollout(storedText: rollout.storedJSON.serialized()) == rollout)
        #expect(throws: StoreCorruption.self) { try Rollout(storedText: #"{"id":"r"}"#) }
    }

    static func state(_ id: String, wave: Int = 0, _ outcome: RolloutDeviceState.Outcome) -> RolloutDeviceState {
        RolloutDeviceState(
            device: id, wave: wave, outcome: outcome,
            detail: outcome == .failed ? "error on revision 2: hook exited 1" : outcome == .waiting ? "no report yet" : "")
    }

    @Test("the gate: every admitted device applied → next wave, after the last → complete")
    func gateAdvances() throws {
        let first = try Self.rollout()
        let states = [Self.state("d-1", .applied), Self.state("d-2", .applied), Self.state("d-9", wave: 2, .waiting)]
        #expect(RolloutGate.step(first, devices: states, now: 1_001) == .advance(to: 1))
        let last = try Self.rollout(wave: 2)
        #expect(
            RolloutGate.step(
                last, devices: states.map { RolloutDeviceState(device: $0.device, wave: $0.wave, outcome: .applied, detail: "") },
                now: 1_001) == .complete)
        // A wave no device is in passes at once.
        #expect(RolloutGate.step(first, devices: [], now: 1_001) == .advance(to: 1))
    }

    @Test("the gate: failures above the threshold pause, naming the devices; at or below it they count as reported")
    func gatePausesOnErrors() throws {
        let rollout = try Self.rollout(threshold: 200)  // 2%
        var states = (0..<50).map { Self.state("d-\($0)", .applied) }
        states[7] = Self.state("d-7", .failed)
        // 1 of 50 = 2%: not more than 2%; every device reported.
        #expect(RolloutGate.step(rollout, devices: states, now: 1_001) == .advance(to: 1))
        states[8] = Self.state("d-8", .failed)
        guard case .pause(let reason) = RolloutGate.step(rollout, devices: states, now: 1_001) else {
            Issue.record("not paused")
            return
        }
        #expect(
            reason.hasPrefix(
                "2 of 50 admitted device(s) (4%) reported error or unsupported, more than the 2% allowed: d-7 (error on revision 2: hook exited 1), d-8"
            ))
        // With 0%, a single failure pauses even while others wait.
        let strict = try Self.rollout(threshold: 0)
        let step = RolloutGate.step(strict, devices: [Self.state("d-1", .failed), Self.state("d-2", .waiting)], now: 1_001)
        #expect(
            step
                == .pause(
                    reason:
                        "1 of 2 admitted device(s) (50%) reported error or unsupported, more than the 0% allowed: d-1 (error on revision 2: hook exited 1)"
                ))
    }

    @Test("the gate: devices an admin accepted by resuming are not counted, failed or silent")
    func gateSkipsAccepted() throws {
        var rollout = try Self.rollout(threshold: 0, wave: 1)
        let states = [Self.state("d-1", .failed), Self.state("d-2", .waiting), Self.state("d-3", wave: 1, .applied)]
        guard case .pause = RolloutGate.step(rollout, devices: states, now: 1_001) else {
            Issue.record("not paused before the devices were accepted")
            return
        }
        rollout.accepted = ["d-1", "d-2"]
        #expect(RolloutGate.step(rollout, devices: states, now: 1_001) == .advance(to: 2))
    }

    @Test("the gate: waits for the wave until its time is up, then pauses naming who did not report; not running → nothing")
    func gateTimesOut() throws {
        let rollout = try Self.rollout(wave: 1)
        let states = [Self.state("d-1", .applied)] + (2...8).map { Self.state("d-\($0)", wave: 1, .waiting) }
        #expect(RolloutGate.step(rollout, devices: states, now: 1_599) == .wait(until: 1_600))
        guard case .pause(let reason) = RolloutGate.step(rollout, devices: states, now: 1_600) else {
            Issue.record("not paused")
            return
        }
        #expect(
            reason
                == "7 of 8 admitted device(s) did not report within 10m of wave 2 (25%): d-2 (no report yet), d-3 (no report yet), d-4 (no report yet), d-5 (no report yet), d-6 (no report yet) and 2 more"
        )
        #expect(RolloutGate.step(try Self.rollout(phase: .paused), devices: states, now: 9_999) == .none)
    }
}
