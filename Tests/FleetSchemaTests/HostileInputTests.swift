import FleetJSON
import FleetSchema
import Testing

/// What a validation does with input meant to hurt it: a pattern that backtracks forever, and
/// integers at and beyond the 64-bit edge.
@Suite("Hostile input: pattern budget and exact integers")
struct HostileInputTests {
    static let attack = String(repeating: "a", count: 40) + "!"

    @Test("a catastrophic pattern fails the value with one clear error naming the keyword")
    func patternBudget() throws {
        let schema = try JSONSchema([
            "type": "object",
            "properties": ["greeting": ["type": "string", "pattern": "^(a+)+$"], "volume": ["maximum": 3]],
        ])
        let errors = schema.validate(["greeting": .string(Self.attack), "volume": 9])
        #expect(
            errors.map(\.description) == [
                "/greeting: the value is too expensive to check against #/properties/greeting/pattern: the regular expression backtracks too much"
            ])
        #expect(!schema.isValid(["greeting": .string(Self.attack)]))
        // The same pattern on an ordinary value still works.
        #expect(schema.isValid(["greeting": "aaaa"]))
        #expect(schema.validate(["greeting": "b"]).map(\.message) == [#"must match the pattern ^(a+)+$ (got "b")"#])
    }

    @Test("a property name is checked against patternProperties within the budget too")
    func patternPropertiesBudget() throws {
        let schema = try JSONSchema(["patternProperties": ["^(a+)+$": ["type": "integer"]]])
        let errors = schema.validate(.object([Self.attack: 1]))
        #expect(errors.count == 1)
        #expect(errors.first?.message.hasPrefix("the property name is too expensive to check against #/patternProperties/^(a+)+$") == true)
    }

    @Test("many values share one budget that grows with the text: long linear values pass, attacks fail")
    func budgetScalesWithText() throws {
        let schema = try JSONSchema(["type": "array", "items": ["type": "string", "pattern": "^[a-z]+$"]])
        let long: JSONValue = .array(Array(repeating: .string(String(repeating: "x", count: 5_000)), count: 200))
        #expect(schema.isValid(long))
        let catastrophic = try JSONSchema(["type": "array", "items": ["type": "string", "pattern": "^(a|aa)*$"]])
        let attacks: JSONValue = .array(Array(repeating: .string(Self.attack), count: 50))
        #expect(catastrophic.validate(attacks).count == 1)
    }

    @Test("integers beyond 64 bits are read exactly and print back as written")
    func exactReading() throws {
        let text = "[9223372036854775807, 9223372036854775808, -9223372036854775809, 123456789012345678901234567890]"
        let value = try JSONParser.parse(Array(text.utf8))
        #expect(value.serialized() == text.replacing(", ", with: ","))
        guard case .array(let numbers) = value else {
            Issue.record("not an array")
            return
        }
        #expect(numbers[0] == .number(.integer(.max)))
        #expect(numbers[1] != numbers[0])
        #expect(numbers[1] == .number(.double(0x1p63)))  // 2^63 exactly
        #expect(numbers[3] != .number(.double(123456789012345678901234567890.0)))
    }

    @Test("bounds at the Int64 edge are compared exactly")
    func edgeBounds() throws {
        func valid(_ schema: String, _ instance: String) throws -> Bool {
            try JSONSchema(JSONParser.parse(Array(schema.utf8))).isValid(JSONParser.parse(Array(instance.utf8)))
        }
        #expect(try !valid(#"{"maximum": 9223372036854775807}"#, "9223372036854775808"))
        #expect(try valid(#"{"maximum": 9223372036854775807}"#, "9223372036854775807"))
        #expect(try !valid(#"{"exclusiveMaximum": 9223372036854775808}"#, "9223372036854775808"))
        #expect(try valid(#"{"exclusiveMaximum": 9223372036854775809}"#, "9223372036854775808"))
        #expect(try !valid(#"{"minimum": -9223372036854775808}"#, "-9223372036854775809"))
        #expect(try !valid(#"{"maximum": 18446744073709551615}"#, "18446744073709551616"))
        #expect(try valid(#"{"maximum": 18446744073709551616}"#, "18446744073709551616"))
        // Against doubles: 2^64 as a double equals the integer 2^64, not 2^64 + 1.
        #expect(try valid(#"{"maximum": 1.8446744073709552e19}"#, "18446744073709551616"))
        #expect(try !valid(#"{"maximum": 1.8446744073709552e19}"#, "18446744073709551617"))
        #expect(try !valid(#"{"minimum": 9223372036854775807.5}"#, "9223372036854775807"))
        #expect(try valid(#"{"maximum": 9223372036854775808.5}"#, "9223372036854775808"))
        #expect(
            try valid(
                #"{"const": 98249283749234923498293171823948729348710298301928331}"#,
                "98249283749234923498293171823948729348710298301928331"))
        #expect(
            try !valid(
                #"{"const": 98249283749234923498293171823948729348710298301928331}"#,
                "98249283749234923498293171823948729348710298301928332"))
        #expect(try valid(#"{"enum": [18446744073709551616]}"#, "1.8446744073709552e19"))
        #expect(try valid(#"{"uniqueItems": true}"#, "[18446744073709551616, 18446744073709551617]"))
        #expect(try !valid(#"{"uniqueItems": true}"#, "[18446744073709551616, 1.8446744073709552e19]"))
    }

    @Test("multipleOf is exact for integers of any size")
    func exactMultiples() throws {
        func valid(_ schema: String, _ instance: String) throws -> Bool {
            try JSONSchema(JSONParser.parse(Array(schema.utf8))).isValid(JSONParser.parse(Array(instance.utf8)))
        }
        #expect(try valid(#"{"multipleOf": 3}"#, "27670116110564327424"))  // 3 × 9223372036854775808
        #expect(try !valid(#"{"multipleOf": 3}"#, "27670116110564327425"))
        #expect(try valid(#"{"multipleOf": 9223372036854775808}"#, "27670116110564327424"))
        #expect(try !valid(#"{"multipleOf": 9223372036854775808}"#, "27670116110564327423"))
        #expect(try valid(#"{"multipleOf": 2}"#, "-18446744073709551616"))
    }
}

