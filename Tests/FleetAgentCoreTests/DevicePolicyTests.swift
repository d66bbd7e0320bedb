import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Testing

@Suite("Device facts to report: only what changed")
struct DeviceInfoChangesTests {
    static let facts: JSONObject = [
        "os": ["id": "debian", "version": "12"], "machine": ["hostname": "kiosk-1", "arch": "x86_64"],
        "storage": ["stateFree": .number(.integer(10 << 30))], "apps": ["kiosk": ["version": "2.3.1"]],
    ]

    @Test("nothing taken yet: every fact; the same facts again: nothing")
    func firstAndRepeated() {
        #expect(DeviceInfoChanges.patch(reported: [:], current: Self.facts) == Self.facts)
        #expect(DeviceInfoChanges.patch(reported: Self.facts, current: Self.facts).isEmpty)
    }

    @Test("one fact changed: only it, nested in its group; a fact gone: null; an app gone: null")
    func onlyTheChange() {
        var current = Self.facts
        current["machine"] = ["hostname": "kiosk-2", "arch": "x86_64"]
        current["apps"] = ["kiosk": [:]]
        let patch = DeviceInfoChanges.patch(reported: Self.facts, current: current)
        #expect(patch == ["machine": ["hostname": "kiosk-2"], "apps": ["kiosk": ["version": nil]]])
        current["apps"] = nil
        #expect(DeviceInfoChanges.patch(reported: Self.facts, current: current)["apps"] == .null)
    }

    @Test("free space is reported again only when it moved by a tenth and at least 64 MiB")
    func freeSpaceSteps() {
        func patch(freeing bytes: Int64) -> JSONObject {
            var current = Self.facts
            current["storage"] = ["stateFree": .number(.integer((10 << 30) + bytes))]
            return DeviceInfoChanges.patch(reported: Self.facts, current: current)
        }
        #expect(patch(freeing: 100 << 20).isEmpty, "100 MiB of 10 GiB: under a tenth")
        #expect(patch(freeing: -(900 << 20)).isEmpty)
        #expect(patch(freeing: -(1100 << 20)) == ["storage": ["stateFree": .number(.integer((10 << 30) - (1100 << 20)))]])
        var small = Self.facts
        small["storage"] = ["stateFree": .number(.integer(100 << 20))]
        var smaller = small
        smaller["storage"] = ["stateFree": .number(.integer(60 << 20))]
        #expect(DeviceInfoChanges.patch(reported: small, current: smaller).isEmpty, "40 MiB: under the 64 MiB step")
    }
}

@Suite("The agent policy settled with the configuration file's pins")
struct SettledPolicyTests {
    static let local = PollTuning(longPollWait: 55, pollInterval: .seconds(60), jitter: .milliseconds(200), reportDetail: .full)

    static func server(_ entries: [String: (AgentPolicy, PolicyScope)]) -> DevicePolicy {
        var policy = DevicePolicy()
        for (app, (values, scope)) in entries {
            var sources: [AgentPolicy.Key: PolicyScope] = [:]
            for key in AgentPolicy.Key.allCases where values[key] != nil { sources[key] = scope }
            policy.apps[app] = DevicePolicy.AppPolicy(policy: values, sources: sources)
        }
        return policy
    }

    @Test("a key the file sets wins; the server's wins over the default; each says where it came from")
    func pinsWin() throws {
        let server = Self.server([
            "kiosk": (
                AgentPolicy(logLevel: "debug", pollInterval: 120, longPollWait: 25, jitter: 9, statusReports: .brief), .group("lobby")
            )
        ])
        let settled = SettledPolicy.settle(local: Self.local, localLogLevel: "info", pinned: [.jitter], server: server, apps: ["kiosk"])
        let tuning = try #require(settled.tuning(for: "kiosk"))
        #expect(tuning == PollTuning(longPollWait: 25, pollInterval: .seconds(120), jitter: .milliseconds(200), reportDetail: .brief))
        #expect(settled.apps["kiosk"]?[.jitter]?.source == .pinned)
        #expect(settled.apps["kiosk"]?[.pollInterval]?.source == .server(.group("lobby")))
        #expect(settled.logLevel == SettledPolicy.Entry(value: "debug", source: .server(.group("lobby"))))
        let pinnedLevel = SettledPolicy.settle(
            local: Self.local, localLogLevel: "warning", pinned: [.logLevel], server: server, apps: ["kiosk"])
        #expect(pinnedLevel.logLevel == SettledPolicy.Entry(value: "warning", source: .pinned))
    }

    @Test("nothing from the server: the file's values, each a default unless the file sets it")
    func noServerPolicy() {
        let settled = SettledPolicy.settle(local: Self.local, localLogLevel: "info", pinned: [], server: DevicePolicy(), apps: ["kiosk"])
        #expect(settled.tuning(for: "kiosk") == Self.local)
        #expect(settled.apps["kiosk"]?.values.allSatisfy { $0.source == .defaulted } == true)
        #expect(settled.logLevel.source == .defaulted)
    }

