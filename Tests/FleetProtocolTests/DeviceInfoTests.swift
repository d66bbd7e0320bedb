import FleetJSON
import FleetProtocol
import Testing

@Suite("Device facts and agent policies on the wire")
struct DeviceInfoTests {
    @Test("a device's patch: known groups and facts, strings (stateFree a count), its own apps only; each refusal at its pointer")
    func patchChecks() throws {
        let good: JSONValue = [
            "os": ["id": "debian", "version": "12"], "storage": ["stateFree": 123], "machine": ["hostname": nil],
            "apps": ["kiosk": ["version": "2.3.1", "build_id": nil]],
        ]
        #expect(try DeviceInfo.checkPatch(good, apps: ["kiosk"]) == good.objectValue)
        #expect(try DeviceInfo.checkPatch(["apps": nil, "os": nil], apps: []) == ["apps": nil, "os": nil])
        // Another app's facts are dropped (a stale app must not hold back the rest); removing them is allowed.
        #expect(
            try DeviceInfo.checkPatch(["apps": ["menu": ["version": "1"], "old": nil], "os": ["id": "x"]], apps: ["kiosk"]) == [
                "apps": ["old": nil], "os": ["id": "x"],
            ])
        #expect(
            DeviceInfo.visible(["apps": ["menu": ["v": "1"], "kiosk": ["v": "2"]]], apps: ["kiosk"]) == ["apps": ["kiosk": ["v": "2"]]])
        #expect(DeviceInfo.visible(["apps": ["menu": ["v": "1"]], "os": ["id": "x"]], apps: ["kiosk"]) == ["os": ["id": "x"]])
        let refused: [(JSONValue, String)] = [
            (["kernel": ["release": "6.1"], "firmware": ["x": "1"]], "/firmware"),
            (["os": ["codename": "bookworm"]], "/os/codename"),
            (["os": ["version": 12]], "/os/version"),
            (["storage": ["stateFree": "lots"]], "/storage/stateFree"),
            (["storage": ["stateFree": -1]], "/storage/stateFree"),
            (["machine": ["hostname": .string(String(repeating: "h", count: 257))]], "/machine/hostname"),
            (["apps": ["kiosk": ["bad.name": "1"]]], "/apps/kiosk/bad.name"),
            (["apps": ["kiosk": ["version": ["nested": "no"]]]], "/apps/kiosk/version"),
            ("facts", ""),
        ]
        for (patch, pointer) in refused {
            #expect(throws: DocumentError.self, "\(patch)") { try DeviceInfo.checkPatch(patch, apps: ["kiosk"]) }
            do {
                _ = try DeviceInfo.checkPatch(patch, apps: ["kiosk"])
            } catch {
                #expect(error.location.description == pointer, "\(patch): \(error)")
            }
        }
    }

    @Test("applying a patch merges it, drops emptied groups, and refuses an app with more than 32 facts or facts past 16 KiB")
    func applying() throws {
        let stored: JSONObject = ["os": ["id": "debian"], "apps": ["kiosk": ["version": "1"]]]
        #expect(try DeviceInfo.applying(["apps": ["kiosk": ["version": nil]]], to: stored) == ["os": ["id": "debian"]])
        var many = JSONObject()
        for index in 0...DeviceInfo.maximumAppFacts { many["f\(index)"] = "x" }
        #expect(throws: DocumentError.self) { try DeviceInfo.applying(["apps": ["kiosk": .object(many)]], to: stored) }
        var apps = JSONObject()
        for app in 0..<3 {
            var facts = JSONObject()
            for index in 0..<DeviceInfo.maximumAppFacts { facts["f\(index)"] = .string(String(repeating: "v", count: 256)) }
            apps["app\(app)"] = .object(facts)
        }
        #expect(throws: DocumentError.self) { try DeviceInfo.applying(["apps": .object(apps)], to: [:]) }
    }

    @Test("facts by dotted name, a one-line summary, and filters with = and != (a device without the fact matches only !=)")
    func factsAndFilters() throws {
        let info: JSONObject = [
            "os": ["name": "Debian GNU/Linux", "version": "12"], "machine": ["arch": "aarch64"], "agent": ["version": "0.7.0"],
            "storage": ["stateFree": 42], "apps": ["kiosk": ["version": "2.3.1"]],
        ]
        #expect(
            DeviceInfo.facts(info).map(\.name) == [
                "agent.version", "apps.kiosk.version", "machine.arch", "os.name", "os.version", "storage.stateFree",
            ])
        #expect(DeviceInfo.fact("storage.stateFree", in: info) == "42")
        #expect(DeviceInfo.fact("os", in: info) == nil)
        #expect(DeviceInfo.summary(info) == "Debian GNU/Linux 12, aarch64, agent 0.7.0")
        #expect(try #require(DeviceInfoFilter("os.version=12")).matches(info))
        #expect(try #require(DeviceInfoFilter("apps.kiosk.version!=2.3.1")).matches(info) == false)
        #expect(try #require(DeviceInfoFilter("apps.menu.version!=1")).matches(info))
        #expect(try #require(DeviceInfoFilter("apps.menu.version=1")).matches(info) == false)
        #expect(try #require(DeviceInfoFilter("machine.hostname=")).matches(info) == false)
        for bad in ["os.version", "=12", ".os=1", "os..version=1", "!=3"] { #expect(DeviceInfoFilter(bad) == nil, "\(bad)") }
    }

    @Test("regular expressions in conditions: ~ and !~, searched anywhere unless anchored; a bad one is refused saying where")
    func regularExpressionFilters() throws {
        let info: JSONObject = ["os": ["version": "12"], "apps": ["kiosk": ["player": "2.4.1"]], "storage": ["stateFree": 4096]]
        #expect(try DeviceInfoFilter(parsing: #"apps.kiosk.player~^2\."#).matches(info))
        #expect(try DeviceInfoFilter(parsing: #"apps.kiosk.player~^1\."#).matches(info) == false)
        #expect(try DeviceInfoFilter(parsing: "apps.kiosk.player~4").matches(info), "found anywhere")
        #expect(try DeviceInfoFilter(parsing: "apps.kiosk.player~^4$").matches(info) == false)
        #expect(try DeviceInfoFilter(parsing: #"apps.kiosk.player!~^2\."#).matches(info) == false)
        #expect(try DeviceInfoFilter(parsing: "apps.menu.version!~x").matches(info), "no fact: only the negated forms match")
        #expect(try DeviceInfoFilter(parsing: "apps.menu.version~.*").matches(info) == false)
        #expect(try DeviceInfoFilter(parsing: "storage.stateFree~^40").matches(info), "integers as decimal text")
        // A value may hold = and ~; the first operator counts.
        let odd = try DeviceInfoFilter(parsing: "os.version=a=b~c")
        #expect(odd.comparison == .equals && odd.value == "a=b~c" && odd.description == "os.version=a=b~c")
        #expect(try DeviceInfoFilter(parsing: "os.version!~1[0-9]").comparison == .doesNotMatch)
        #expect(throws: DeviceInfoFilterError.self) { try DeviceInfoFilter(parsing: "apps.kiosk.player~(") }
        do {
            _ = try DeviceInfoFilter(parsing: "apps.kiosk.player~[z-a]")
            Issue.record("an inverted range compiled")
        } catch {
            #expect(error.description.hasPrefix(#"condition "apps.kiosk.player~[z-a]" holds an invalid regular expression at offset"#))
        }
        do {
            _ = try DeviceInfoFilter(parsing: "os.version 12")
            Issue.record("a condition without an operator was read")
        } catch {
            #expect(error.description.contains("must be NAME=VALUE, NAME!=VALUE, NAME~REGEX or NAME!~REGEX"))
        }
        for bad in ["~x", "a!b=1", "os.!version~x"] { #expect(DeviceInfoFilter(bad) == nil, "\(bad)") }
        // A pattern that backtracks catastrophically on a device's fact does not match rather than stall.
        let hostile: JSONObject = ["machine": ["hostname": .string(String(repeating: "a", count: 40) + "!")]]
        #expect(try DeviceInfoFilter(parsing: "machine.hostname~^(a+)+$").matches(hostile) == false)
        // … and a device cannot meet a !~ by making the match too expensive to decide.
        #expect(try DeviceInfoFilter(parsing: "machine.hostname!~^(a+)+$").matches(hostile) == false)
        #expect(try DeviceInfoFilter(parsing: "machine.hostname!~^(a+)+$").matches(["machine": ["hostname": "bbb"]]))
    }

    @Test("a group definition reads its query at each condition's pointer and writes it back")
    func groupDefinition() throws {
        let definition = try GroupDefinition(name: "rpi-12", json: ["where": ["machine.arch=aarch64", "os.version=12"]])
        #expect(definition.queryText == "machine.arch=aarch64 os.version=12")
        #expect(definition.admits(["machine": ["arch": "aarch64"], "os": ["version": "12"]]))
        #expect(definition.admits(["machine": ["arch": "aarch64"], "os": ["version": "11"]]) == false)
        #expect(try GroupDefinition(name: "rpi-12", json: definition.queryJSON) == definition)
        for (body, pointer) in [
            (["where": []] as JSONValue, "/where"), (["where": ["os.version=12", 7]], "/where/1"),
            (["where": ["os.version=12", "x~("]], "/where/1"), (["where": ["a=1"], "extra": 1], "/extra"), ([:], "/where"),
        ] as [(JSONValue, String)] {
            #expect(throws: DocumentError.self, "\(body)") { try GroupDefinition(name: "g", json: body) }
            do {
                _ = try GroupDefinition(name: "g", json: body)
            } catch {
                #expect(error.location.description == pointer, "\(body)")
            }
        }
        let summary = GroupSummary(name: "rpi-12", conditions: definition.conditions, members: 3)
        #expect(try GroupSummary(json: summary.json) == summary)
        let byHand = GroupSummary(name: "lobby", conditions: nil, members: 2)
        #expect(try GroupSummary(json: byHand.json) == byHand && byHand.json.objectValue?["where"] == nil)
        let detail = GroupDetail(summary: summary, devices: ["d-1", "d-2", "d-3"])
        #expect(try GroupDetail(json: detail.json) == detail)
        #expect(try GroupList(json: GroupList(groups: [summary, byHand]).json).groups == [summary, byHand])
    }

    @Test("an agent policy reads only its keys, each in range, at its pointer; it round-trips")
    func agentPolicy() throws {
        let policy = try AgentPolicy(json: [
            "logLevel": "debug", "pollInterval": 120, "longPollWait": 0, "jitter": 3, "statusReports": "brief",
        ])
        #expect(try AgentPolicy(json: policy.json) == policy)
        #expect(policy.summary == "logLevel=debug, pollInterval=120s, longPollWait=0s, jitter=3s, statusReports=brief")
        for (bad, pointer) in [
            (["logLevel": "loud"], "/logLevel"), (["pollInterval": 1], "/pollInterval"), (["longPollWait": 301], "/longPollWait"),
            (["jitter": 1.5], "/jitter"), (["statusReports": "verbose"], "/statusReports"), (["poll": 1], "/poll"),
        ] as [(JSONValue, String)] {
            do {
                _ = try AgentPolicy(json: bad)
                Issue.record("accepted \(bad)")
            } catch {
                #expect(error.location.description == pointer)
            }
        }
        // An agent reading a newer server's policy leaves out the keys it does not know.
        let newer: JSONValue = [
            "apps": [
                "kiosk": [
                    "policy": ["logLevel": "debug", "uploadLogs": true], "sources": ["logLevel": "app:kiosk", "uploadLogs": "app:kiosk"],
                ]
            ]
        ]
        #expect(throws: DocumentError.self) { try DevicePolicy(json: newer) }
        #expect(try DevicePolicy(json: newer, ignoringUnknownKeys: true).apps["kiosk"]?.policy == AgentPolicy(logLevel: "debug"))
        #expect(PolicyScope("group:lobby") == .group("lobby"))
        #expect(PolicyScope("device:d-1")?.description == "device:d-1")
        // The names of every scope: 1 to 128 characters, no control characters ("/" is one).
        for bad in ["lobby", "team:x", "app:", "group:a\u{7}b", "device:" + String(repeating: "d", count: 129)] {
            #expect(PolicyScope(bad) == nil)
        }
        #expect(PolicyScope("group:a/b") == .group("a/b") && Scope(parameter: "group:a/b") == .group("a/b"))
    }

    @Test("percent-encoding round-trips every byte; a malformed escape is refused")
    func percentEncoding() {
        for text in ["group:lobby", "a b/c~d", "ünïcode", "100%"] {
            #expect(PercentEncoding.decoded(PercentEncoding.encoded(text)) == text)
        }
        #expect(PercentEncoding.encoded("group:lobby") == "group%3Alobby")
        #expect(PercentEncoding.decoded("%zz") == nil)
        #expect(PercentEncoding.decoded("%4") == nil)
        #expect(PercentEncoding.decoded("%FF") == nil, "not UTF-8")
    }
}
