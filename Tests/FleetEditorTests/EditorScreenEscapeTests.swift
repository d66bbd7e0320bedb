import FleetEditor
import FleetJSON
import FleetMetadata
import Testing

/// Issue 34: the metadata's strings are drawn on the device's terminal; none of their control
/// characters may reach it.
@Suite("The editor draws the metadata's text without its control characters")
struct EditorScreenEscapeTests {
    static let forbidden: [Unicode.Scalar] = ["\u{1B}", "\u{07}", "\r", "\u{9B}", "\u{202E}"]

    static func metadata() throws -> Metadata {
        try Metadata(
            [
                "app": "kiosk", "version": 1,
                "schema": [
                    "type": "object",
                    "properties": [
                        "greeting": [
                            "type": "string", "title": "Greet\u{1B}]52;c;SGVsbG8=\u{07}ing", "default": "hi\u{9B}2J", "x-writable": true,
                        ],
                        "mode": [
                            "type": "string", "title": "Mode", "enum": ["day", "night"], "x-enumTitles": ["Day\u{1B}[2K\rFAKE", "Night"],
                            "default": "day", "x-writable": true,
                        ],
                        "volume": ["type": "integer", "title": "Vol\u{07}ume", "default": 5, "x-writable": true],
                    ],
                ],
                "layout": [
                    [
                        "group": "Screen\u{202E}neercS",
                        "items": [["header": "Head\r\u{1B}[1Aer"], ["setting": "greeting"], ["setting": "mode"], ["setting": "volume"]],
                    ]
                ],
            ])
    }

    @Test("titles, group titles, headers, enum titles and values show as escapes; the values' column stays where it is")
    func escapedScreen() throws {
        let metadata = try Self.metadata()
        var editor = SettingsEditor(app: "kiosk", metadata: metadata, revision: 1, values: metadata.defaultValues)
        let lines = EditorScreen.render(editor)
        let text = lines.joined(separator: "\n")
        for scalar in Self.forbidden { #expect(!text.unicodeScalars.contains(scalar), "U+\(scalar.value): \(text)") }
        for fragment in [
            #"== Screen\u{202E}neercS =="#, #"-- Head\r\e[1Aer --"#, #"Greet\e]52;c;SGVsbG8=\x07ing [greeting]"#, #"hi\u{9B}2J"#,
            #"Day\e[2K\rFAKE"#,
        ] {
            #expect(text.contains(fragment), "\(fragment)\n\(text)")
        }
        #expect(lines.allSatisfy { $0.count <= 80 })
        // Labels are padded by what is drawn: the value of a title holding BEL starts in the values' column (40 of 80).
        let volume = try #require(lines.first { $0.contains("[volume]") })
        #expect(volume == "  " + #"Vol\x07ume [volume]"# + String(repeating: " ", count: 40 - 21) + "5", "\(volume)")

        // Choosing lists the enum's titles, escaped too.
        while editor.selectedField?.pointer.keyPath != "mode" { _ = editor.handle(.down) }
        _ = editor.handle(.enter)
        let choosing = EditorScreen.render(editor).joined(separator: "\n")
        #expect(choosing.contains(#"choose: [Day\e[2K\rFAKE] Night"#), "\(choosing)")
        for scalar in Self.forbidden { #expect(!choosing.unicodeScalars.contains(scalar)) }
    }
}
