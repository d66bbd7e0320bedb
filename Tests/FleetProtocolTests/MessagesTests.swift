import FleetJSON
import FleetProtocol
import Testing

@Suite("Protocol v1 messages")
struct MessagesTests {
    @Test("a settings document round-trips through its wire form")
    func settingsRoundTrip() throws {
        let document = SettingsDocument(app: "kiosk", schemaVersion: 3, revision: 41, values: ["duration": "2", "volume": 7])
        let text = document.json.serialized()
        #expect(try SettingsDocument(json: try JSONParser.parse(text)) == document)
    }

    @Test("the text made from values written already is exactly the document's own text")
    func settingsTextFromValuesText() throws {
        let values: JSONObject = ["title": "Welcome \"home\"\n", "volume": 7, "streams": [["url": "rtsp://cam"]]]
        for app in ["kiosk", "app-with\"quote"] {
            let document = SettingsDocument(app: app, schemaVersion: 3, revision: 41, values: values)
            let text = SettingsDocument.jsonText(
                app: app, schemaVersion: 3, revision: 41, valuesText: JSONValue.object(values).serialized())
            #expect(text == document.json.serialized())
        }
    }

    @Test("a status report round-trips; message is optional")
    func statusRoundTrip() throws {
        let report = StatusReport(
            revision: 41, schemaVersion: 3, state: .error, message: "/duration: must be one of \"1\", \"2\"", source: .agent)
        #expect(try StatusReport(json: try JSONParser.parse(report.json.serialized())) == report)
        let minimal = try StatusReport(json: ["revision": 1, "schemaVersion": 1, "state": "applied", "source": "app"])
        #expect(minimal.message == "")
        #expect(minimal.detail == nil)
    }

    @Test("a report's detail round-trips, is absent on the wire without one, and the old form is still read")
    func statusDetail() throws {
        let restored = StatusReport(
            revision: 7, schemaVersion: 2, state: .applied, message: "settings.json was edited", source: .agent,
            detail: .restoredAfterLocalEdit)
        #expect(restored.json.serialized().contains(#""detail":"restored-after-local-edit""#))
        #expect(try StatusReport(json: try JSONParser.parse(restored.json.serialized())) == restored)
        let plain = StatusReport(revision: 7, schemaVersion: 2, state: .applied, source: .agent)
        guard case .object(let members) = plain.json else { throw DocumentError(at: .root, "not an object") }
        #expect(members["detail"] == nil)
        // What a 0.7.0 agent sends and queues: no detail member at all.
        let old = try StatusReport(json: ["revision": 7, "schemaVersion": 2, "state": "applied", "message": "", "source": "agent"])
        #expect(old == plain)
    }

    static let badMessages: [(JSONValue, String)] = [
        ([], "/: must be an object"),
        (
            ["revision": 1, "schemaVersion": 1, "state": "done", "source": "agent"],
            #"/state: must be one of "applied", "error", "unsupported", "pending" (got "done")"#
        ),
        (["revision": -1, "schemaVersion": 1, "state": "applied", "source": "agent"], "/revision: must be a non-negative integer"),
        (["revision": 1.5, "schemaVersion": 1, "state": "applied", "source": "agent"], "/revision: must be a non-negative integer"),
        (["schemaVersion": 1, "state": "applied", "source": "agent"], "/revision: is missing"),
        (
            ["revision": 1, "schemaVersion": 1, "state": "applied", "source": "agent", "extra": true],
            "/extra: is not a member of this message"
        ),
        (
            ["revision": 1, "schemaVersion": 1, "state": "applied", "source": "agent", "detail": "edited"],
            #"/detail: must be one of "restored-after-local-edit" (got "edited")"#
        ),
        (
            [
                "revision": 1, "schemaVersion": 1, "state": "applied", "source": "agent",
                "message": .string(String(repeating: "x", count: 5000)),
            ],
            "/message: must be at most 4096 characters long"
        ),
    ]

