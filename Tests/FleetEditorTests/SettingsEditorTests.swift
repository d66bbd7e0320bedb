import FleetEditor
import FleetJSON
import FleetMetadata
import Testing

@Suite("The settings editor as a value: keys in, screens and saves out")
struct SettingsEditorTests {
    static func metadata() throws -> Metadata {
        try Metadata(
            [
                "app": "kiosk", "version": 1,
                "schema": [
                    "type": "object", "additionalProperties": false,
                    "properties": [
                        "title": ["type": "string", "title": "Title", "default": "Lobby"],
                        "volume": ["type": "integer", "title": "Volume", "minimum": 0, "maximum": 10, "default": 5, "x-writable": true],
                        "night": ["type": "boolean", "default": false, "x-writable": true],
                        "mode": [
                            "type": "string", "enum": ["day", "night"], "x-enumTitles": ["Day", "Night"], "default": "day",
                            "x-writable": true,
                        ],
                        "pin": ["type": "string", "pattern": "^[0-9]{4}$", "default": "0000", "x-secret": true, "x-writable": true],
                        "playlist": [
                            "type": "array", "x-writable": true, "default": [["content": "a.mp4"], ["content": "b.mp4"]],
                            "items": ["type": "object", "properties": ["content": ["type": "string"]]],
                        ],
                        "unplaced": ["type": "integer", "default": 1],
                        "accounts": [
                            "type": "array", "x-writable": true, "default": [["user": "ops", "password": "hunter2"]],
                            "items": [
                                "type": "object",
                                "properties": ["user": ["type": "string"], "password": ["type": "string", "x-secret": true]],
                            ],
                        ],
                    ],
                ],
                "layout": [
                    [
                        "group": "Screen",
                        "items": [
                            ["setting": "title"], ["setting": "volume"], ["setting": "night"], ["setting": "mode"], ["setting": "pin"],
                        ],
                    ],
                    [
                        "group": "Content",
                        "items": [["pane": "Media", "items": [["list": "playlist", "items": [["setting": "content"]]]]]],
                    ],
                    ["group": "Access", "items": [["list": "accounts", "items": [["setting": "user"], ["setting": "password"]]]]],
                ],
            ])
    }

    static func editor() throws -> SettingsEditor {
        let metadata = try metadata()
        return SettingsEditor(
            app: "kiosk", metadata: metadata, revision: 4, values: metadata.defaultValues, sources: ["title": "group:lobby"])
    }

    static func screen(_ editor: SettingsEditor) -> String { EditorScreen.render(editor).joined(separator: "\n") }

    @Test("the layout's groups, panes and the settings it leaves out, in 80×24; read-only settings say where they come from")
    func layout() throws {
        let editor = try Self.editor()
        let lines = EditorScreen.render(editor)
        #expect(lines.count == 24 && lines.allSatisfy { $0.count <= 80 })
        let text = lines.joined(separator: "\n")
        for fragment in [
            "== Screen ==", "> Title [title]", "(read-only, from group:lobby)", "== Content ==", "Media ...", "== Other ==", "unplaced",
        ] {
            #expect(text.contains(fragment), "\(fragment)\n\(text)")
        }
        #expect(text.contains("********") && !text.contains("0000"), "a secret is never drawn")
    }

    @Test("typing is checked as typed with the schema's message; Esc puts the value back; Enter waits for a value that fits")
    func typing() throws {
        var editor = try Self.editor()
        _ = editor.handle(.down)
        _ = editor.handle(.enter)
        _ = editor.handle(.backspace)
        for character in "12" { _ = editor.handle(.character(character)) }
        #expect(editor.value(at: JSONPointer(keyPath: "volume")!) == 12)
        #expect(Self.screen(editor).contains("! volume: must be <= 10 (got 12)"))
        _ = editor.handle(.enter)
        #expect(editor.mode != .browsing, "a value that does not fit keeps the field open")
        _ = editor.handle(.character("x"))
        #expect(editor.error(at: JSONPointer(keyPath: "volume")!) == "must be a whole number")
        _ = editor.handle(.escape)
        #expect(editor.mode == .browsing && editor.value(at: JSONPointer(keyPath: "volume")!) == 5 && editor.errors.isEmpty)
        #expect(editor.handle(.character("s")) == nil && editor.status == "nothing to save")
    }

