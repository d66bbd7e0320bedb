import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `fleetset edit` in a real terminal: tmux runs it in an 80×24 window; the test types with
/// `send-keys` and reads the screen with `capture-pane`, as a person would.
struct TmuxWindow {
    let socket = "fleetset-edit-\(UUID().uuidString.prefix(8))"
    let tmux = "/usr/bin/tmux"

    /// Starts `command` in a detached 80×24 session.
    func start(_ command: [String]) async throws {
        guard FileManager.default.isExecutableFile(atPath: tmux) else {
            throw ProcessFailed(log: "tmux is not installed (scripts/install-deps installs it)")
        }
        let line = command.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let started = try await CLIRunner.run(
            ["-L", socket, "-f", "/dev/null", "new-session", "-d", "-x", "80", "-y", "24", "-s", "edit", line + "; sleep 30"],
            executable: tmux)
        guard started.status == 0 else { throw ProcessFailed(log: "tmux did not start: \(started)") }
    }

    /// Sends keys by tmux's names (`Down`, `Enter`, `Escape`, `Space`, `BSpace`) or, with
    /// `literally`, as text.
    func send(_ keys: String..., literally: Bool = false) async throws {
        _ = try await CLIRunner.run(["-L", socket, "send-keys", "-t", "edit"] + (literally ? ["-l"] : []) + keys, executable: tmux)
    }

    /// The screen as text, one line per row.
    func screen() async throws -> String {
        try await CLIRunner.run(["-L", socket, "capture-pane", "-p", "-t", "edit"], executable: tmux).standardOutput
    }

    /// Waits until the screen shows every fragment; returns it.
    @discardableResult
    func waitFor(_ fragments: String..., timeout: Duration = .seconds(30)) async throws -> String {
        let deadline = ContinuousClock.now + timeout
        var text = ""
        while ContinuousClock.now < deadline {
            text = try await screen()
            if fragments.allSatisfy(text.contains) { return text }
            try await Task.sleep(for: .milliseconds(30))
        }
        throw ProcessFailed(log: "the screen never showed \(fragments):\n\(text)")
    }

    func stop() async {
        _ = try? await CLIRunner.run(["-L", socket, "kill-server"], executable: tmux)
    }
}

