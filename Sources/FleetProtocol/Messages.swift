import FleetJSON

/// A device's effective settings for one app: the body of `GET /v1/apps/{app}/settings`.
///
/// `{"app": "kiosk", "schemaVersion": 3, "revision": 41, "values": {…}}`. The revision
/// increases whenever the effective values or the schema version change; the response's ETag
/// is the revision in quotes (see ``RevisionTag``).
public struct SettingsDocument: Sendable, Hashable {
    /// The app's id.
    public var app: String
    /// The metadata version the values were validated against.
    public var schemaVersion: Int64
    /// The revision of the effective values.
    public var revision: Int64
    /// The values.
    public var values: JSONObject

    /// Creates a document.
    public init(app: String, schemaVersion: Int64, revision: Int64, values: JSONObject) {
        self.app = app
        self.schemaVersion = schemaVersion
        self.revision = revision
        self.values = values
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "schemaVersion", "revision", "values"])
        app = try reader.string("app", maximumLength: 64)
        schemaVersion = try reader.count("schemaVersion")
        revision = try reader.count("revision")
        values = try reader.values("values")
    }

    /// The wire form.
    public var json: JSONValue {
        [
            "app": .string(app), "schemaVersion": .number(.integer(schemaVersion)), "revision": .number(.integer(revision)),
            "values": .object(values),
        ]
    }

    /// The text of ``json`` (as `serialized()` writes it) for values whose text is written
    /// already: a server answering many devices with the same values writes them once.
    public static func jsonText(app: String, schemaVersion: Int64, revision: Int64, valuesText: String) -> String {
        "{\"app\":" + JSONValue.string(app).serialized() + ",\"schemaVersion\":\(schemaVersion),\"revision\":\(revision),\"values\":"
            + valuesText + "}"
    }
}

/// What happened to a revision on a device: the body of `POST /v1/apps/{app}/status`.
public struct StatusReport: Sendable, Hashable {
    /// The outcome.
    public enum State: String, Sendable, CaseIterable {
        /// The values are in place (and the app, if it acknowledges, took them).
        case applied
        /// The values could not be applied; the message says why.
        case error
        /// The metadata asks for something the device cannot honour.
        case unsupported
        /// Not an outcome: the values are checked and wait to be applied (outside the app's
        /// apply windows, or while the app holds its update lock); the message says why. The
        /// outcome follows.
        case pending

        /// The outcomes an app may acknowledge with (`pending` is the agent's alone).
        public static let outcomes: [State] = [.applied, .error, .unsupported]
    }

    /// Who reports.
    public enum Source: String, Sendable, CaseIterable {
        /// The agent, after validating, persisting and running the hook.
        case agent
        /// The app itself, relayed by the agent.
        case app
    }

    /// What else happened, beside the outcome: a closed set, so servers can count and show it.
    public enum Detail: String, Sendable, CaseIterable {
        /// `settings.json` no longer held what the agent wrote (someone edited it on the
        /// device): the agent put the served revision back and ran the hook again.
        case restoredAfterLocalEdit = "restored-after-local-edit"
    }

    /// The longest message accepted, in characters (Unicode scalars, as JSON Schema counts).
    public static let maximumMessageLength = 4096

    /// The revision the report is about: the ``SettingsDocument/revision`` the device fetched.
    public var revision: Int64
    /// The metadata version of that revision's values.
    public var schemaVersion: Int64
    /// What happened to the revision, or `pending` while it waits to be applied.
    public var state: State
    /// Why, for `error` and `unsupported` (failing JSON pointers and reasons); may be empty.
    public var message: String
    /// Who reports: the agent, or the app through it.
    public var source: Source
    /// What else happened (``Detail``); `nil` for most reports, and absent on the wire then, so
    /// that a server of 0.7.0 takes every report without one.
    public var detail: Detail?

    /// Creates a report.
    public init(revision: Int64, schemaVersion: Int64, state: State, message: String = "", source: Source, detail: Detail? = nil) {
        self.revision = revision
        self.schemaVersion = schemaVersion
        self.state = state
        self.message = message
        self.source = source
        self.detail = detail
    }

