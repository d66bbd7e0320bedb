import FleetJSON
import FleetMetadata
import Testing

@Suite("Metadata documents")
struct MetadataTests {
    static let valid: JSONValue = [
        "app": "kiosk", "version": 3,
        "schema": [
            "type": "object",
            "properties": [
                "duration": ["type": "integer", "minimum": 1, "default": 5, "x-writable": true],
                "pin": ["type": "string", "default": "0000", "x-secret": true],
                "display": ["type": "object", "properties": ["brightness": ["type": "number", "default": 0.8]]],
            ],
        ],
        "layout": [["group": "Main", "items": [["setting": "duration"], ["pane": "Display", "items": [["setting": "display"]]]]]],
    ]

    @Test("a valid document reads, with writable and secret keys")
    func reads() throws {
        let metadata = try Metadata(Self.valid)
        #expect(metadata.app == "kiosk")
        #expect(metadata.version == 3)
        #expect(metadata.writableKeys == ["duration"])
        #expect(metadata.secretKeys == ["pin"])
        #expect(metadata.masked(["pin": "1234", "duration": 5]) == ["pin": "********", "duration": 5])
        // A device's key-path values are masked by their place.
        #expect(metadata.masked(["/pin": "1234", "/display/brightness": 0.5]) == ["/pin": "********", "/display/brightness": 0.5])
    }

    @Test("a key-path value is masked as it would be in its place: secrets inside it, the whole inside a secret or past index 1,000")
    func maskedKeyPaths() throws {
        let metadata = try Metadata([
            "app": "player", "version": 1,
            "schema": [
                "type": "object",
                "properties": [
                    "player": [
                        "type": "object",
                        "properties": [
                            "stream": [
                                "type": "object",
                                "properties": ["url": ["type": "string"], "password": ["type": "string", "x-secret": true]],
                            ],
                            "vault": ["type": "object", "x-secret": true],
                        ],
                    ],
                    "keys": ["type": "array", "items": ["type": "object", "properties": ["key": ["type": "string", "x-secret": true]]]],
                ],
            ],
        ])
        #expect(
            metadata.masked(["/player/stream": ["url": "u", "password": "LEAK1"]]) == [
                "/player/stream": ["url": "u", "password": "********"]
            ])
        #expect(metadata.masked(["/player/stream/password": "LEAK2"]) == ["/player/stream/password": "********"])
        #expect(metadata.masked(["/player/vault/inner": "LEAK3"]) == ["/player/vault/inner": "********"])
        #expect(metadata.masked(["/keys/3": ["key": "LEAK4", "name": "n"]]) == ["/keys/3": ["key": "********", "name": "n"]])
        #expect(metadata.masked(["/keys/-": ["key": "LEAK5"]]) == ["/keys/-": ["key": "********"]])
        #expect(metadata.masked(["/keys/1001/key": "LEAK6"]) == ["/keys/1001/key": "********"])
        #expect(metadata.masked(["/player/stream/url": "shown"]) == ["/player/stream/url": "shown"])
    }

    @Test("a setting's name cannot begin with /: a device's key-path values are kept under such names")
    func slashNames() {
        let document: JSONValue = [
            "app": "kiosk", "version": 3, "schema": ["type": "object", "properties": ["/volume": ["type": "integer"]]],
        ]
        #expect(throws: MetadataError.self) { try Metadata(document) }
        do {
            _ = try Metadata(document)
        } catch {
            #expect(error.description.contains("/schema/properties/~1volume"), "\(error)")
        }
    }

    @Test("defaults fill missing values, recursively, and never replace present ones")
    func defaults() throws {
        let metadata = try Metadata(Self.valid)
        #expect(metadata.defaultValues == ["duration": 5, "pin": "0000", "display": ["brightness": 0.8]])
        #expect(
            metadata.applyingDefaults(to: ["duration": 9, "display": [:]]) == [
                "duration": 9, "pin": "0000", "display": ["brightness": 0.8],
            ])
    }

    static let malformedDocuments: [(JSONValue, [String])] = [
        ([:], ["/app: is missing", "/version: is missing", "/schema: is missing; it must be a JSON Schema for the settings object"]),
        (
            ["app": "Kiosk!", "version": 0, "schema": ["type": "object"], "extra": 1],
            [
                "/extra: unknown member; a metadata document has app, version, schema and layout",
                #"/app: "Kiosk!" is not an app id: use 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"#,
                "/version: must be a positive integer (got 0)",
            ]
        ),
        (
            [
                "app": "a", "version": 1,
                "schema": ["type": "object", "properties": ["d": ["type": "integer", "minimum": 1, "default": 0]]],
            ],
            ["/schema/properties/d/default: the default is not valid: must be >= 1 (got 0)"]
        ),
        (
            ["app": "a", "version": 1, "schema": ["type": "object", "properties": ["d": ["type": "string", "maxLenght": 3]]]],
            [
                #"/schema/properties/d/maxLenght: unsupported: "maxLenght" is not a JSON Schema 2020-12 keyword, so fleetset cannot honour it; extensions must start with "x-""#
            ]
        ),
        (
            ["app": "a", "version": 1, "schema": ["type": "object", "properties": ["d": ["type": "text", "x-writable": "yes"]]]],
            [
                #"/schema/properties/d/x-writable: must be true or false (got "yes")"#,
                #"/schema/properties/d/type: "text" is not a type; use null, boolean, object, array, number, string or integer"#,
            ]
        ),
        (
            [
                "app": "a", "version": 1, "schema": ["type": "object"],
                "layout": [["setting": "nope"], ["pane": "P", "items": [["group": "G"]]]],
            ],
            [
                #"/layout/0/setting: "nope" is not a property of the schema here"#,
                "/layout/1/items/0: a group may appear only at the top level of the layout",
            ]
        ),
    ]

    @Test("malformed documents list every problem with its pointer", arguments: malformedDocuments)
    func malformed(_ document: JSONValue, _ expected: [String]) {
        #expect {
            try Metadata(document)
        } throws: { error in
            let lines = (error as? MetadataError)?.problems.map(\.description) ?? []
            return lines == expected
        }
    }

    @Test("unsupported-only problems are marked so the agent reports unsupported")
    func unsupportedKind() {
        let document: JSONValue = [
            "app": "a", "version": 1, "schema": ["type": "object", "$schema": "http://json-schema.org/draft-07/schema#"],
        ]
        #expect {
            try Metadata(document)
        } throws: { error in
            (error as? MetadataError)?.isUnsupported == true
        }
    }
}