/// Secrets at any depth: every place the masking and redaction see.
@Suite("Secret locations")
struct SecretLocationTests {
    static let schema: JSONValue = [
        "type": "object",
        "$defs": ["credential": ["type": "string", "x-secret": true]],
        "properties": [
            "pin": ["type": "string", "x-secret": true],
            "streams": [
                "type": "array",
                "items": [
                    "type": "object",
                    "properties": [
                        "url": ["type": "string"], "password": ["type": "string", "x-secret": true], "port": ["type": "integer"],
                    ],
                ],
            ],
            "mqtt": ["type": "object", "properties": ["host": ["type": "string"], "token": ["$ref": "#/$defs/credential"]]],
            "keys": ["type": "object", "additionalProperties": ["type": "integer", "x-secret": true]],
            "choice": ["anyOf": [["type": "string"], ["type": "object", "properties": ["code": ["x-secret": true]]]]],
        ],
    ]

    static let values: JSONValue = [
        "pin": "4711",
        "streams": [["url": "rtsp://cam1", "password": "hunter2", "port": 554], ["url": "rtsp://cam2", "password": "swordfish"]],
        "mqtt": ["host": "broker", "token": "t0k3n"],
        "keys": ["a": 31337, "b": 42],
        "choice": ["code": ["nested": "deep"]],
        "open": "visible",
    ]

    @Test("every secret at any depth, through items, $ref, additionalProperties and anyOf; outermost only")
    func locations() throws {
        let locations = try JSONSchema(Self.schema).secretLocations(in: Self.values).map(\.description)
        #expect(
            locations == [
                "/choice/code", "/keys/a", "/keys/b", "/mqtt/token", "/pin", "/streams/0/password", "/streams/1/password",
            ])
    }

    @Test("masking replaces each secret and nothing else")
    func masking() throws {
        let masked = try JSONSchema(Self.schema).maskingSecrets(in: Self.values, with: "********")
        #expect(
            masked["streams"] == [
                ["url": "rtsp://cam1", "password": "********", "port": 554], ["url": "rtsp://cam2", "password": "********"],
            ])
        #expect(masked["mqtt"] == ["host": "broker", "token": "********"])
        #expect(masked["keys"] == ["a": "********", "b": "********"])
        #expect(masked["pin"] == "********" && masked["open"] == "visible")
        #expect(!masked.serialized().contains("hunter2") && !masked.serialized().contains("31337") && !masked.serialized().contains("deep"))
    }

    @Test("the scalars to redact from free text: strings and numbers inside secrets")
    func scalars() throws {
        let scalars = Set(try JSONSchema(Self.schema).secretScalars(in: Self.values))
        #expect(scalars == ["4711", "hunter2", "swordfish", "t0k3n", "31337", "42", "deep"])
    }

    @Test("a secret reached through one branch is never quoted by another branch's message")
    func secretsInMessages() throws {
        let schema = try JSONSchema([
            "$defs": ["secret": ["type": "string", "x-secret": true]],
            "properties": ["password": ["allOf": [["$ref": "#/$defs/secret"], ["type": "string", "pattern": "[0-9]"]]]],
        ])
        let errors = schema.validate(["password": "hunter"])
        #expect(errors.count == 1)
        #expect(errors.allSatisfy { !$0.message.contains("hunter") }, "\(errors)")
        // Not a secret: still quoted.
        #expect(try JSONSchema(["pattern": "[0-9]"]).validate("hunter").first?.message.contains("hunter") == true)
    }

    @Test("a $ref cycle that never moves into the instance ends")
    func cycles() throws {
        let schema = try JSONSchema(["$defs": ["a": ["$ref": "#/$defs/b"], "b": ["allOf": [["$ref": "#/$defs/a"]]]], "$ref": "#/$defs/a"])
        #expect(schema.secretLocations(in: ["x": 1]).isEmpty)
    }
}
