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
}
