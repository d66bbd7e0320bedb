import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Foundation
import Testing

@Suite("Agent configuration")
struct ConfigurationTests {
    /// Reads `text` and looks its names up, as `AgentConfiguration.load` does with a file.
    static func parse(_ text: String) throws -> AgentConfiguration {
        try AgentConfiguration(json: try JSONParser.parse(Array(text.utf8))).resolvingAccounts(in: .system)
    }

    @Test("the minimum file gets the documented defaults")
    func defaults() throws {
        let configuration = try Self.parse(#"{"server": "https://fleet.example.com/", "apps": [{"id": "kiosk"}]}"#)
        #expect(configuration == AgentConfiguration(server: "https://fleet.example.com/", apps: [AppConfiguration(id: "kiosk")]))
        #expect(configuration.pollInterval == .seconds(60) && configuration.jitter == .seconds(5) && configuration.longPollWait == 55)
        #expect(configuration.stateDirectory == "/var/lib/fleetset" && configuration.inboxDirectory == "/var/spool/fleetset")
        #expect(configuration.enrollmentTokenFile == "/etc/fleetset/enrollment-token" && !configuration.allowInsecureHTTP)
        #expect(configuration.apps[0].hookTimeout == .seconds(30) && configuration.apps[0].onChange.isEmpty)
    }

    @Test("the agent policy keys the file sets are pinned; statusReports is full or brief")
    func pinnedPolicy() throws {
        #expect(try Self.parse(#"{"server": "https://f.example/", "apps": [{"id": "a"}]}"#).pinnedPolicy.isEmpty)
        let pinned = try Self.parse(
            #"{"server": "https://f.example/", "jitter": 0, "logLevel": "info", "statusReports": "brief", "apps": [{"id": "a"}]}"#)
        #expect(pinned.pinnedPolicy == [.jitter, .logLevel, .statusReports])
        #expect(pinned.statusReports == .brief)
        do {
            _ = try Self.parse(#"{"server": "https://f.example/", "statusReports": "chatty", "apps": [{"id": "a"}]}"#)
            Issue.record("statusReports chatty was accepted")
        } catch let error as DocumentError {
            #expect(error.location.description == "/statusReports" && error.message.contains("\"brief\""))
        }
    }

    @Test("every key is read; fractions of seconds are kept")
    func everyKey() throws {
        let configuration = try Self.parse(
            #"""
            {"server": "http://127.0.0.1:8443", "allowInsecureHTTP": true, "caFile": "/etc/ca.pem",
             "clientCertificate": "/etc/c.pem", "clientKey": "/etc/k.pem", "enrollmentTokenFile": "/t", "stateDirectory": "/s",
             "inboxDirectory": "/q", "pollInterval": 0.5, "jitter": 0, "longPollWait": 0, "readyTimeout": 1.25, "logLevel": "debug",
             "apps": [{"id": "a", "onChange": ["/bin/true", "x"], "hookTimeout": 2.5, "readers": "root", "$comment": "c"}]}
            """#)
        #expect(configuration.pollInterval == .milliseconds(500) && configuration.readyTimeout == .milliseconds(1250))
        #expect(configuration.jitter == .zero && configuration.longPollWait == 0 && configuration.logLevel == "debug")
        let expected = try AgentConfiguration(
            server: "x", apps: [AppConfiguration(id: "a", onChange: ["/bin/true", "x"], hookTimeout: .milliseconds(2500), readers: "root")]
        ).resolvingAccounts(in: .system)
        #expect(configuration.apps == expected.apps)
        #expect(configuration.apps.first?.readersGroup == 0)
        #expect(configuration.layout.settingsFile("a").path == "/s/apps/a/settings.json")
        #expect(configuration.layout.inboxDirectory("a") == "/q/a")
    }

    @Test(
        "bad values are refused with the key's pointer",
        arguments: [
            (#"{"apps": [{"id": "a"}]}"#, "/server: is missing"),
            (#"{"server": "ftp://x", "apps": [{"id": "a"}]}"#, "/server: must be an https:// URL"),
            (#"{"server": "http://127.0.0.1", "apps": [{"id": "a"}]}"#, "/server: must be https://; plain http:// needs allowInsecureHTTP"),
            (
                #"{"server": "http://10.0.0.1", "allowInsecureHTTP": true, "apps": [{"id": "a"}]}"#,
                "/allowInsecureHTTP: plain http:// is allowed only to a loopback server"
            ),
            (#"{"server": "http://127.0.0.1.evil.com", "allowInsecureHTTP": true, "apps": [{"id": "a"}]}"#, "/allowInsecureHTTP"),
            (
                #"{"server": "https://x", "apps": [{"id": "a"}], "pollInterval": 0}"#,
                "/pollInterval: must be a number of seconds from 0.1 to 86400 (got 0)"
            ),
            (#"{"server": "https://x", "apps": [{"id": "a"}], "jitter": "5"}"#, "/jitter: must be a number of seconds"),
            (#"{"server": "https://x", "apps": [{"id": "a"}], "longPollWait": 1.5}"#, "/longPollWait: must be an integer from 0 to 300"),
            (#"{"server": "https://x", "apps": [{"id": "a"}], "logLevel": "loud"}"#, "/logLevel: must be one of"),
            (
                #"{"server": "https://x", "apps": [{"id": "a"}], "clientKey": "/k"}"#,
                "/clientCertificate: clientCertificate and clientKey go together"
            ),
            (#"{"server": "https://x", "apps": [{"id": "a"}], "caFile": ""}"#, "/caFile: must be a file path"),
            (#"{"server": "https://x", "apps": [{"id": "A"}]}"#, "/apps/0/id: \"A\" is not an app id"),
            (#"{"server": "https://x", "apps": [{"id": "a"}, {"id": "a"}]}"#, "/apps/1/id: \"a\" is listed twice"),
            (#"{"server": "https://x", "apps": [{"id": "a", "onChange": []}]}"#, "/apps/0/onChange: must be an array"),
            (#"{"server": "https://x", "apps": [{"id": "a", "onChange": ["/bin/x", 3]}]}"#, "/apps/0/onChange/1: must be a string"),
            (
                #"{"server": "https://x", "apps": [{"id": "a", "readers": "no-such-group-here"}]}"#,
                "/apps/0/readers: there is no group named"
            ),
            (
                #"{"server": "https://x", "apps": [{"id": "a", "hookTimout": 3}]}"#,
                "/apps/0/hookTimout: unknown key; the keys are ackTimeout, applyWindows, expectAck, hookTimeout, id, onChange, readers, rollbackOnError, updateLockMaxHold, writers"
            ),
            (#"{"server": "https://x", "apps": [{"id": "a", "updateLockMaxHold": 5}]}"#, "/apps/0/updateLockMaxHold: must be"),
            (#"{"server": "https://x", "apps": {"id": "a"}}"#, "/apps: must be an array"),
            (
                #"{"server": "https://x", "apps": [{"id": "a", "applyWindows": ["Mon 25:00-26:00"]}]}"#,
                "/apps/0/applyWindows/0: must be a window like"
            ),
            (#"{"server": "https://x", "apps": [{"id": "a", "applyWindows": []}]}"#, "/apps/0/applyWindows: must name at least one window"),
            (
                #"{"server": "https://x", "apps": [{"id": "a", "rollbackOnError": "yes"}]}"#,
                "/apps/0/rollbackOnError: must be true or false"
            ),
            (#"[]"#, "/: must be an object"),
        ])
    func refused(text: String, expected: String) throws {
        do {
            _ = try Self.parse(text)
            Issue.record("accepted: \(text)")
        } catch let error as DocumentError {
            #expect(error.description.contains(expected), "\(error)")
        }
    }

    @Test("the documented example in Config/ is valid and lists every key the reader knows")
    func documentedExample() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let example = repository.appendingPathComponent("Config/fleetsetd.json").path
        let configuration = try AgentConfiguration.load(example)
        #expect(configuration.apps.map(\.id) == ["kiosk", "signage"])
        #expect(configuration.apps[0].expectAck && configuration.apps[0].writers.groups.keys.sorted() == ["staff"])
        #expect(configuration.apps[1].rollbackOnError && configuration.apps[1].applyWindows.map(\.description) == ["daily 01:00-05:00"])
        #expect(configuration.pinnedPolicy.isEmpty, "the example leaves the agent policy to the server")
        let readme = try String(contentsOf: repository.appendingPathComponent("Config/README.md"), encoding: .utf8)
        for key in [
            "server", "caFile", "clientCertificate", "clientKey", "enrollmentTokenFile", "stateDirectory", "inboxDirectory",
            "allowInsecureHTTP", "pollInterval", "jitter", "longPollWait", "readyTimeout", "logLevel", "statusReports", "apps", "onChange",
            "hookTimeout",
            "readers", "writers", "expectAck", "ackTimeout", "rollbackOnError", "applyWindows",
        ] {
            #expect(readme.contains("`\(key)`"), "Config/README.md does not document \(key)")
        }
    }

    @Test("an unreadable or non-JSON file names the file")
    func unreadable() throws {
        #expect(throws: ConfigurationError.self) { try AgentConfiguration.load("/nonexistent/fleetsetd.json") }
        do {
            _ = try AgentConfiguration.load("/nonexistent/fleetsetd.json")
        } catch {
            #expect(error.description == "/nonexistent/fleetsetd.json: cannot open /nonexistent/fleetsetd.json: No such file or directory")
        }
    }
}