    /// Reads the wire form; unknown members are refused, `message` and `detail` are optional.
    /// Errors point below `location` (for a report inside another message).
    ///
    /// The message is shown to admins on their terminals, so it may hold `\n` and `\t` but no
    /// other control character, DEL, C1 control or bidirectional control (``TerminalText``):
    /// `/message: contains a control character (U+001B) at offset 3`.
    ///
    /// - Parameter acceptingAnyMessage: take any message: for reports kept from before that
    ///   rule (a server's answer, the agent's own queue), which are escaped when shown or sent.
    public init(json: JSONValue, at location: JSONPointer = .root, acceptingAnyMessage: Bool = false) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["revision", "schemaVersion", "state", "message", "source", "detail"])
        revision = try reader.count("revision")
        schemaVersion = try reader.count("schemaVersion")
        state = try reader.oneOf("state", State.self)
        message = try reader.optionalString("message", maximumLength: Self.maximumMessageLength) ?? ""
        if !acceptingAnyMessage { try Self.checkMessage(message, at: location.appending("message")) }
        source = try reader.oneOf("source", Source.self)
        detail = reader.object["detail"] == nil ? nil : try reader.oneOf("detail", Detail.self)
    }

    /// Refuses a message a server does not take: one holding a control character other than
    /// `\n` and `\t`, DEL, a C1 control or a bidirectional control. (A report's message has
    /// always been free text of several lines: agents send validation problems one per line.)
    public static func checkMessage(_ message: String, at location: JSONPointer) throws(DocumentError) {
        try TerminalText.check(message, at: location, allowingNewlinesAndTabs: true)
    }

    /// The wire form (`detail` only when there is one).
    public var json: JSONValue {
        var object: JSONObject = [
            "revision": .number(.integer(revision)), "schemaVersion": .number(.integer(schemaVersion)),
            "state": .string(state.rawValue), "message": .string(message), "source": .string(source.rawValue),
        ]
        if let detail { object["detail"] = .string(detail.rawValue) }
        return .object(object)
    }
}

/// `POST /v1/enroll` request: `{"enrollmentToken": "…", "requestId": "…"}`.
///
/// `requestId` makes enrollment idempotent: the agent makes it once, keeps it on disk, and sends
/// the same one when it retries after a lost answer; the server then answers with the same
/// device (and a fresh token for it) instead of spending another use of the enrollment token.
/// Agents from before it send none, and v1 still takes that form (`nil`): each such request is
/// a new enrollment, as it was for them.
public struct EnrollRequest: Sendable, Hashable {
    /// The characters a request id may use.
    public static let requestIDCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".unicodeScalars)

    /// The enrollment token the admin made (`fse_…`).
    public var enrollmentToken: String
    /// 16 to 64 characters of `A-Z a-z 0-9 - _`; `nil` from an agent that sends none.
    public var requestId: String?

    /// A request; fleetset's agent always sends a request id.
    public init(enrollmentToken: String, requestId: String?) {
        self.enrollmentToken = enrollmentToken
        self.requestId = requestId
    }

    /// Reads the request, strictly: unknown members and a malformed request id are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["enrollmentToken", "requestId"])
        enrollmentToken = try reader.string("enrollmentToken", maximumLength: 512)
        guard reader.object["requestId"] != nil else {
            requestId = nil
            return
        }
        let requestId = try reader.string("requestId", maximumLength: 64)
        guard Self.isValidRequestID(requestId) else {
            throw DocumentError(at: JSONPointer.root.appending("requestId"), "must be 16 to 64 characters of A-Z a-z 0-9 - _")
        }
        self.requestId = requestId
    }

    /// Whether `text` may be a request id.
    public static func isValidRequestID(_ text: String) -> Bool {
        (16...64).contains(text.unicodeScalars.count) && text.unicodeScalars.allSatisfy(requestIDCharacters.contains)
    }

    /// The request as sent (without `requestId` when it has none).
    public var json: JSONValue {
        var object: JSONObject = ["enrollmentToken": .string(enrollmentToken)]
        if let requestId { object["requestId"] = .string(requestId) }
        return .object(object)
    }
}

/// `POST /v1/enroll` response: the device's id and token, and the apps and groups the
/// enrollment token gave it.
public struct EnrollResponse: Sendable, Hashable {
    /// The device's id (`d-…`), at most 128 characters.
    public var deviceId: String
    /// The device's token (`fsd_…`): the bearer token of its requests from now on.
    public var deviceToken: String
    /// The apps whose settings the device may read and write.
    public var apps: [String]
    /// The groups the device joined.
    public var groups: [String]

    /// Creates a response.
    public init(deviceId: String, deviceToken: String, apps: [String], groups: [String]) {
        self.deviceId = deviceId
        self.deviceToken = deviceToken
        self.apps = apps
        self.groups = groups
    }

    /// Reads the wire form; unknown members are refused, and `apps` and `groups` may be absent (empty).
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["deviceId", "deviceToken", "apps", "groups"])
        deviceId = try reader.string("deviceId", maximumLength: 128)
        deviceToken = try reader.string("deviceToken", maximumLength: 512)
        apps = try reader.names("apps", maximumCount: 256, maximumLength: 64) ?? []
        groups = try reader.names("groups", maximumCount: 32) ?? []
    }

    /// The wire form.
    public var json: JSONValue {
        [
            "deviceId": .string(deviceId), "deviceToken": .string(deviceToken), "apps": .array(apps.map(JSONValue.string)),
            "groups": .array(groups.map(JSONValue.string)),
        ]
    }
}

