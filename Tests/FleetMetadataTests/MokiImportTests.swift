import FleetIO
import FleetJSON
import FleetMetadata
import FleetSchema
import Testing

enum Examples {
    static let kioskPath: String = {
        var components = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        components.removeLast(4)
        return components.joined(separator: "/") + "/shared/examples/kiosk.SettingsSchema.json"
    }()
    static let hasKiosk = (try? FileSystem.readFile(kioskPath)) != nil

    static func kiosk() throws -> JSONValue {
        try JSONParser.parse(try FileSystem.readFile(kioskPath))
    }
}

@Suite("MokiManage import", .enabled(if: Examples.hasKiosk, "../shared/examples/kiosk.SettingsSchema.json is not present"))
struct KioskImportTests {
    func imported() throws -> Metadata {
        let document = try MokiImport.convert(try Examples.kiosk(), app: "kiosk", writable: ["duration"])
        return try Metadata(document)
    }

    @Test("the kiosk example imports as it is and validates its own defaults")
    func importsAndValidatesDefaults() throws {
        let metadata = try imported()
        #expect(metadata.app == "kiosk")
        #expect(metadata.version == 1)
        #expect(metadata.settingKeys == ["adminPassword", "progressIndicator", "duration", "mediaUrl", "cacheKey", "screesaverPlaylist"])
        let defaults = metadata.defaultValues
        #expect(metadata.validate(values: .object(defaults)) == [])
        #expect(defaults["progressIndicator"] == true)
        #expect(defaults["duration"] == "2")
        #expect(defaults["screesaverPlaylist"] == [])
    }

    @Test("each control maps to its schema")
    func controls() throws {
        let schema = try imported().schemaDocument
        let properties = try #require(schema["properties"])
        #expect(
            properties["adminPassword"] == [
                "type": "string", "x-secret": true, "default": "", "x-moki-class": ["Password"], "title": "Admin Password",
            ])
        #expect(properties["progressIndicator"]?["type"] == "boolean")
        #expect(properties["duration"]?["enum"] == ["1", "2"])
        #expect(properties["duration"]?["x-enumTitles"] == ["1 Minute", "2 Minutes"])
        #expect(properties["duration"]?["x-writable"] == true)
        let item = try #require(properties["screesaverPlaylist"]?["items"])
        #expect(item["type"] == "object")
        #expect(item["additionalProperties"] == false)
        #expect(item["properties"]?["content"]?["x-placeholder"] == "http://")
        #expect(item["properties"]?["cacheKey"]?["type"] == "boolean")  // scoped to the item: no clash with the Pane's cacheKey
        #expect(item["x-layout"] == nil)
        #expect(schema["additionalProperties"] == false)
    }

    @Test("groups, headers, panes and lists become the layout")
    func layout() throws {
        let metadata = try imported()
        #expect(
            metadata.layout == [
                .group(title: "General", items: []),
                .group(
                    title: "Home Screen",
                    items: [
                        .header(title: "Select Content to Display"), .setting(key: "adminPassword"), .setting(key: "progressIndicator"),
                        .setting(key: "duration"),
                        .pane(title: "Media Settings", items: [.setting(key: "mediaUrl"), .setting(key: "cacheKey")]),
                    ]),
                .group(
                    title: "Screensaver",
                    items: [
                        .list(
                            key: "screesaverPlaylist",
                            items: [.setting(key: "content"), .setting(key: "cacheKey"), .setting(key: "duration")])
                    ]),
            ])
    }

    @Test("writable and secret keys")
    func annotations() throws {
        let metadata = try imported()
        #expect(metadata.writableKeys == ["duration"])
        #expect(metadata.secretKeys == ["adminPassword"])
        #expect(metadata.forbiddenKeys(in: ["duration": "1", "mediaUrl": "x", "adminPassword": "y"]) == ["adminPassword", "mediaUrl"])
    }

    @Test("a bad value gets a message a person understands; secrets are never quoted")
    func messages() throws {
        let metadata = try imported()
        var values = metadata.defaultValues
        values["duration"] = "5"
        values["adminPassword"] = 1234
        values["screesaverPlaylist"] = [["content": "http://a", "cacheKey": "yes"]]
        values["colour"] = "red"
        let errors = metadata.validate(values: .object(values)).map(\.description)
        #expect(errors.contains(#"/duration: must be one of "1", "2" (got "5")"#))
        #expect(errors.contains("/adminPassword: must be string (got integer)"))
        #expect(errors.contains(#"/screesaverPlaylist/0/cacheKey: must be boolean (got string "yes")"#))
        #expect(errors.contains(#"/colour: unknown property "colour""#))
        #expect(!errors.joined().contains("1234"))
    }
}

@Suite("MokiManage import errors")
struct MokiImportErrorTests {
    @Test("unknown controls, missing and duplicate keys are reported with pointers")
    func problems() {
        let document: JSONValue = [
            "Version": 2,
            "Groups": [
                [
                    "Title": "A",
                    "Settings": [
                        ["Type": "Slider", "Key": "volume"],
                        ["Type": "TextField", "Title": "No key"],
                        ["Type": "ToggleSwitch", "Key": "on", "Value": true],
                        ["Type": "ToggleSwitch", "Key": "on", "Value": "yes"],
                        ["Type": "ComboBox", "Key": "mode", "Options": []],
                    ],
                ]
            ],
        ]
        #expect {
            try MokiImport.convert(document, app: "x")
        } throws: { error in
            let lines = (error as? MokiImport.ImportError)?.problems.map(\.description) ?? []
            return lines == [
                #"/Groups/0/Settings/0/Type: unknown control "Slider"; known: Header, TextField, ToggleSwitch, ComboBox, Pane, List"#,
                "/Groups/0/Settings/1/Key: a TextField control needs a non-empty string Key",
                #"/Groups/0/Settings/3/Key: the key "on" is already used at /Groups/0/Settings/2/Key"#,
                "/Groups/0/Settings/4/Options: a ComboBox needs a non-empty Options array",
            ]
        }
    }

    @Test("marking a setting that does not exist writable is an error")
    func unknownWritable() {
        #expect(throws: MokiImport.ImportError.self) {
            try MokiImport.convert(["Version": 1, "Groups": []], app: "x", writable: ["nope"])
        }
    }
}
