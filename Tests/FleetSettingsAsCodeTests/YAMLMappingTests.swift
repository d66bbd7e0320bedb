import FleetJSON
import FleetProtocol
import FleetSettingsAsCode
import Testing

/// The YAML of a settings tree: what is written reads back as the same JSON, strings that look
/// like other types stay strings, and bad input is refused with its file, line and column.
@Suite struct YAMLMappingTests {
    /// Strings any YAML reader could take for another type are quoted, and read back as text.
    @Test(arguments: [
        "no", "No", "NO", "yes", "on", "off", "On", "y", "n", "true", "false", "null", "Null", "~", "", "12", "-3", "0.5",
        "1e3", "0x1F", "0o17", "1_000", "2026-11-27", "<<", "=", " padded", "trailing ", ".inf", "- item", "a: b", "#comment",
        "!secret x", "\"quoted\"", "line\nbreak", "tab\there", "\u{1B}[31m", "\u{9B}", "\u{2028}", "ünïcödé", "@home", "%25",
        "12abc", "[1]", "{a}", "*alias", "&anchor", "|", ">", "'single'", "~x", "!x", "a!=b", "a~^2\\.", "x ~", "~ ",
    ])
    func stringsRoundTripAsStrings(_ text: String) throws {
        let document = TreeDocument(values: ["value": .string(text), text.isEmpty ? "empty" : text: .string("key")])
        let yaml = TreeYAML.text(of: document)
        #expect(try TreeYAML.document(yaml, file: "t.yaml") == document, "\(yaml)")
    }

