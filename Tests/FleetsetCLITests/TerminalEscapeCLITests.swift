import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Issue 34, item 2: what the server holds reaches the admin's terminal as visible escapes, never
/// as the control characters themselves; what a device may not report is refused at the server.
@Suite("fleetset admin shows the server's text without its control characters")
struct TerminalEscapeCLITests {
    /// OSC 52 (write the clipboard) ended by BEL, then CSI 2K (erase the line) and CR: a line that
    /// would overwrite what was printed before it.
    static let clipboardAndFakeLine = "\u{1B}]52;c;SGVsbG8=\u{07}\u{1B}[2K\rFAKE LINE"
    /// What the server still takes in admin text: a C1 CSI and a right-to-left override.
    static let c1AndBidi = "a\u{9B}2Jb\u{202E}txt"

    /// The characters no output may hold (a line break ends a line of it and is allowed).
    static let forbidden: [Unicode.Scalar] = ["\u{1B}", "\u{07}", "\r", "\u{08}", "\u{9B}", "\u{202E}"]

    static func expectNoControls(_ output: CLIRunner.Output, _ comment: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for scalar in forbidden {
            #expect(
                !output.standardOutput.unicodeScalars.contains(scalar) && !output.standardError.unicodeScalars.contains(scalar),
                "\(comment) printed U+\(String(scalar.value, radix: 16, uppercase: true)): \(output)", sourceLocation: sourceLocation)
        }
    }

    @Test("fleetset show on a device draws the metadata's titles and labels and the values as escapes; get to a pipe keeps the value")
    func deviceShow() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let state = directory.appendingPathComponent("state")
        let app = state.appendingPathComponent("apps/kiosk")
        try FileManager.default.createDirectory(at: app, withIntermediateDirectories: true)
        let metadata: JSONValue = [
            "app": "kiosk", "version": 1,
            "schema": [
                "type": "object",
                "properties": [
                    "greeting": ["type": "string", "title": .string("Greet" + Self.clipboardAndFakeLine), "default": "hi"],
                    "mode": ["type": "string", "title": "Mode\u{202E}", "enum": ["day", "night"], "default": "day"],
                ],
            ],
            "layout": [
                ["group": "Scr\u{9B}2Jeen", "items": [["header": "Head\u{08}\u{08}er"], ["setting": "greeting"], ["setting": "mode"]]]
            ],
        ]
        try CLIRunner.write(metadata.serialized(), to: app.appendingPathComponent("metadata.json"))
        let settings: JSONValue = [
            "app": "kiosk", "schemaVersion": 1, "revision": 3, "syncedAt": "2026-11-25T06:00:00Z",
            "values": ["greeting": .string("a" + Self.c1AndBidi), "mode": "day"],
        ]
        try CLIRunner.write(settings.serialized(), to: app.appendingPathComponent("settings.json"))
        let configuration = directory.appendingPathComponent("fleetsetd.json")
        let configurationDocument: JSONValue = [
            "server": "http://127.0.0.1:9", "allowInsecureHTTP": true, "stateDirectory": .string(state.path),
            "inboxDirectory": .string(directory.appendingPathComponent("inbox").path), "apps": [["id": "kiosk"]],
        ]
        try CLIRunner.write(configurationDocument.serialized(), to: configuration)

        let show = try await CLIRunner.run(["show", "--config", configuration.path])
        #expect(show.status == 0, "\(show)")
        Self.expectNoControls(show, "show")
        for fragment in [
            #"Scr\u{9B}2Jeen"#, #"— Head\x08\x08er —"#, #"Greet\e]52;c;SGVsbG8=\x07\e[2K\rFAKE LINE [greeting]: "aa\u{9B}2Jb\u{202E}txt""#,
            #"Mode\u{202E} [mode]: "day""#,
        ] {
            #expect(show.standardOutput.contains(fragment), "\(fragment)\n\(show.standardOutput)")
        }
        // To a pipe (a script), get prints the value as it is; --json escapes it as JSON.
        let get = try await CLIRunner.run(["get", "greeting", "--config", configuration.path])
        #expect(get.standardOutput == "a" + Self.c1AndBidi + "\n", "\(get)")
        let json = try await CLIRunner.run(["get", "greeting", "--json", "--config", configuration.path])
        #expect(json.standardOutput == #""aa\u009B2Jb\u202Etxt""# + "\n", "\(json)")
    }

    @Test("history messages, values, group names and device reports show as escapes; facts and reports with ESC are refused with 400")
    func adminOutput() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let admin = ["--server", server.url, "--token-file", directory.appendingPathComponent("admin.token").path]
        let metadataFile = directory.appendingPathComponent("kiosk.json")
        try CLIRunner.write(
            #"""
            {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
              "greeting": {"type": "string", "default": "hi"},
              "mode": {"type": "string", "enum": ["day\u009b2J", "night"], "default": "night"}}}}
            """#,
            to: metadataFile)
        let put = try await CLIRunner.run(["admin", "put-metadata", metadataFile.path] + admin)
        #expect(put.status == 0, "\(put)")

        // An admin's message and a value holding what a terminal obeys.
        let set = try await CLIRunner.run(
            ["admin", "set", "--app", "kiosk", "greeting=\(Self.c1AndBidi)", "--message", Self.clipboardAndFakeLine] + admin)
        #expect(set.status == 0, "\(set)")
        Self.expectNoControls(set, "admin set")
        #expect(set.standardOutput.contains(#"greeting = "a\u{9B}2Jb\u{202E}txt""#), "\(set)")

        // A refusal quoting the metadata, on standard error.
        let refused = try await CLIRunner.run(["admin", "set", "--app", "kiosk", "mode=dusk"] + admin)
        #expect(refused.status == 1, "\(refused)")
        Self.expectNoControls(refused, "a refused admin set")
        #expect(refused.standardError.contains(#"day\u{9B}2J"#), "\(refused)")

        let history = try await CLIRunner.run(["admin", "history", "--app", "kiosk"] + admin)
        #expect(history.status == 0, "\(history)")
        Self.expectNoControls(history, "admin history")
        #expect(history.standardOutput.contains(#"\e]52;c;SGVsbG8=\x07\e[2K\rFAKE LINE"#), "\(history)")
        #expect(history.lines.count == 3, "a header and two entries; no line of the message's own: \(history)")
        let historyJSON = try await CLIRunner.run(["admin", "history", "--app", "kiosk", "--json"] + admin)
        Self.expectNoControls(historyJSON, "admin history --json")
        #expect(historyJSON.standardOutput.contains(#"\u001B]52;c;SGVsbG8=\u0007\u001B[2K\rFAKE LINE"#), "\(historyJSON)")
        #expect(historyJSON.standardOutput.contains(#"a\u009B2Jb\u202Etxt"#), "\(historyJSON)")

        let values = try await CLIRunner.run(["admin", "values", "--app", "kiosk"] + admin)
        Self.expectNoControls(values, "admin values")
        #expect(values.standardOutput.contains(#"\u{9B}2Jb\u{202E}txt"#), "\(values)")

        // A group name may hold C1 and bidirectional controls (only C0 and DEL are refused).
        let tokenFile = directory.appendingPathComponent("enroll.token").path
        let group = "lobby\u{9B}2J\u{202E}"
        let token = try await CLIRunner.run(["admin", "enrollment-token", "--out", tokenFile, "--app", "kiosk", "--group", group] + admin)
        #expect(token.status == 0, "\(token)")
        Self.expectNoControls(token, "admin enrollment-token")
        let tokens = try await CLIRunner.run(["admin", "enrollment-tokens"] + admin)
        Self.expectNoControls(tokens, "admin enrollment-tokens")
        #expect(tokens.standardOutput.contains(#"lobby\u{9B}2J\u{202E}"#), "\(tokens)")

        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let enrollment = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
            let identity = try await FleetClient(http: http, baseURL: server.url, token: nil).enroll(
                enrollmentToken: enrollment, requestId: "terminal-escape-test-0001")
            let device = FleetClient(http: http, baseURL: server.url, token: identity.deviceToken)
            // The device's hostname and report with escape sequences: refused, naming the member.
            do {
                _ = try await device.reportDeviceInfo(["machine": ["hostname": .string("kio" + Self.clipboardAndFakeLine)]])
                Issue.record("a hostname with ESC was taken")
            } catch let error as FleetClientError {
                #expect(error.status == 400 && "\(error)".contains("/machine/hostname: contains a control character (U+001B) at offset 3"))
            }
            do {
                try await device.reportStatus(
                    app: "kiosk",
                    StatusReport(revision: 1, schemaVersion: 1, state: .error, message: Self.clipboardAndFakeLine, source: .agent))
                Issue.record("a status message with ESC was taken")
            } catch let error as FleetClientError {
                #expect(error.status == 400 && "\(error)".contains("/message: contains a control character (U+001B) at offset 0"))
            }
            // A report of several lines is taken; the list shows it in its one row.
            try await device.reportStatus(
                app: "kiosk",
                StatusReport(revision: 1, schemaVersion: 1, state: .error, message: "/a: bad\n/b:\tworse", source: .agent))
            _ = try await device.reportDeviceInfo(["machine": ["hostname": "kiosk-17"], "os": ["name": "Débian 日本"]])

            let devices = try await CLIRunner.run(["admin", "devices", "--app", "kiosk"] + admin)
            Self.expectNoControls(devices, "admin devices --app")
            #expect(devices.lines.count == 2, "a header and one row: \(devices)")
            #expect(devices.standardOutput.contains(#"/a: bad\n/b:\tworse"#), "\(devices)")
            let listed = try await CLIRunner.run(["admin", "devices"] + admin)
            Self.expectNoControls(listed, "admin devices")
            #expect(listed.standardOutput.contains(#"lobby\u{9B}2J\u{202E}"#) && listed.standardOutput.contains("Débian 日本"), "\(listed)")
            let shown = try await CLIRunner.run(["admin", "devices", "show", identity.deviceId] + admin)
            Self.expectNoControls(shown, "admin devices show")
            #expect(shown.standardOutput.contains("kiosk-17"), "\(shown)")
            let explained = try await CLIRunner.run(["admin", "explain", "--app", "kiosk", identity.deviceId] + admin)
            Self.expectNoControls(explained, "admin explain")
            #expect(explained.standardOutput.contains(#"\u{9B}2Jb\u{202E}txt"#), "\(explained)")

            // A rollout: its waves name the group, its patch holds the value, its devices their state.
            let started = try await CLIRunner.run(
                ["admin", "set", "--app", "kiosk", "--rollout", "group:\(group),100%", "greeting=\(Self.c1AndBidi)!"] + admin)
            #expect(started.status == 0, "\(started)")
            Self.expectNoControls(started, "admin set --rollout")
            let rollout = try await CLIRunner.run(["admin", "rollout", "status", "kiosk"] + admin)
            #expect(rollout.status == 0, "\(rollout)")
            Self.expectNoControls(rollout, "admin rollout status")
            #expect(
                rollout.standardOutput.contains(#"greeting="a\u{9B}2Jb\u{202E}txt!""#)
                    && rollout.standardOutput.contains(#"group:lobby\u{9B}2J\u{202E}"#), "\(rollout)")
        }
    }
}
