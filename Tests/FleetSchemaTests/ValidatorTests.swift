import FleetJSON
import FleetSchema
import Foundation
import Testing

@Suite("Validation errors")
struct ValidationErrorTests {
    static let settings: JSONValue = [
        "type": "object",
        "properties": [
            "duration": ["enum": ["1", "2"]],
            "volume": ["type": "integer", "minimum": 0, "maximum": 10],
            "name": ["type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[a-z]+$"],
            "pin": ["type": "string", "pattern": "^[0-9]{4}$", "x-secret": true],
            "tags": ["type": "array", "items": ["type": "string"], "uniqueItems": true, "maxItems": 3],
            "step": ["multipleOf": 0.5],
        ],
        "required": ["duration"],
        "additionalProperties": false,
    ]

    func errors(_ instance: JSONValue, schema: JSONValue = settings) throws -> [String] {
        let compiled = try JSONSchema(schema)
        let errors = compiled.validate(instance)
        #expect(compiled.isValid(instance) == errors.isEmpty)
        return errors.map(\.description)
    }

    @Test("each failure has the instance pointer and a message a person understands, in document order")
    func messages() throws {
        let instance: JSONValue = [
            "duration": "5", "volume": 11, "name": "ABCDE", "tags": ["a", "b", "a", "c"], "step": 1.25, "colour": "red",
        ]
        #expect(
            try errors(instance) == [
                #"/duration: must be one of "1", "2" (got "5")"#,
                "/volume: must be <= 10 (got 11)",
                "/name: must be at most 4 characters long (got 5)",
                #"/name: must match the pattern ^[a-z]+$ (got "ABCDE")"#,
                "/tags: must have at most 3 items (got 4)",
                "/tags: items 0 and 2 are equal; every item must be unique",
                "/step: must be a multiple of 0.5 (got 1.25)",
                #"/colour: unknown property "colour""#,
            ])
    }

    @Test("keyword locations point into the schema")
    func keywordLocations() throws {
        let schema = try JSONSchema(Self.settings)
        let errors = schema.validate(["volume": "loud"])
        #expect(errors.map(\.keywordLocation) == ["#/required", "#/properties/volume/type"])
        #expect(errors.map(\.instanceLocation.description) == ["", "/volume"])
        #expect(errors.first?.description == #"/: missing required property "duration""#)
    }

    @Test("values of x-secret settings are never quoted")
    func secrets() throws {
        let lines = try errors(["duration": "1", "pin": "12a4"])
        #expect(lines == ["/pin: must match the pattern ^[0-9]{4}$"])
        let typed = try errors(["duration": "1", "pin": 1234])
        #expect(typed == ["/pin: must be string (got integer)"])
    }

    @Test("nested locations escape ~ and / as RFC 6901 says")
    func escaping() throws {
        let schema: JSONValue = ["additionalProperties": ["type": "integer"]]
        #expect(try errors(["a/b~c": "x"], schema: schema) == [#"/a~1b~0c: must be integer (got string "x")"#])
    }

    @Test("anyOf, oneOf and not summarise instead of listing every branch")
    func logic() throws {
        let schema: JSONValue = [
            "properties": [
                "a": ["anyOf": [["type": "string"], ["type": "integer"]]],
                "o": ["oneOf": [["minimum": 0], ["maximum": 10]]],
                "n": ["not": ["const": 0]],
            ]
        ]
        #expect(
            try errors(["a": true, "o": 5, "n": 0], schema: schema) == [
                "/a: must match at least one of the 2 schemas in anyOf",
                "/o: must match exactly one of the 2 schemas in oneOf (it matches 0 and 1)",
                "/n: must not match the schema in not",
            ])
    }

    @Test("long values are cut short in messages")
    func longValues() throws {
        let long = String(repeating: "x", count: 100)
        let lines = try errors(.string(long), schema: ["const": "y"])
        #expect(lines == [#"/: must be "y" (got "\#(String(repeating: "x", count: 59))…)"#])
    }

    @Test("a $ref cycle that never consumes the instance ends with an error, not a crash")
    func refCycle() throws {
        let schema = try JSONSchema(["$defs": ["a": ["$ref": "#/$defs/b"], "b": ["$ref": "#/$defs/a"]], "$ref": "#/$defs/a"])
        let errors = schema.validate(1)
        #expect(errors.count == 1)
        #expect(errors.first?.message.contains("a $ref cycle") == true)
        #expect(!schema.isValid(1))
    }

    @Test("a recursive schema over the deepest document the reader accepts never crashes")
    func deepInstance() throws {
        var instance: JSONValue = 1
        for _ in 0..<511 { instance = .array([instance]) }
        let schema = try JSONSchema([
            "$defs": ["node": ["anyOf": [["type": "integer"], ["type": "array", "items": ["$ref": "#/$defs/node"]]]]],
            "$ref": "#/$defs/node",
        ])
        // Valid when the thread's stack holds the recursion, otherwise a clear error: never a crash.
        let errors = schema.validate(instance)
        #expect(errors.isEmpty || errors.map(\.message).allSatisfy { $0.contains("nests too deeply") })
        #expect(schema.isValid(instance) == errors.isEmpty)
        #expect(!schema.isValid(.array([.array([.string("leaf")])])))
    }

    @Test("secret locations over the deepest document on a small stack: the part too deep to walk counts as secret, never a crash")
    func deepInstanceSecrets() throws {
        // Found by the suite under AddressSanitizer: the walk had no stack guard and overflowed
        // a concurrency thread's stack on the 511-level document above.
        var nested: JSONValue = "hunter2"
        for _ in 0..<511 { nested = .array([nested]) }
        let instance = nested
        let schema = try JSONSchema([
            "$defs": ["node": ["anyOf": [["type": "string", "x-secret": false], ["type": "array", "items": ["$ref": "#/$defs/node"]]]]],
            "$ref": "#/$defs/node",
        ])
        // Handed back through the semaphore, which orders the thread's writes before the reads.
        final class Outcome: @unchecked Sendable {
            var locations: [JSONPointer] = []
            var masked = ""
        }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            outcome.locations = schema.secretLocations(in: instance)
            outcome.masked = schema.maskingSecrets(in: instance, with: "*").serialized()
            done.signal()
        }
        thread.stackSize = 256 << 10
        thread.start()
        done.wait()
        #expect(
            outcome.locations.count == 1 && outcome.locations[0].tokens.count < 511,
            "cut where the stack ran short: \(outcome.locations.map(\.tokens.count))")
        #expect(!outcome.masked.contains("hunter2"))
    }

    @Test("integers stay exact beyond 2^53")
    func bigIntegers() throws {
        let schema = try JSONSchema(["maximum": .number(.integer(9_007_199_254_740_993))])
        #expect(schema.isValid(.number(.integer(9_007_199_254_740_993))))
        #expect(!schema.isValid(.number(.integer(9_007_199_254_740_994))))
    }

    @Test("strings compare by code point: a precomposed é is not e + combining accent")
    func codePoints() throws {
        let schema = try JSONSchema(["const": "\u{E9}"])
        #expect(schema.isValid("\u{E9}"))
        #expect(!schema.isValid("e\u{301}"))
        #expect(!(try JSONSchema(["uniqueItems": true]).isValid(["\u{E9}", "\u{E9}"])))
        #expect(try JSONSchema(["uniqueItems": true]).isValid(["\u{E9}", "e\u{301}"]))
    }
}