    @Test("polling is per app; the log level is the most verbose any of the device's apps asks for")
    func perApp() {
        let server = Self.server([
            "kiosk": (AgentPolicy(logLevel: "warning", pollInterval: 30), .app("kiosk")),
            "menu": (AgentPolicy(logLevel: "debug"), .app("menu")),
        ])
        let settled = SettledPolicy.settle(local: Self.local, localLogLevel: "info", pinned: [], server: server, apps: ["kiosk", "menu"])
        #expect(settled.tuning(for: "kiosk")?.pollInterval == .seconds(30))
        #expect(settled.tuning(for: "menu")?.pollInterval == .seconds(60))
        #expect(settled.logLevel == SettledPolicy.Entry(value: "debug", source: .server(.app("menu"))))
    }

    @Test("the server's policy resolves device over groups (later name wins) over app, per key")
    func resolution() {
        let policies: [PolicyScope: AgentPolicy] = [
            .app("kiosk"): AgentPolicy(logLevel: "notice", pollInterval: 300, jitter: 10),
            .group("a-lobby"): AgentPolicy(pollInterval: 200),
            .group("b-night"): AgentPolicy(pollInterval: 100),
            .device("d-1"): AgentPolicy(logLevel: "trace"),
        ]
        let resolved = DevicePolicy.resolve(apps: ["kiosk", "menu"], groups: ["b-night", "a-lobby"], deviceID: "d-1", policies: policies)
        let kiosk = resolved.apps["kiosk"]
        #expect(kiosk?.policy == AgentPolicy(logLevel: "trace", pollInterval: 100, jitter: 10))
        #expect(kiosk?.sources == [.logLevel: .device("d-1"), .pollInterval: .group("b-night"), .jitter: .app("kiosk")])
        #expect(resolved.apps["menu"]?.policy == AgentPolicy(logLevel: "trace", pollInterval: 100))
        #expect(resolved.tag != DevicePolicy().tag && DevicePolicy().tag == "0")
        #expect(
            resolved.tag
                == DevicePolicy.resolve(apps: ["menu", "kiosk"], groups: ["a-lobby", "b-night"], deviceID: "d-1", policies: policies).tag)
    }
}

@Suite("The sync machine under the agent policy")
struct SyncMachinePolicyTests {
    /// A machine serving revision 7 and long-polling (as the polling tests start).
    static func online(_ rules: SyncRules = TestApp.rules()) -> MachineRun { SyncMachinePollingTests.online(rules) }

    @Test("a retune changes the next request's wait and the timer's interval, not the request in flight")
    func retune() {
        var run = Self.online()
        #expect(run.fetches().last?.wait == 55)
        run.send(.retune(PollTuning(longPollWait: 0, pollInterval: .seconds(300), jitter: .zero)))
        #expect(run.events().contains("policy"))
        #expect(run.request != nil, "the long-poll in flight goes on")
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.fetches().last?.wait == 0)
        #expect(run.instant.duration(to: run.scheduledStart ?? run.instant) == .seconds(300))
    }

    @Test("a busy server's next-poll delay is waited, plus jitter, and is never counted as a long-poll cut short")
    func nextPoll() {
        var run = Self.online()
        for _ in 0..<(PollSchedule.earlyEndLimit + 2) {
            run.advance(by: .milliseconds(5))
            run.answer(.settingsAnswer(SettingsAnswer(document: nil, nextPoll: .seconds(90))))
            let wait = run.instant.duration(to: run.scheduledStart ?? run.instant)
            #expect(wait >= .seconds(90) && wait <= .seconds(95), "\(wait)")
            #expect(run.fetches().last?.wait == 55, "still long-polling")
        }
        #expect(run.events().filter { $0 == "server-busy" }.count == PollSchedule.earlyEndLimit + 2, "one line per busy answer")
        #expect(!run.events().contains("sync-failed"))
    }

    @Test("brief status reports carry the first problem only, at most 200 characters")
    func briefReports() {
        #expect(Machine.reportMessage("/volume: too big; /pin: not four digits", detail: .brief) == "/volume: too big …")
        #expect(
            Machine.reportMessage("/volume: too big; /pin: not four digits", detail: .full) == "/volume: too big; /pin: not four digits")
        let long = String(repeating: "x", count: 500)
        #expect(Machine.reportMessage(long, detail: .brief).count == AgentPolicy.briefMessageLength)
        var run = Self.online(TestApp.rules(expectAck: true))
        run.send(.retune(PollTuning(longPollWait: 55, pollInterval: .seconds(60), jitter: .zero, reportDetail: .brief)))
        run.send(
            .inboxRequests([
                InboxDelivery(
                    id: "a1", path: "/inbox/a1.json",
                    content: .request(.ack(revision: 7, state: .error, message: "cannot play; codec missing")))
            ]))
        if case .fetchSettings = run.request { run.answer(.requestCancelled) }
        #expect(run.reports().last?.message == "cannot play …")
    }

    @Test("an app's facts request is saved and its file removed; the settings loop goes on")
    func appFacts() {
        var run = Self.online()
        let produced = run.send(
            .inboxRequests([InboxDelivery(id: "f1", path: "/inbox/f1.json", content: .request(.facts(["version": "2.3.1"])))]))
        let save = produced.firstIndex { if case .saveAppFacts(["version": "2.3.1"])? = $0.file { true } else { false } }
        let remove = produced.firstIndex { $0 == .removeRequest(path: "/inbox/f1.json") }
        #expect(save != nil && remove != nil && save! < remove!, "\(produced)")
        #expect(run.reports().isEmpty)
    }
}