    @Test("malformed reports are refused with the pointer of the bad member", arguments: badMessages)
    func refused(_ json: JSONValue, _ expected: String) {
        #expect {
            try StatusReport(json: json)
        } throws: { error in
            (error as? DocumentError)?.description == expected
        }
    }

    @Test("error bodies carry per-key details")
    func errorBody() throws {
        let body = ErrorBody(
            error: .notWritable, message: "these settings may not be changed by a device",
            details: [.init(pointer: "/mediaUrl", message: "not x-writable")])
        #expect(try ErrorBody(json: try JSONParser.parse(body.json.serialized())) == body)
        #expect(ErrorBody(error: ErrorCode(rawValue: "x"), message: "y").json == ["error": "x", "message": "y"])
    }

    @Test("enrollment messages round-trip; a request id is 16 to 64 safe characters, or absent (older agents)")
    func enrollment() throws {
        let request = EnrollRequest(enrollmentToken: "t", requestId: "r-0123456789abcdef")
        #expect(try EnrollRequest(json: request.json) == request)
        for bad in ["short", String(repeating: "a", count: 65), "0123456789abcdef/", "0123456789abcdef "] {
            #expect(throws: DocumentError.self) { try EnrollRequest(json: ["enrollmentToken": "t", "requestId": .string(bad)]) }
        }
        // The form agents from before request ids send: still v1.
        #expect(try EnrollRequest(json: ["enrollmentToken": "t"]) == EnrollRequest(enrollmentToken: "t", requestId: nil))
        #expect(EnrollRequest(enrollmentToken: "t", requestId: nil).json == ["enrollmentToken": "t"])
        let response = EnrollResponse(deviceId: "d-1", deviceToken: "secret", apps: ["kiosk"], groups: ["lobby"])
        #expect(try EnrollResponse(json: response.json) == response)
    }

    @Test("admin device and token messages round-trip; a token names at least one app")
    func deviceAdministration() throws {
        let record = DeviceRecord(
            id: "d-1", apps: ["kiosk"], groups: ["lobby"], disabled: true, enrolledAt: 1_795_000_000, lastSeenAt: nil,
            tokenRotationRequested: false)
        #expect(try DeviceRecordList(json: DeviceRecordList(devices: [record]).json) == DeviceRecordList(devices: [record]))
        let update = DeviceUpdate(apps: ["kiosk", "signage"], disabled: false)
        #expect(try DeviceUpdate(json: update.json) == update)
        #expect(throws: DocumentError.self) { try DeviceUpdate(json: ["rotateToken": false]) }
        #expect(throws: DocumentError.self) { try DeviceUpdate(json: ["disabled": "yes"]) }
        let info = EnrollmentTokenInfo(id: "et-1", apps: ["kiosk"], groups: [], usesLeft: 3, expiresAt: 1_795_000_000)
        #expect(try EnrollmentTokenList(json: EnrollmentTokenList(tokens: [info]).json) == EnrollmentTokenList(tokens: [info]))
        #expect(throws: DocumentError.self) { try EnrollmentTokenRequest(json: ["groups": ["lobby"]]) }
        let tokenRequest = EnrollmentTokenRequest(apps: ["kiosk"], groups: ["lobby"])
        #expect(try EnrollmentTokenRequest(json: tokenRequest.json) == tokenRequest)
        #expect(try TokenRotation(json: TokenRotation(deviceToken: "x").json) == TokenRotation(deviceToken: "x"))
    }

    @Test("revision ETags are strong, quoted decimals")
    func etags() {
        #expect(RevisionTag.etag(41) == "\"41\"")
        #expect(RevisionTag.revision("\"41\"") == 41)
        #expect(RevisionTag.revision(" \"0\" ") == 0)
        for bad in ["41", "W/\"41\"", "\"-1\"", "\"4a\"", "\"\"", "\"99999999999999999999\""] {
            #expect(RevisionTag.revision(bad) == nil, "\(bad)")
        }
    }

    @Test("a history entry's number goes out as `revision`, which 0.7.0's CLIs read, and is read from `entry` too")
    func historyEntryNumber() throws {
        let record = HistoryRecord(
            number: 4, at: 1_790_000_000, actor: "admin (token 7a2ecf77)", message: "", kind: "values",
            scopes: [.init(scope: "app", patch: ["volume": 3], values: ["volume": 3])], metadataVersion: nil)
        #expect(record.json["revision"] == 4 && record.json["entry"] == nil)
        #expect(try HistoryRecord(json: record.json, at: .root) == record)
        guard case .object(var renamed) = record.json else { throw DocumentError(at: .root, "not an object") }
        renamed["entry"] = renamed["revision"]
        renamed["revision"] = Optional<JSONValue>.none
        #expect(try HistoryRecord(json: .object(renamed), at: .root).number == 4)
    }
}