    @Test func plainWhenSafe() {
        #expect(
            TreeYAML.text(of: TreeDocument(values: ["title": "Lobby screen", "url": "https://x"]))
                == "title: Lobby screen\nurl: \"https://x\"\n")
        #expect(TreeYAML.text(of: TreeDocument(values: ["answer": "no"])) == "answer: \"no\"\n")
        #expect(
            TreeYAML.text(of: TreeDocument(values: ["where": ["os.version!=11", "apps.kiosk.player~^2"]]))
                == "where:\n  - os.version!=11\n  - apps.kiosk.player~^2\n")
        #expect(TreeYAML.text(of: TreeDocument()) == "{}\n")
    }

    /// Integers stay integers, other numbers numbers, nested collections keep their shape.
    @Test func typesAndNesting() throws {
        let values: JSONObject = [
            "volume": 5, "ratio": 0.25, "big": .number(.double(1e21)), "negative": -7, "flag": true, "off": false, "nothing": .null,
            "list": [1, "two", [3, [4]], ["a": 1, "b": ["c": []]], [:]],
            "nested": ["inner": ["deep": "yes", "count": 0], "empty": [:], "items": []],
            "huge": try JSONParser.parse(Array("123456789012345678901234567890".utf8)),
        ]
        let yaml = TreeYAML.text(of: TreeDocument(values: values))
        let read = try TreeYAML.document(yaml, file: "t.yaml")
        #expect(read.values == values)
        #expect(read.values["volume"] == .number(.integer(5)))
        #expect(read.values["ratio"] == .number(.double(0.25)))
        // Sorted keys, stable bytes: writing what was read gives the same text.
        #expect(TreeYAML.text(of: read) == yaml)
    }

    /// Plain scalars are typed by the YAML 1.2 core schema, not YAML 1.1.
    @Test func coreSchemaReading() throws {
        let yaml = """
            a: yes
            b: on
            c: 12
            d: 1e3
            e: ~
            f: True
            g: 0x10
            h: "12"
            i: '1e3'
            j: !!str 7
            k: 0o17
            l: +5
            m: 012
            n: |
              two
              lines
            """
        let values = try TreeYAML.document(yaml, file: "t.yaml").values
        #expect(values["a"] == "yes")
        #expect(values["b"] == "on")
        #expect(values["c"] == .number(.integer(12)))
        #expect(values["d"] == .number(.double(1000)))
        #expect(values["e"] == .null)
        #expect(values["f"] == .bool(true))
        #expect(values["g"] == .number(.integer(16)))
        #expect(values["h"] == "12")
        #expect(values["i"] == "1e3")
        #expect(values["j"] == "7")
        #expect(values["k"] == .number(.integer(15)))
        #expect(values["l"] == .number(.integer(5)))
        #expect(values["m"] == .number(.integer(12)))
        #expect(values["n"] == "two\nlines")
    }

    /// Secret references are written as tags and read back at their places, nested ones too.
    @Test func secretReferences() throws {
        let document = TreeDocument(
            values: ["pin": TreeYAML.secretPlaceholder, "accounts": [["name": "a", "password": TreeYAML.secretPlaceholder]]],
            secrets: ["/pin": "kiosk/pin", "/accounts/0/password": "kiosk/accounts/0/password"])
        let yaml = TreeYAML.text(of: document)
        #expect(yaml.contains("pin: !secret kiosk/pin"))
        #expect(yaml.contains("  password: !secret kiosk/accounts/0/password"))
        #expect(try TreeYAML.document(yaml, file: "t.yaml") == document)
        #expect(throws: TreeError.self) { try TreeYAML.document("pin: !secret kiosk/pin\n", file: "p.yaml", allowSecrets: false) }
    }

    /// Bad input is refused with what and where.
    @Test(arguments: [
        ("a: [1, 2\n", 2, "not YAML"),
        ("a: 1\na: 2\n", 1, "written twice"),
        ("- 1\n- 2\n", 1, "must be a mapping"),
        ("a: 1\nb: !custom 3\n", 2, "the tag !custom"),
        ("a: 1\nb: .inf\n", 2, "not a JSON number"),
        ("a: &x 1\nb: *x\n", 1, "aliases"),
        ("a: !!int twelve\n", 1, "is not a number"),
        ("a:\n  ? [1]\n  : 2\n", 2, "a key must be a name"),
        ("a: !secret nopath\n", 1, "APP/KEYPATH"),
    ])
    func errorsNameFileAndLine(_ yaml: String, _ line: Int, _ words: String) {
        do {
            _ = try TreeYAML.document(yaml, file: "apps/kiosk/values/app.yaml")
            Issue.record("\(yaml) was read")
        } catch {
            #expect(error.file == "apps/kiosk/values/app.yaml")
            #expect(error.line == line, "\(error)")
            #expect(error.description.contains(words), "\(error)")
            #expect(error.description.hasPrefix("apps/kiosk/values/app.yaml:\(line):"), "\(error)")
        }
    }

    /// A "billion laughs" of nested aliases is refused before Yams expands it; `&` and `*`
    /// inside a scalar, a quoted string or a comment are text.
    @Test func aliasesRefusedBeforeTheyExpand() throws {
        var bomb = "a: &a [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n"
        for level in 1...9 {
            let name = String(UnicodeScalar(UInt8(97 + level)))
            let previous = String(UnicodeScalar(UInt8(96 + level)))
            bomb += "\(name): &\(name) [" + Array(repeating: "*\(previous)", count: 9).joined(separator: ", ") + "]\n"
        }
        bomb += "? *j\n: 1\n"
        do {
            _ = try TreeYAML.document(bomb, file: "bomb.yaml")
            Issue.record("the aliases were read")
        } catch {
            #expect(error.line == 1 && error.column == 4 && error.description.contains("anchors and aliases"), "\(error)")
        }
        let text = try TreeYAML.document(
            "note: see *this* & that  # &x *y\nquoted: \"a: *b, [&c]\"\nsingle: 'it''s *d'\nlist: [\"*e\", f*g]\nurl: http://x/*\n",
            file: "t.yaml")
        #expect(text.values["note"] == "see *this* & that")
        #expect(text.values["quoted"] == "a: *b, [&c]" && text.values["single"] == "it's *d")
        #expect(text.values["list"] == ["*e", "f*g"] && text.values["url"] == "http://x/*")
        #expect(throws: TreeError.self) {
            try TreeYAML.document(String(repeating: "a", count: TreeYAML.maximumFileSize + 1), file: "big.yaml")
        }
    }

    @Test func emptyFileIsEmptyMapping() throws {
        #expect(try TreeYAML.document("", file: "t.yaml") == TreeDocument())
        #expect(try TreeYAML.document("{}\n", file: "t.yaml") == TreeDocument())
    }
}
