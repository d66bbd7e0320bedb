import FleetJSON
import Testing

@Suite("The strict JSON reader")
struct JSONParserTests {
    @Test("a settings document parses to the expected values, keeping member order")
    func settingsDocument() throws {
        let value = try JSONParser.parse(
            #"{"app":"kiosk","revision":41,"values":{"duration":"2","showProgress":true,"volume":0.5,"tags":[],"note":null}}"#)
        #expect(value["app"] == "kiosk")
        #expect(value["revision"] == 41)
        #expect(value["values"]?.objectValue?.keys == ["duration", "showProgress", "volume", "tags", "note"])
        #expect(value["values"]?["volume"] == 0.5)
        #expect(value["values"]?["note"] == .null)
    }

    @Test("a duplicate key is refused, naming both places")
    func duplicateKeys() {
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse("{\n  \"duration\": \"1\",\n  \"duration\": \"2\"\n}") }
        #expect(error?.description == "line 3, column 3: duplicate key \"duration\" (first at line 2, column 3)")
    }

    @Test("with keepLast, a duplicate key keeps its first position and its last value")
    func keepLast() throws {
        let value = try JSONParser.parse(#"{"a":1,"b":2,"a":3}"#, duplicateKeys: .keepLast)
        #expect(value.objectValue?.keys == ["a", "b"])
        #expect(value["a"] == 3)
    }

    @Test("duplicate keys are checked per object, so the same key may appear in a nested one")
    func sameKeyInNestedObjects() throws {
        let value = try JSONParser.parse(#"{"duration":"1","list":[{"duration":5}]}"#)
        #expect(value["list"]?.arrayValue?.first?["duration"] == 5)
    }

    @Test(
        "integers stay exact to 64 bits; anything beyond becomes a Double",
        arguments: [
            ("9223372036854775807", JSONNumber.integer(.max)),
            ("-9223372036854775808", .integer(.min)),
            ("9007199254740993", .integer(9_007_199_254_740_993)),
            ("9223372036854775808", .double(9_223_372_036_854_775_808)),
            ("1.5e3", .double(1500)),
            ("-0", .integer(0)),
        ])
    func integers(text: String, expected: JSONNumber) throws {
        let value = try JSONParser.parse(text)
        guard case .number(let number) = value else {
            Issue.record("\(text) did not parse as a number")
            return
        }
        #expect(number == expected)
        if case .integer(let exact) = expected { #expect(number.int64Value == exact) }
    }

    @Test("1, 1.0 and 1e0 are the same number; 1.5 is not an integer")
    func numberEquality() throws {
        #expect(try JSONParser.parse("1") == JSONParser.parse("1.0"))
        #expect(try JSONParser.parse("1") == JSONParser.parse("1e0"))
        #expect(try JSONParser.parse("1.0").typeName == "integer")
        #expect(try JSONParser.parse("1.5").typeName == "number")
        #expect(Set([JSONValue.number(.integer(1)), .number(.double(1.0))]).count == 1)
    }

    @Test(
        "errors say what is wrong and where",
        arguments: [
            ("{\"a\":1,}", "line 1, column 8: expected a string key, found character '}'"),
            ("[1 2]", "line 1, column 4: expected ',' or ']' after an array element, found character '2'"),
            ("{\"a\" 1}", "line 1, column 6: expected ':' after the key \"a\""),
            ("[01]", "line 1, column 2: leading zeros are not allowed in numbers"),
            ("\"tab\there\"", "line 1, column 5: control character U+0009 must be escaped in a string"),
            ("\"\\x\"", "line 1, column 2: invalid escape \\'x' in a string"),
            ("\"\\uD800\"", "line 1, column 2: lone surrogate \\uD800 in a string"),
            ("1e400", "line 1, column 1: number 1e400 is out of range"),
            ("{}\n x", "line 2, column 2: unexpected character 'x' after the JSON value"),
            ("[\"é\", tru]", "line 1, column 7: invalid literal, expected true"),
            ("", "line 1, column 1: unexpected end of input, expected a value"),
        ])
    func errorMessages(text: String, expected: String) {
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
        #expect(error?.description == expected)
    }

    @Test("invalid UTF-8 and a byte-order mark are refused")
    func encoding() {
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0x22, 0xC3, 0x28, 0x22]) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse([0xEF, 0xBB, 0xBF, 0x7B, 0x7D]) }
    }

    @Test("escapes decode, surrogate pairs included")
    func escapes() throws {
        #expect(try JSONParser.parse(#""a\"\\\/\b\f\n\r\t\u00e9\uD83D\uDE00""#) == .string("a\"\\/\u{08}\u{0C}\n\r\té😀"))
    }

    @Test("deep nesting is refused with an error, never a crash", arguments: [513, 100_000])
    func deepNesting(depth: Int) {
        let text = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
        let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
        #expect(error?.message == "nesting deeper than 512 levels")
        #expect(throws: Never.self) { try JSONParser.parse(String(repeating: "[", count: 512) + String(repeating: "]", count: 512)) }
    }
}

@Suite("The JSON writer")
struct JSONWriterTests {
    @Test("compact output keeps member order; sortedKeys sorts them")
    func compact() throws {
        let value = try JSONParser.parse(#"{"b":[1,2.5,"x"],"a":{"c":null,"d":false}}"#)
        #expect(value.serialized() == #"{"b":[1,2.5,"x"],"a":{"c":null,"d":false}}"#)
        #expect(value.serialized(.sortedKeys) == #"{"a":{"c":null,"d":false},"b":[1,2.5,"x"]}"#)
    }

    @Test("pretty output indents by two spaces")
    func pretty() throws {
        let value = try JSONParser.parse(#"{"a":[1,{}],"b":[]}"#)
        #expect(value.serialized(.pretty) == "{\n  \"a\": [\n    1,\n    {}\n  ],\n  \"b\": []\n}")
    }

    @Test(
        "strings with quotes, control characters and non-ASCII round-trip",
        arguments: [
            "plain", "quote \" backslash \\", "line\nbreak\ttab", "\u{01}\u{1F}\u{7F}", "ünïcødé 😀", "",
        ])
    func stringRoundTrip(text: String) throws {
        let serialized = JSONValue.string(text).serialized()
        #expect(try JSONParser.parse(serialized) == .string(text))
    }

    @Test(
        "numbers are written in their shortest exact form",
        arguments: [
            (JSONNumber.integer(.max), "9223372036854775807"), (.double(0.1), "0.1"), (.double(2.0), "2"), (.double(1e-5), "1e-05"),
            (.double(1e300), "1e+300"),
        ])
    func numbers(number: JSONNumber, text: String) throws {
        #expect(number.description == text)
        #expect(try JSONParser.parse(text) == .number(number))
    }
}
