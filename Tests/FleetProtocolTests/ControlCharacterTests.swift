import FleetJSON
import FleetProtocol
import Testing

/// Issue 34: what a device reports for admins to read holds no control character.
@Suite("Device reports without control characters")
struct ControlCharacterTests {
    static func report(message: String) -> JSONValue {
        ["revision": 3, "schemaVersion": 1, "state": "error", "source": "agent", "message": .string(message)]
    }

    @Test("a status message may hold line breaks, tabs and any text; escapes, C1 and bidirectional controls are refused where they are")
    func statusMessages() throws {
        let problems = "/volume: must be at most 10\n/pin:\tnot four digits · é 日本 👍🏽"
        #expect(try StatusReport(json: Self.report(message: problems)).message == problems)
        for (message, expected) in [
            ("bad\u{1B}]52;c;AAAA\u{07}", "/message: contains a control character (U+001B) at offset 3"),
            ("x\r\u{1B}[2KFAKE", "/message: contains a control character (U+000D) at offset 1"),
            ("\u{9B}2J", "/message: contains a control character (U+009B) at offset 0"),
            ("abc\u{7F}", "/message: contains a control character (U+007F) at offset 3"),
            ("evil\u{202E}", "/message: contains a bidirectional control character (U+202E) at offset 4"),
        ] {
            #expect {
                try StatusReport(json: Self.report(message: message))
            } throws: { error in
                (error as? DocumentError)?.description == expected
            }
        }
        // Inside another message, the pointer is below it.
        #expect(throws: DocumentError(at: JSONPointer("/reports/2/message")!, "contains a control character (U+001B) at offset 0")) {
            try StatusReport(json: Self.report(message: "\u{1B}"), at: JSONPointer("/reports/2")!)
        }
    }

    @Test("reports kept from before the rule are still read: a server's device list, the agent's queue")
    func keptReports() throws {
        let hostile = "kept\u{1B}[2K"
        #expect(try StatusReport(json: Self.report(message: hostile), acceptingAnyMessage: true).message == hostile)
        var listed = Self.report(message: hostile).objectValue ?? [:]
        listed["receivedAt"] = "2026-11-25T06:00:00Z"
        #expect(try DeviceStatus(json: .object(listed), at: .root).report.message == hostile)
    }

    @Test("a fact is one line: any control character, even a line break, is refused at the fact's pointer")
    func facts() throws {
        for (patch, expected) in [
            (
                ["machine": ["hostname": "kio\u{1B}]52;c;AAAA\u{07}\u{1B}[2K\rFAKE LINE"]] as JSONValue,
                "/machine/hostname: contains a control character (U+001B) at offset 3"
            ),
            (["os": ["prettyName": "Debian\n12"]], "/os/prettyName: contains a control character (U+000A) at offset 6"),
            (
                ["apps": ["kiosk": ["version": "2\u{202E}1"]]],
                "/apps/kiosk/version: contains a bidirectional control character (U+202E) at offset 1"
            ),
        ] {
            #expect {
                try DeviceInfo.checkPatch(patch, apps: ["kiosk"])
            } throws: { error in
                (error as? DocumentError)?.description == expected
            }
        }
        let ordinary: JSONValue = ["machine": ["hostname": "kiosk-17"], "os": ["prettyName": "Débian 日本 👍🏽"]]
        #expect(try DeviceInfo.checkPatch(ordinary, apps: []) == ordinary.objectValue)
        // An app's own facts, as the inbox and FleetSettings check them.
        #expect(throws: DocumentError.self) { try DeviceInfo.checkAppFacts(["version": "1\u{07}"], at: .root) }
    }

    @Test("the agent reports a fact the server refuses as its escapes, cut to the longest fact")
    func reportableFacts() throws {
        #expect(DeviceInfo.reportable("kio\u{1B}[2K\rsk") == #"kio\e[2K\rsk"#)
        #expect(DeviceInfo.reportable("kiosk-17 · 日本") == "kiosk-17 · 日本")
        let long = DeviceInfo.reportable(String(repeating: "\u{07}", count: DeviceInfo.maximumFactLength))
        #expect(long.unicodeScalars.count == DeviceInfo.maximumFactLength)
        #expect(try DeviceInfo.checkPatch(["machine": ["hostname": .string(long)]], apps: []).isEmpty == false)
    }

    @Test("what another party wrote is kept printable: no control or format characters, cut to a length")
    func printablePrefix() {
        #expect("Alice\u{1B}[31m Smith\n\u{202E}evil".printablePrefix(100) == "Alice[31m Smithevil")
        #expect("ééééé".printablePrefix(3) == "ééé")
        #expect("\u{7}\u{200B}".printablePrefix(10) == "")
    }
}