@Suite("Settings values")
struct SettingsValuesTests {
    /// RFC 7396 appendix A.
    static let mergeCases: [(JSONValue, JSONValue, JSONValue)] = [
        (["a": "b"], ["a": "c"], ["a": "c"]),
        (["a": "b"], ["b": "c"], ["a": "b", "b": "c"]),
        (["a": "b"], ["a": nil], [:]),
        (["a": "b", "b": "c"], ["a": nil], ["b": "c"]),
        (["a": ["b"]], ["a": "c"], ["a": "c"]),
        (["a": "c"], ["a": ["b"]], ["a": ["b"]]),
        (["a": ["b": "c"]], ["a": ["b": "d", "c": nil]], ["a": ["b": "d"]]),
        (["a": [["b": "c"]]], ["a": [1]], ["a": [1]]),
        (["a", "b"], ["c", "d"], ["c", "d"]),
        (["a": "b"], ["c"], ["c"]),
        (["a": "foo"], nil, nil),
        (["a": "foo"], "bar", "bar"),
        (["e": nil], ["a": 1], ["e": nil, "a": 1]),
        ([1, 2], ["a": "b", "c": nil], ["a": "b"]),
        ([:], ["a": ["bb": ["ccc": nil]]], ["a": ["bb": [:]]]),
    ]

    @Test("merge patch follows RFC 7396", arguments: mergeCases)
    func mergePatch(_ target: JSONValue, _ patch: JSONValue, _ expected: JSONValue) {
        #expect(SettingsValues.applyingMergePatch(target, patch) == expected)
    }

    @Test("changed keys: added, removed and changed, sorted; the patch between two documents")
    func changedKeys() {
        let old: JSONObject = ["a": 1, "b": [1, 2], "c": "x", "d": 1.0]
        let new: JSONObject = ["a": 1, "b": [2, 1], "e": true, "d": 1]
        #expect(SettingsValues.changedKeys(old, new) == ["b", "c", "e"])
        #expect(SettingsValues.patch(from: old, to: new) == ["b": [2, 1], "c": nil, "e": true])
        #expect(SettingsValues.applyingMergePatch(.object(old), .object(SettingsValues.patch(from: old, to: new))) == .object(new))
    }
}