@Suite("fleetset edit in a real terminal (tmux)")
struct EditorTerminalTests {
    /// A kiosk with every kind of control: a group with a read-only title, a number with
    /// bounds, a toggle, a choice with titles, a secret; a pane with a list of items.
    static let metadata: JSONValue = [
        "app": "kiosk", "version": 1,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "title": ["type": "string", "title": "Title", "default": "Lobby"],
                "volume": ["type": "integer", "title": "Volume", "minimum": 0, "maximum": 10, "default": 5, "x-writable": true],
                "night": ["type": "boolean", "title": "Night mode", "default": false, "x-writable": true],
                "mode": [
                    "type": "string", "title": "Mode", "enum": ["day", "night", "auto"], "x-enumTitles": ["Day", "Night", "Automatic"],
                    "default": "day", "x-writable": true,
                ],
                "pin": [
                    "type": "string", "title": "PIN", "pattern": "^[0-9]{4}$", "default": "0000", "x-secret": true, "x-writable": true,
                ],
                "playlist": [
                    "type": "array", "title": "Playlist", "x-writable": true, "default": [["content": "intro.mp4"]],
                    "items": [
                        "type": "object", "additionalProperties": false,
                        "properties": ["content": ["type": "string", "title": "Content"], "seconds": ["type": "integer", "minimum": 1]],
                    ],
                ],
            ],
        ],
        "layout": [
            [
                "group": "Screen",
                "items": [["setting": "title"], ["setting": "volume"], ["setting": "night"], ["setting": "mode"], ["setting": "pin"]],
            ],
            [
                "group": "Content",
                "items": [
                    ["header": "What plays"],
                    ["pane": "Media", "items": [["list": "playlist", "items": [["setting": "content"], ["setting": "seconds"]]]]],
                ],
            ],
        ],
    ]

    @Test(
        "move, type (checked as typed), toggle, choose, a hidden secret, a list's add and reorder; save goes through the agent and the server confirms"
    )
    func editAndSave() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        _ = try await fleet.admin.putMetadata(app: "kiosk", document: Array(Self.metadata.serialized().utf8))
        let agent = try await fleet.launchAgent([["id": "kiosk"]], storeMetadata: false)
        defer { agent.kill() }
        let first = try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let window = TmuxWindow()
        defer { Task { await window.stop() } }
        try await window.start([CLIRunner.product("fleetset"), "edit", "--config", fleet.configurationFile])
        var screen = try await window.waitFor("fleetset edit · kiosk · revision \(first.revision)", "== Screen ==")
        #expect(screen.contains("Title [title]") && screen.contains("(read-only, from defaults)"), "\(screen)")
        #expect(screen.split(separator: "\n", omittingEmptySubsequences: false).allSatisfy { $0.count <= 80 })

        // The cursor starts on the title (read-only): Enter says so.
        try await window.send("Enter")
        try await window.waitFor("is read-only here")
        // Volume: typed, checked as typed with the schema's message.
        try await window.send("Down", "Enter", "BSpace")
        try await window.send("12", literally: true)
        screen = try await window.waitFor("* Volume [volume]", "12_", "! volume: must be <= 10 (got 12)")
        try await window.send("BSpace", "0", "Enter")
        screen = try await window.waitFor("> Volume [volume]")
        #expect(screen.contains("10") && !screen.contains("must be <="), "\(screen)")
        // A toggle, a choice with its titles.
        try await window.send("Down", "Space")
        try await window.waitFor("[x] on", "2 unsaved")
        try await window.send("Down", "Enter")
        try await window.waitFor("choose: [Day] Night Automatic")
        try await window.send("Down", "Enter")
        try await window.waitFor("> Mode [mode]", "Night", "3 unsaved")
        // The secret: typed hidden; the screen never shows it.
        try await window.send("Down", "Enter")
        try await window.send("4321", literally: true)
        screen = try await window.waitFor("****_")
        #expect(!screen.contains("4321"))
        try await window.send("Enter")
        screen = try await window.waitFor("> PIN [pin]", "********")
        #expect(!screen.contains("4321"))

        // The pane, its list: add an item, type its content, move it first.
        try await window.send("Down", "Enter")
        try await window.waitFor("kiosk › Media", "Playlist (1 items)")
        try await window.send("Enter")
        try await window.waitFor("1. content: intro.mp4", "+ add an item")
        try await window.send("a")
        try await window.waitFor("item 2", "Content [content]")
        try await window.send("Enter")
        try await window.send("news.mp4", literally: true)
        try await window.send("Enter", "Escape")
        try await window.waitFor("2. content: news.mp4")
        try await window.send("[")
        screen = try await window.waitFor("1. content: news.mp4", "2. content: intro.mp4")

        // Back to the top and save: the agent sends it, the server confirms, the file has it.
        try await window.send("Escape", "Escape", "s")
        screen = try await window.waitFor("saved: revision")
        #expect(!screen.contains("unsaved"), "\(screen)")
        let saved = try #require(fleet.settings("kiosk"))
        #expect(saved.revision > first.revision)
        #expect(saved.values["volume"] == 10 && saved.values["night"] == true && saved.values["mode"] == "night")
        #expect(saved.values["pin"] == "4321")
        #expect(saved.values["playlist"] == [["content": "news.mp4"], ["content": "intro.mp4"]])
        #expect(saved.values["title"] == "Lobby")
        try await fleet.waitForStatusLine("kiosk", containing: ["state=applied", "revision=\(saved.revision)"], agent: agent)

        // q leaves at once with nothing unsaved, and the terminal is given back.
        try await window.send("q")
        let deadline = ContinuousClock.now + .seconds(10)
        var final = try await window.screen()
        while final.contains("fleetset edit ·"), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(30))
            final = try await window.screen()
        }
        #expect(!final.contains("fleetset edit ·"), "the editor is still on screen:\n\(final)")
    }
}
