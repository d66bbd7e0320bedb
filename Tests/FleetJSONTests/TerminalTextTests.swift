import FleetJSON
import Testing

@Suite("Text from elsewhere shown on a terminal")
struct TerminalTextTests {
    /// Hostile text and how it is shown: escape sequences, C0, DEL, C1 and bidirectional controls.
    static let corpus: [(text: String, shown: String)] = [
        ("\u{1B}]52;c;SGVsbG8=\u{07}", #"\e]52;c;SGVsbG8=\x07"#),  // OSC 52 (write the clipboard) ended by BEL
        ("\u{1B}]52;c;SGVsbG8=\u{1B}\\", #"\e]52;c;SGVsbG8=\e\"#),  // … ended by ST (ESC \)
        ("ok\u{1B}[2K\rFAKE LINE", #"ok\e[2K\rFAKE LINE"#),  // CSI 2K erases the line, CR goes back to its start
        ("abc\u{08}\u{08}\u{08}xyz", #"abc\x08\x08\x08xyz"#),  // backspaces
        ("nul\u{00}byte", #"nul\x00byte"#),
        ("del\u{7F}", #"del\x7F"#),
        ("c1 \u{9B}2J", #"c1 \u{9B}2J"#),  // U+009B: CSI as one character
        ("\u{85}\u{80}\u{9F}", #"\u{85}\u{80}\u{9F}"#),
        ("evil\u{202E}txt.exe", #"evil\u{202E}txt.exe"#),  // right-to-left override
        ("\u{2066}\u{2069}\u{200E}\u{200F}\u{061C}\u{202A}", #"\u{2066}\u{2069}\u{200E}\u{200F}\u{61C}\u{202A}"#),
        ("two\nlines\tand a tab", #"two\nlines\tand a tab"#),
        ("\u{1F}\u{01}", #"\x1F\x01"#),
    ]

    @Test("every control character and bidirectional control shows as a visible escape; nothing of them is left")
    func hostileText() {
        for (text, shown) in Self.corpus {
            let escaped = TerminalText.escaped(text)
            #expect(escaped == shown, "\(Array(text.unicodeScalars))")
            #expect(!escaped.unicodeScalars.contains(where: TerminalText.isEscaped), "\(escaped)")
            #expect(TerminalText.escaped(escaped) == escaped, "escaping twice changes nothing")
        }
    }

    @Test("ordinary text is unchanged: accents, CJK, emoji, a backslash, a non-breaking space")
    func ordinaryText() {
        for text in ["kiosk-17", "Café é", "日本語のホスト", "👍🏽 🇩🇪 👩‍👩‍👧", #"C:\path\e"#, "a\u{A0}b", "U+2028\u{2028}", ""] {
            #expect(TerminalText.escaped(text) == text)
            #expect(TerminalText.escaped(text, keepingNewlinesAndTabs: true) == text)
            #expect(TerminalText.firstEscaped(in: text) == nil)
        }
    }

    @Test("a message of several lines keeps its line breaks and tabs; everything else is escaped all the same")
    func keepingLineBreaks() {
        #expect(TerminalText.escaped("a\nb\tc\r\n\u{1B}[31m", keepingNewlinesAndTabs: true) == "a\nb\tc\\r\n\\e[31m")
        #expect(TerminalText.firstEscaped(in: "a\nb\tc", allowingNewlinesAndTabs: true) == nil)
        #expect(TerminalText.firstEscaped(in: "a\nb\tc")?.offset == 1)
    }

    @Test("a check names the JSON pointer, the code point and its offset in Unicode scalars")
    func check() throws {
        let location = JSONPointer.root.appending("machine").appending("hostname")
        #expect(throws: DocumentError(at: location, "contains a control character (U+001B) at offset 3")) {
            try TerminalText.check("é日x\u{1B}]52;c;AA\u{07}", at: location)
        }
        #expect(throws: DocumentError(at: location, "contains a bidirectional control character (U+202E) at offset 4")) {
            try TerminalText.check("evil\u{202E}", at: location)
        }
        #expect(throws: DocumentError(at: location, "contains a control character (U+009B) at offset 0")) {
            try TerminalText.check("\u{9B}2J", at: location)
        }
        #expect(throws: DocumentError(at: location, "contains a control character (U+000A) at offset 1")) {
            try TerminalText.check("a\nb", at: location)
        }
        try TerminalText.check("a\nb\tc", at: location, allowingNewlinesAndTabs: true)
        try TerminalText.check("kiosk-17 · 日本 👍🏽", at: location)
    }

    @Test("JSON for a terminal: the same value, with C1 and bidirectional controls as \\u escapes; its layout untouched")
    func json() throws {
        let value: JSONValue = ["hostname": "a\u{1B}[2K\u{9B}\u{202E}é", "list": [1, "日本"]]
        let text = TerminalText.serialized(value, [.pretty, .sortedKeys])
        #expect(
            text == """
                {
                  "hostname": "a\\u001B[2K\\u009B\\u202Eé",
                  "list": [
                    1,
                    "日本"
                  ]
                }
                """)
        #expect(try JSONParser.parse(Array(text.utf8)) == value)
        #expect(TerminalText.serialized(["plain": "text"]) == #"{"plain":"text"}"#)
    }
}