    @Test("a toggle, a choice by its titles, a hidden secret; save sends the changed settings only")
    func controlsAndSave() throws {
        var editor = try Self.editor()
        _ = editor.handle(.down)
        _ = editor.handle(.down)
        _ = editor.handle(.character(" "))
        _ = editor.handle(.down)
        _ = editor.handle(.enter)
        #expect(Self.screen(editor).contains("choose: [Day] Night"))
        _ = editor.handle(.down)
        _ = editor.handle(.enter)
        _ = editor.handle(.down)
        _ = editor.handle(.enter)
        for character in "98" { _ = editor.handle(.character(character)) }
        #expect(Self.screen(editor).contains("**_") && !Self.screen(editor).contains("98"))
        #expect(editor.error(at: JSONPointer(keyPath: "pin")!) != nil)
        #expect(editor.handle(.control("s")) == nil, "typing: not saved")
        for character in "76" { _ = editor.handle(.character(character)) }
        _ = editor.handle(.enter)
        #expect(!Self.screen(editor).contains("9876"))
        #expect(editor.handle(.character("s")) == .save(["night": true, "mode": "night", "pin": "9876"]))
        editor.saved(revision: 5, values: editor.draft)
        #expect(editor.changedKeys.isEmpty && editor.status == "saved: revision 5")
        #expect(editor.handle(.character("q")) == .quit)
    }

    @Test("a list: open it, add an item, remove one, move one; read-only settings are not changed; q asks twice with changes")
    func lists() throws {
        var editor = try Self.editor()
        while editor.selectedField?.pointer.keyPath != "pin" { _ = editor.handle(.down) }
        _ = editor.handle(.down)
        _ = editor.handle(.enter)  // the pane
        #expect(editor.breadcrumb == "kiosk › Media")
        _ = editor.handle(.enter)  // the list
        #expect(Self.screen(editor).contains("1. content: a.mp4") && Self.screen(editor).contains("+ add an item"))
        _ = editor.handle(.down)
        _ = editor.handle(.character("["))
        #expect(editor.value(at: JSONPointer(keyPath: "playlist")!) == [["content": "b.mp4"], ["content": "a.mp4"]])
        _ = editor.handle(.character("d"))
        #expect(editor.value(at: JSONPointer(keyPath: "playlist")!) == [["content": "a.mp4"]])
        _ = editor.handle(.character("a"))
        #expect(editor.breadcrumb == "kiosk › Media › playlist › item 2")
        _ = editor.handle(.enter)
        for character in "c.mp4" { _ = editor.handle(.character(character)) }
        _ = editor.handle(.enter)
        _ = editor.handle(.escape)
        #expect(editor.value(at: JSONPointer(keyPath: "playlist")!) == [["content": "a.mp4"], ["content": "c.mp4"]])
        // Saving sends only the place that differs from what the device had, as a key-path value.
        var saving = editor
        #expect(saving.handle(.character("s")) == .save(["/playlist/1/content": "c.mp4"]))
        _ = editor.handle(.escape)
        _ = editor.handle(.escape)
        #expect(editor.breadcrumb == "kiosk")
        // The read-only title: Enter says so, nothing changes.
        _ = editor.handle(.home)
        _ = editor.handle(.enter)
        #expect(editor.status == "Title [title] is read-only here: set by group:lobby")
        #expect(editor.handle(.character("q")) == nil && editor.status.contains("unsaved"))
        #expect(editor.handle(.character("q")) == .quit)
    }

    @Test("a secret inside a list's items is never drawn: not in the list, not in the item; it is typed hidden")
    func nestedSecrets() throws {
        var editor = try Self.editor()
        for _ in 0..<20 {
            if case .opens("accounts", _) = editor.rows[editor.cursor] { break }
            _ = editor.handle(.down)
        }
        _ = editor.handle(.enter)
        var text = Self.screen(editor)
        #expect(text.contains("1. password: ********, user: ops") && !text.contains("hunter2"), "\(text)")
        _ = editor.handle(.enter)
        _ = editor.handle(.down)
        text = Self.screen(editor)
        #expect(text.contains("> password") && text.contains("********") && !text.contains("hunter2"), "\(text)")
        _ = editor.handle(.enter)
        for character in "s3cret" { _ = editor.handle(.character(character)) }
        #expect(!Self.screen(editor).contains("s3cret"))
        _ = editor.handle(.enter)
        #expect(editor.value(at: JSONPointer(keyPath: "accounts/0/password")!) == "s3cret")
    }

    @Test("keys from the bytes a terminal sends, split across reads; a lone Esc once nothing follows")
    func keyDecoding() {
        var decoder = KeyDecoder()
        #expect(
            decoder.keys(from: Array("a\u{1b}[A\u{1b}OB\r\u{7f}\u{13}".utf8)) == [
                .character("a"), .up, .down, .enter, .backspace, .control("s"),
            ])
        #expect(decoder.keys(from: [0x1b, UInt8(ascii: "[")]).isEmpty && decoder.isHolding)
        #expect(decoder.keys(from: Array("5~".utf8)) == [.pageUp])
        #expect(decoder.keys(from: [0x1b]).isEmpty)
        #expect(decoder.flush() == [.escape])
        #expect(decoder.keys(from: Array("é\u{1b}[3~".utf8)) == [.character("é"), .delete])
    }
}
