import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

@Suite("Key paths on the device and from the admin CLI, with a real agent")
struct KeyPathAgentTests {
    /// `signage`: a writable `playlist`, a `display` that only admins change.
    static let metadata: JSONValue = [
        "app": "sign", "version": 1,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "playlist": [
                    "type": "array", "x-writable": true, "default": [["content": "intro.mp4", "seconds": 5]],
                    "items": [
                        "type": "object", "required": ["content"], "additionalProperties": false,
                        "properties": ["content": ["type": "string"], "seconds": ["type": "integer", "minimum": 1]],
                    ],
                ],
                "display": ["type": "object", "default": ["brightness": 80], "properties": ["brightness": ["type": "integer"]]],
                "duration": ["type": "string", "enum": ["1", "5", "10"], "default": "5", "x-writable": true],
            ],
        ],
    ]

    @Test(
        "get reads by key path; set changes one value inside a writable setting (the whole setting goes, confirmed); a non-writable one is refused; admin set and unset by key path reach the device"
    )
    func keyPaths() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "sign", document: Array(Self.metadata.serialized().utf8))
        let agent = try await fleet.launchAgent([["id": "sign"]], storeMetadata: false)
        defer { agent.kill() }
        try await fleet.waitForSettings("sign", agent: agent) { _ in true }

        let get = try await fleet.cli(["get", "playlist/0/content"])
        #expect(get.status == 0 && get.standardOutput == "intro.mp4\n", "\(get)")
        #expect(try await fleet.cli(["get", "playlist/0/seconds"]).standardOutput == "5\n")
        let missing = try await fleet.cli(["get", "playlist/3/content"])
        #expect(missing.status == 1 && missing.standardError.contains("no setting /playlist/3/content"), "\(missing)")

        let set = try await fleet.cli(["set", "playlist/0/content=news.mp4", #"playlist/-={"content": "ad.mp4", "seconds": 8}"#, "--wait"])
        #expect(set.status == 0, "\(set)")
        let changed = try #require(fleet.settings("sign"))
        #expect(changed.values["playlist"] == [["content": "news.mp4", "seconds": 5], ["content": "ad.mp4", "seconds": 8]])
        let reset = try await fleet.cli(["set", "--reset", "playlist/1", "--wait"])
        #expect(reset.status == 0, "\(reset)")
        #expect(fleet.settings("sign")?.values["playlist"] == [["content": "news.mp4", "seconds": 5]])
        let twice = try await fleet.cli(["set", #"playlist/-={"content": "a.mp4"}"#, #"playlist/-={"content": "b.mp4"}"#])
        #expect(twice.status == 1 && twice.standardError.contains("playlist/- is given twice"), "\(twice)")
        let notWritable = try await fleet.cli(["set", "display/brightness=10"])
        #expect(notWritable.status == 1 && notWritable.standardError.contains("display"), "\(notWritable)")
        let invalid = try await fleet.cli(["set", "playlist/0/seconds=0"])
        #expect(invalid.status == 1 && invalid.standardError.contains("/playlist/0/seconds"), "\(invalid)")

        let common = ["--server", fleet.server.url, "--token-file", fleet.directory + "/admin.token"]
        let admin = try await CLIRunner.run(["admin", "set", "--app", "sign", "display/brightness=40"] + common)
        #expect(admin.status == 0, "\(admin)")
        try await fleet.waitForSettings("sign", agent: agent) { $0.values["display"] == ["brightness": 40] }
        let unset = try await CLIRunner.run(["admin", "unset", "--app", "sign", "display/brightness"] + common)
        #expect(unset.status == 0, "\(unset)")
        try await fleet.waitForSettings("sign", agent: agent) { $0.values["display"] == [:] }
        let staged = try await CLIRunner.run(["admin", "set", "--app", "sign", "display/brightness=1", "--rollout", "50%,100%"] + common)
        #expect(staged.status == 2 && staged.standardError.contains("a rollout stages whole settings"), "\(staged)")

        // One way to type a value on both sides: an enum of strings takes `1` as the text "1".
        let onDevice = try await fleet.cli(["set", "duration=1", "--wait"])
        #expect(onDevice.status == 0, "\(onDevice)")
        #expect(fleet.settings("sign")?.values["duration"] == "1")
        let fromAdmin = try await CLIRunner.run(["admin", "set", "--app", "sign", "--scope", "app", "duration=10"] + common)
        #expect(fromAdmin.status == 0, "\(fromAdmin)")
        #expect(try await fleet.admin.values(app: "sign", scope: "app").values["duration"] == "10")
        // A value the place cannot take is refused before anything is sent, naming where, as on the device.
        let wrongType = try await CLIRunner.run(["admin", "set", "--app", "sign", "display/brightness=bright"] + common)
        #expect(
            wrongType.status == 1 && wrongType.standardError.contains(#"/display/brightness: must be an integer (got "bright")"#),
            "\(wrongType)")
        let wrongOnDevice = try await fleet.cli(["set", "playlist/0/seconds=soon"])
        #expect(wrongOnDevice.status == 1 && wrongOnDevice.standardError.contains(#"/playlist/0/seconds: must be an integer (got "soon")"#))
    }

    /// `panel`: a writable `player` object whose `stream` holds a secret password the fleet rotates.
    static let playerMetadata: JSONValue = [
        "app": "panel", "version": 1,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "player": [
                    "type": "object", "x-writable": true, "additionalProperties": false,
                    "properties": [
                        "volume": ["type": "integer", "minimum": 0, "maximum": 10],
                        "stream": [
                            "type": "object",
                            "properties": ["url": ["type": "string"], "password": ["type": "string", "x-secret": true]],
                        ],
                    ],
                ]
            ],
        ],
    ]

    @Test(
        "a device's key-path write keeps only the value it changed: no copy of the setting (or its secret) at the device, and the fleet's later rotation reaches it"
    )
    func keyPathWriteKeepsOnlyTheLeaf() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "panel", document: Array(Self.playerMetadata.serialized().utf8))
        _ = try await fleet.admin.patchValues(
            app: "panel", scope: "app", patch: ["player": ["volume": 5, "stream": ["url": "rtsp://cam", "password": "first-secret"]]])
        let agent = try await fleet.launchAgent([["id": "panel"]], storeMetadata: false)
        defer { agent.kill() }
        try await fleet.waitForSettings("panel", agent: agent) { $0.values["player"]?["volume"] == 5 }
        let id = try fleet.identity().deviceId

        let set = try await fleet.cli(["set", "player/volume=9", "--wait"])
        #expect(set.status == 0 && set.standardOutput.contains("player/volume"), "\(set)")
        // The device's scope holds the one value, not the setting with the fleet's password in it.
        #expect(try await fleet.admin.values(app: "panel", scope: "device:\(id)").values == ["/player/volume": 9])
        let history = try await fleet.admin.history(app: "panel")
        let write = history.entries.first { $0.actor.hasPrefix("device") }
        #expect(write?.scopes.first?.patch == ["/player/volume": 9], "\(history.entries)")

        // The fleet rotates the password: the device gets it and keeps its own volume.
        _ = try await fleet.admin.setValue(
            app: "panel", scope: "app", keyPath: JSONPointer(keyPath: "player/stream/password")!, to: "second-secret")
        try await fleet.waitForSettings("panel", agent: agent) {
            $0.values["player"] == ["volume": 9, "stream": ["url": "rtsp://cam", "password": "second-secret"]]
        }
        // explain names the device as the source of the one value, the app as that of the rest.
        let explained = try await fleet.admin.explain(app: "panel", deviceID: id)
        #expect(explained.sources["player"] == "app" && explained.sources["/player/volume"] == "device:\(id)", "\(explained.sources)")
        let table = try await CLIRunner.run(
            ["admin", "explain", "--app", "panel", id, "--server", fleet.server.url, "--token-file", fleet.directory + "/admin.token"])
        #expect(table.standardOutput.contains("player/volume") && !table.standardOutput.contains("second-secret"), "\(table)")

        // --reset of the path gives the fleet's value again.
        let reset = try await fleet.cli(["set", "--reset", "player/volume", "--wait"])
        #expect(reset.status == 0, "\(reset)")
        #expect(try await fleet.admin.values(app: "panel", scope: "device:\(id)").values == [:])
        #expect(fleet.settings("panel")?.values["player"]?["volume"] == 5)
    }
}