/// `POST /v1/device/token` response: the device's new token. The old one keeps working until
/// the new one is first used, so an answer lost on the way never locks the device out.
public struct TokenRotation: Sendable, Hashable {
    /// The device's new token (`fsd_…`), shown this once.
    public var deviceToken: String

    /// Creates a response.
    public init(deviceToken: String) {
        self.deviceToken = deviceToken
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["deviceToken"])
        deviceToken = try reader.string("deviceToken", maximumLength: 512)
    }

    /// The wire form.
    public var json: JSONValue { ["deviceToken": .string(deviceToken)] }
}

/// The body of every 4xx/5xx answer: `{"error": "stale-revision", "message": "…", "details": [{"pointer", "message"}]}`.
public struct ErrorBody: Sendable, Hashable {
    /// One per-key reason (for 403 and 422).
    public struct Detail: Sendable, Hashable {
        /// The JSON pointer of the value or metadata member at fault: `/volume`.
        public var pointer: String
        /// Why that value is refused, for a person.
        public var message: String

        /// Creates a detail.
        public init(pointer: String, message: String) {
            self.pointer = pointer
            self.message = message
        }
    }

    /// A stable, machine-readable code (`stale-revision`, `not-writable`, `invalid-values`, …).
    public var error: ErrorCode
    /// A sentence for a person.
    public var message: String
    /// One per value at fault, for `not-writable`, `invalid-values`, `invalid-metadata` and
    /// `values-invalid`; empty otherwise, and then absent on the wire.
    public var details: [Detail]

    /// Creates a body; most have no details.
    public init(error: ErrorCode, message: String, details: [Detail] = []) {
        self.error = error
        self.message = message
        self.details = details
    }

    /// Reads the wire form; unknown members are refused, in the body and in each detail. A code
    /// this build does not know is kept as sent.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["error", "message", "details"])
        error = ErrorCode(rawValue: try reader.string("error", maximumLength: 64))
        message = try reader.string("message")
        var details: [Detail] = []
        if let list = reader.object["details"] {
            guard case .array(let elements) = list else {
                throw DocumentError(at: JSONPointer.root.appending("details"), "must be an array")
            }
            for (index, element) in elements.enumerated() {
                let itemReader = try ObjectReader(
                    element, at: JSONPointer.root.appending("details").appending(index: index), allowed: ["pointer", "message"])
                details.append(Detail(pointer: try itemReader.string("pointer"), message: try itemReader.string("message")))
            }
        }
        self.details = details
    }

    /// The wire form, without `details` when there are none.
    public var json: JSONValue {
        var object: JSONObject = ["error": .string(error.rawValue), "message": .string(message)]
        if !details.isEmpty {
            object["details"] = .array(details.map { ["pointer": .string($0.pointer), "message": .string($0.message)] })
        }
        return .object(object)
    }
}

/// The strong ETag of a settings revision: `"41"`.
public enum RevisionTag {
    /// `"41"` for revision 41.
    public static func etag(_ revision: Int64) -> String { "\"\(revision)\"" }

    /// The revision an `ETag`, `If-Match` or `If-None-Match` value names, or `nil` when it is
    /// not a strong tag of a non-negative decimal revision (weak tags `W/"…"` are refused:
    /// settings compare byte for byte).
    public static func revision(_ tag: String) -> Int64? {
        let trimmed = Substring(tag).trimmingSpaces()
        guard trimmed.count >= 3, trimmed.first == "\"", trimmed.last == "\"" else { return nil }
        let digits = trimmed.dropFirst().dropLast()
        guard digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), digits.count <= 18 else { return nil }
        return Int64(digits)
    }
}

extension StringProtocol {
    /// The text without leading and trailing whitespace, line ends included (what a person
    /// pasted from a file, or typed with a space).
    public func trimmingWhitespace() -> String {
        String(drop { $0.isWhitespace }.reversed().drop { $0.isWhitespace }.reversed())
    }

    /// At most `length` characters of the text (Unicode scalars) without control and format
    /// characters (line breaks, escapes, bidirectional overrides): what another party wrote
    /// (an identity provider's error or a person's name), fit to show or keep on one line.
    public func printablePrefix(_ length: Int) -> String {
        let kept = unicodeScalars.lazy.filter { $0.properties.generalCategory != .control && $0.properties.generalCategory != .format }
        return String(String.UnicodeScalarView(kept.prefix(length)))
    }
}

extension Substring {
    /// The text without leading and trailing spaces and tabs (HTTP's optional whitespace).
    public func trimmingSpaces() -> Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