@Suite("Invalid and unsupported schemas")
struct SchemaErrorTests {
    static let invalid: [(JSONValue, String)] = [
        (["minimum": "ten"], "#/minimum: must be a number"),
        (["type": "text"], #"#/type: "text" is not a type; use null, boolean, object, array, number, string or integer"#),
        (["properties": ["a": 1]], "#/properties/a: must be a schema (an object or a Boolean)"),
        (["required": ["a", "a"]], #"#/required: lists "a" twice"#),
        (["multipleOf": 0], "#/multipleOf: must be greater than 0"),
        (["allOf": []], "#/allOf: must be a non-empty array of schemas"),
        (
            ["$ref": "other.json"],
            #"#/$ref: "other.json" is relative, but the schema has no "$id" to resolve it against (fleetset never downloads schemas: register the document and refer to it by its URI)"#
        ),
        (["$ref": "#/$defs/missing"], ##"#/$ref: "#/$defs/missing" points to nothing"##),
        (
            ["$id": "https://example.com/s.json", "$ref": "other.json"],
            #"#/$ref: "other.json" refers to "https://example.com/other.json", which is not a known schema (fleetset never downloads schemas: register the document)"#
        ),
        (["$ref": "#nowhere"], ##"#/$ref: "#nowhere": no "$anchor" named "nowhere" in "urn:fleetset:schema""##),
    ]

    @Test("malformed schemas are refused with the location and the reason", arguments: invalid)
    func refused(_ schema: JSONValue, _ message: String) {
        #expect {
            try JSONSchema(schema)
        } throws: { error in
            guard let error = error as? SchemaError else { return false }
            return error.kind == .invalid && error.description == message
        }
    }

    static let unsupported: [(JSONValue, JSONSchema.Options, String)] = [
        (
            ["$schema": "http://json-schema.org/draft-07/schema#"], .standard,
            #"unsupported: #/$schema: the schema is written for draft 7 ("$schema": "http://json-schema.org/draft-07/schema#"); fleetset validates JSON Schema 2020-12 only"#
        ),
        (
            ["$schema": "https://example.com/my-dialect"], .standard,
            #"unsupported: #/$schema: the meta-schema "https://example.com/my-dialect" is not in the registry, so its dialect is unknown"#
        ),
        (
            ["properties": ["a": ["additionalItems": false]]], .strict,
            #"unsupported: #/properties/a/additionalItems: "additionalItems" is not a JSON Schema 2020-12 keyword, so fleetset cannot honour it (in 2020-12, "items" after "prefixItems" does this); extensions must start with "x-""#
        ),
    ]

    @Test("schemas asking for what the validator cannot honour are unsupported, never half-checked", arguments: unsupported)
    func unsupportedSchemas(_ schema: JSONValue, _ options: JSONSchema.Options, _ message: String) {
        #expect {
            try JSONSchema(schema, options: options)
        } throws: { error in
            guard let error = error as? SchemaError else { return false }
            return error.kind == .unsupported && error.description == message
        }
    }

    @Test("a meta-schema requiring an unknown vocabulary makes the schema unsupported")
    func unknownVocabulary() throws {
        var registry = SchemaRegistry()
        registry.register(
            [
                "$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "https://example.com/meta",
                "$vocabulary": ["https://json-schema.org/draft/2020-12/vocab/core": true, "https://example.com/vocab/units": true],
            ], as: "https://example.com/meta")
        #expect(throws: SchemaError.self) { try JSONSchema(["$schema": "https://example.com/meta"], registry: registry) }
        registry.register(
            [
                "$id": "https://example.com/meta-optional",
                "$vocabulary": ["https://json-schema.org/draft/2020-12/vocab/core": true, "https://example.com/vocab/units": false],
            ], as: "https://example.com/meta-optional")
        // An optional unknown vocabulary is skipped; without the validation vocabulary, `minimum` is only an annotation.
        let schema = try JSONSchema(["$schema": "https://example.com/meta-optional", "minimum": 5], registry: registry)
        #expect(schema.isValid(1))
    }

    @Test("unknown keywords are annotations by default, x- extensions are always allowed")
    func unknownKeywords() throws {
        #expect(try JSONSchema(["maxLenght": 2]).isValid("long"))
        #expect(try JSONSchema(["type": "string", "x-writable": true], options: .strict).isValid("a"))
    }

    @Test("remote references resolve from the registry only")
    func registry() throws {
        var registry = SchemaRegistry()
        registry.register(
            ["$defs": ["port": ["type": "integer", "minimum": 1, "maximum": 65535]]], as: "https://schemas.example.com/common.json")
        let schema = try JSONSchema(["$ref": "https://schemas.example.com/common.json#/$defs/port"], registry: registry)
        #expect(schema.isValid(443))
        #expect(schema.validate(0).map(\.keywordLocation) == ["https://schemas.example.com/common.json#/$defs/port/minimum"])
        #expect(registry.contains("https://schemas.example.com/common.json#anything"))
        #expect(!registry.contains("https://schemas.example.com/other.json"))
    }
}

@Suite("JSON pointers")
struct JSONPointerTests {
    @Test("parse, escape and resolve as RFC 6901 says")
    func rfc6901() throws {
        let document: JSONValue = ["foo": ["bar", "baz"], "": 0, "a/b": 1, "m~n": 8, " ": 7]
        let cases: [(String, JSONValue?)] = [
            ("", document), ("/foo", ["bar", "baz"]), ("/foo/0", "bar"), ("/", 0), ("/a~1b", 1), ("/m~0n", 8), ("/ ", 7),
            ("/foo/01", nil), ("/foo/2", nil), ("/nope", nil),
        ]
        for (text, expected) in cases {
            let pointer = try #require(JSONPointer(text))
            #expect(document[pointer: pointer] == expected, "\(text)")
            #expect(pointer.description == text)
        }
        #expect(JSONPointer("foo") == nil)
        #expect(JSONPointer("/a~2") == nil)
    }
}
