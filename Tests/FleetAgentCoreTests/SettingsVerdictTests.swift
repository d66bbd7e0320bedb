import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import Testing

@Suite("What the agent does with a settings document")
struct SettingsVerdictTests {
    static let metadata: JSONValue = [
        "app": "kiosk", "version": 3,
        "schema": [
            "type": "object", "additionalProperties": false,
            "properties": [
                "duration": ["type": "string", "enum": ["1", "2"], "default": "2"],
                "volume": ["type": "integer", "maximum": 10, "default": 5],
                "pin": ["type": "string", "minLength": 4, "default": "0000", "x-secret": true],
            ],
        ],
    ]

    static func document(_ values: JSONObject, version: Int64 = 3, app: String = "kiosk") -> SettingsDocument {
        SettingsDocument(app: app, schemaVersion: version, revision: 41, values: values)
    }

    @Test("valid values are applied")
    func apply() throws {
        let metadata = try Metadata(Self.metadata)
        let verdict = SettingsVerdict.evaluate(
            Self.document(["duration": "1", "volume": 3, "pin": "1234"]), app: "kiosk", metadata: .success(metadata))
        #expect(verdict == .apply)
    }

    @Test("invalid values are an error naming every pointer and reason, secrets unquoted")
    func invalid() throws {
        let metadata = try Metadata(Self.metadata)
        let verdict = SettingsVerdict.evaluate(
            Self.document(["duration": "5", "volume": 11, "pin": "12", "extra": true]), app: "kiosk", metadata: .success(metadata))
        guard case .refuse(let state, let message) = verdict else {
            Issue.record("not refused: \(verdict)")
            return
        }
        #expect(state == .error)
        #expect(message.hasPrefix("revision 41 is not valid for metadata version 3: "))
        #expect(message.contains("/duration: must be one of \"1\", \"2\" (got \"5\")"))
        #expect(message.contains("/volume: must be <= 10 (got 11)"))
        #expect(message.contains("/pin: ") && !message.contains("\"12\""))
        #expect(message.contains("extra"))
    }

    @Test("metadata the validator cannot honour is unsupported; broken metadata is an error")
    func metadataProblems() throws {
        var unsupported = Self.metadata.objectValue!
        var schema = unsupported["schema"]!.objectValue!
        schema["$schema"] = "http://json-schema.org/draft-07/schema#"
        unsupported["schema"] = .object(schema)
        let unsupportedResult = Result<Metadata, MetadataError> { () throws(MetadataError) in try Metadata(.object(unsupported)) }
        guard
            case .refuse(.unsupported, let message) = SettingsVerdict.evaluate(
                Self.document([:]), app: "kiosk", metadata: unsupportedResult)
        else {
            Issue.record("not unsupported")
            return
        }
        #expect(message.hasPrefix("metadata version 3 asks for what this agent cannot honour: /schema/$schema: unsupported: "))

        var broken = Self.metadata.objectValue!
        broken["version"] = "three"
        let brokenResult = Result<Metadata, MetadataError> { () throws(MetadataError) in try Metadata(.object(broken)) }
        guard case .refuse(.error, let brokenMessage) = SettingsVerdict.evaluate(Self.document([:]), app: "kiosk", metadata: brokenResult)
        else {
            Issue.record("not an error")
            return
        }
        #expect(brokenMessage.contains("metadata version 3 is not valid metadata: /version: must be a positive integer"))
    }

    @Test("a document of another schema version asks for the metadata again; one of another app is refused")
    func mismatches() throws {
        let metadata = try Metadata(Self.metadata)
        #expect(
            SettingsVerdict.evaluate(Self.document([:], version: 4), app: "kiosk", metadata: .success(metadata))
                == .needsMetadata(version: 3))
        let other = SettingsVerdict.evaluate(Self.document([:], app: "signage"), app: "kiosk", metadata: .success(metadata))
        #expect(other == .refuse(.error, "the server sent settings of app \"signage\" for \"kiosk\""))
    }

    @Test("a long list of reasons is cut to fit a status report, saying how many are left out")
    func longMessages() {
        let reasons = (0..<500).map { "/setting\($0): must be a string (got 1)" }
        let message = SettingsVerdict.message("revision 1 is not valid", reasons)
        #expect(message.unicodeScalars.count <= StatusReport.maximumMessageLength)
        #expect(message.hasPrefix("revision 1 is not valid: /setting0: must be a string (got 1); /setting1"))
        #expect(message.hasSuffix("more"))
    }
}

@Suite("Start-up recovery")
struct StartupRecoveryTests {
    static let settings = DeviceSettings(app: "kiosk", schemaVersion: 3, revision: 41, syncedAt: 0, values: [:])

    @Test("an outcome is open when status.json does not record the revision on disk")
    func open() {
        #expect(!StartupRecovery.needsCompletion(settings: nil, status: nil))
        #expect(StartupRecovery.needsCompletion(settings: Self.settings, status: nil))
        #expect(StartupRecovery.needsCompletion(settings: Self.settings, status: AppStatus(app: "kiosk", revision: 40, schemaVersion: 3)))
        #expect(StartupRecovery.needsCompletion(settings: Self.settings, status: AppStatus(app: "kiosk", revision: 41, schemaVersion: 2)))
        #expect(
            !StartupRecovery.needsCompletion(
                settings: Self.settings, status: AppStatus(app: "kiosk", revision: 41, schemaVersion: 3, state: .error)))
    }
}
