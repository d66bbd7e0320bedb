import Curl
import FleetJSON
import FleetProtocol

/// Protocol v1 from the calling side, typed, over fleetset's libcurl client: what the agent
/// and `fleetset admin` use to talk to a server.
///
/// Every refusal throws ``FleetClientError/refused(status:body:retryAfter:)`` carrying the
/// server's ``ErrorBody``; transport failures throw the `HTTPClientError` as it is.
public struct FleetClient: Sendable {
    /// The server's base URL, without a trailing slash: `https://fleet.example.com`.
    public let baseURL: String
    private let http: HTTPClient
    private let token: String?

    /// - Parameter token: the device or admin bearer token (`nil` only for enrollment).
    public init(http: HTTPClient, baseURL: String, token: String?) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.http = http
        self.token = token
    }

    // MARK: - Device side

    /// Exchanges an enrollment token for a device identity. Send the same `requestId` when
    /// retrying after a lost answer: the server then answers with the same device.
    public func enroll(enrollmentToken: String, requestId: String) async throws -> EnrollResponse {
        let request = EnrollRequest(enrollmentToken: enrollmentToken, requestId: requestId)
        let response = try await send(.post, "/v1/enroll", json: request.json, expect: [201])
        return try decode(response, EnrollResponse.init(json:))
    }

    /// A new token for this device. The old one works until the new one is first used.
    public func rotateToken() async throws -> TokenRotation {
        try decode(try await send(.post, "/v1/device/token", expect: [201]), TokenRotation.init(json:))
    }

    /// The app's metadata document and its ETag, or `nil` when it still has `etag`.
    public func metadata(app: String, ifNoneMatch etag: String? = nil) async throws -> (document: [UInt8], etag: String)? {
        var headers: HTTPClient.Headers = [:]
        if let etag { headers["If-None-Match"] = etag }
        let response = try await send(.get, "/v1/apps/\(app)/metadata", headers: headers, expect: [200, 304])
        guard response.status == 200 else { return nil }
        return (response.body, response.headers["ETag"] ?? "")
    }

    /// The device's settings, or `nil` when they are still at `knownRevision` (after waiting up
    /// to `wait` seconds for a change: a long-poll).
    public func settings(app: String, knownRevision: Int64? = nil, wait: Int = 0) async throws -> SettingsDocument? {
        try await settingsAnswer(app: app, knownRevision: knownRevision, wait: wait).document
    }

    /// What ``settings(app:knownRevision:wait:)`` answers, with what the server asks of the
    /// device beside it.
    public struct SettingsAnswer: Sendable, Hashable {
        /// `nil`: still at the known revision.
        public var document: SettingsDocument?
        /// The admin asked the device to rotate its token (`Fleetset-Rotate-Token`).
        public var tokenRotationRequested: Bool
        /// The tag of the device's agent policy, when it differs from the one sent
        /// (`Fleetset-Policy`).
        public var policyTag: String?
        /// The server is busy: send the next request after this (`Fleetset-Next-Poll`).
        public var nextPoll: Duration?
        /// The server records a status report sent on a settings request (`Fleetset-Accepts:
        /// status`, see ``FleetProtocol/StatusOnPoll``): a report sent with this request was recorded.
        public var acceptsStatus: Bool

        public init(
            document: SettingsDocument?, tokenRotationRequested: Bool = false, policyTag: String? = nil, nextPoll: Duration? = nil,
            acceptsStatus: Bool = false
        ) {
            self.document = document
            self.tokenRotationRequested = tokenRotationRequested
            self.policyTag = policyTag
            self.nextPoll = nextPoll
            self.acceptsStatus = acceptsStatus
        }
    }

    /// The limits of a request the server may hold for `wait` seconds: it transfers nothing that
    /// long, so no low-speed limit, and a total timeout above the wait; the size cap stays the
    /// client's. `nil` (the client's own) when it is not held.
    private func longPollLimits(wait: Int) -> TransferLimits? {
        guard wait > 0 else { return nil }
        var limits = http.configuration.limits
        limits.timeout = .seconds(wait + 30)
        limits.lowSpeedLimit = nil
        return limits
    }

    /// The longest `Fleetset-Next-Poll` honoured: an hour.
    public static let nextPollCap: Duration = .seconds(3600)

    /// As ``settings(app:knownRevision:wait:)``, with the server's requests of the device.
    ///
    /// - Parameters:
    ///   - delay: how long the client waits before sending (see
    ///     ``HTTPClient/Request/startDelay``): a poll on a timer is scheduled at once, on the
    ///     client's own thread, and can be cancelled until it goes.
    ///   - repeats: the waits of the polls that follow while the server answers `304` (see
    ///     ``HTTPClient/NotModifiedRepeats``); a `304` asking for a token rotation ends them,
    ///     and none starts later than ``repeatBound(_:)`` after the first request went out.
    ///   - policyTag: the tag of the agent policy the device has (`nil`: do not ask).
    ///   - status: a status report to send with the request (`Fleetset-Status`), encoded
    ///     (``FleetProtocol/StatusOnPoll/Carried``, which only a report that fits makes), only
    ///     to a server that answered with ``SettingsAnswer/acceptsStatus``. It is recorded when
    ///     the answer is a 200 or 304 with ``SettingsAnswer/acceptsStatus``.
    public func settingsAnswer(
        app: String, knownRevision: Int64? = nil, wait: Int = 0, after delay: Duration = .zero,
        repeatsWhileUnchanged repeats: [Duration] = [], policyTag: String? = nil, status: StatusOnPoll.Carried? = nil
    ) async throws -> SettingsAnswer {
        var headers: HTTPClient.Headers = [:]
        if let knownRevision { headers["If-None-Match"] = RevisionTag.etag(knownRevision) }
        if let policyTag { headers[FleetHeader.policy] = policyTag }
        if let status { headers[FleetHeader.status] = status.headerValue }
        let limits = longPollLimits(wait: wait)
        let query = wait > 0 ? "?wait=\(wait)" : ""
        let plan =
            repeats.isEmpty
            ? nil
            : HTTPClient.NotModifiedRepeats(
                delays: repeats, unlessHeaders: [FleetHeader.rotateToken, FleetHeader.policy, FleetHeader.nextPoll],
                within: Self.repeatBound(repeats))
        let response = try await send(
            .get, "/v1/apps/\(app)/settings\(query)", headers: headers, limits: limits, startDelay: delay, repeats: plan,
            expect: [200, 304])
        var answer = SettingsAnswer(
            document: nil, tokenRotationRequested: response.headers[FleetHeader.rotateToken] == "requested",
            policyTag: response.headers[FleetHeader.policy].flatMap(Self.policyTag),
            nextPoll: response.headers[FleetHeader.nextPoll].flatMap(Self.nextPoll),
            acceptsStatus: StatusOnPoll.isAccepted(byAnswerHeader: response.headers[FleetHeader.accepts]))
        if response.status == 200 { answer.document = try decode(response, SettingsDocument.init(json:)) }
        return answer
    }

    /// A policy tag as the server sends it: 1 to 16 hex digits (anything else is ignored).
    static func policyTag(_ text: String) -> String? {
        (1...16).contains(text.utf8.count) && text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) })
            ? text : nil
    }

    /// `Fleetset-Next-Poll`: whole seconds, capped at ``nextPollCap`` (anything else is ignored).
    static func nextPoll(_ text: String) -> Duration? {
        guard !text.isEmpty, text.utf8.count <= 10, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int64(text) else {
            return nil
        }
        return min(.seconds(seconds), nextPollCap)
    }

    /// The value at `keyPath` of the device's settings and their revision
    /// (`GET /v1/apps/{app}/settings/{keyPath}`); `nil` when still at `knownRevision` (after up
    /// to `wait` seconds).
    public func settingValue(app: String, keyPath: JSONPointer, knownRevision: Int64? = nil, wait: Int = 0) async throws
        -> (value: JSONValue, revision: Int64)?
    {
        var headers: HTTPClient.Headers = [:]
        if let knownRevision { headers["If-None-Match"] = RevisionTag.etag(knownRevision) }
        let limits = longPollLimits(wait: wait)
        let response = try await send(
            .get, "/v1/apps/\(app)/settings/" + Self.encodedKeyPath(keyPath) + (wait > 0 ? "?wait=\(wait)" : ""), headers: headers,
            limits: limits, expect: [200, 304])
        guard response.status == 200 else { return nil }
        guard let revision = response.headers["ETag"].flatMap(RevisionTag.revision) else {
            throw FleetClientError.badResponse("the server's answer has no revision ETag")
        }
        do {
            return (try JSONParser.parse(response.body), revision)
        } catch {
            throw FleetClientError.badResponse("the server's answer is not JSON: \(error)")
        }
    }

    /// What the server asks of this device's agent (`GET /v1/device/policy`) and its tag.
    public func devicePolicy() async throws -> (policy: DevicePolicy, tag: String) {
        let response = try await send(.get, "/v1/device/policy", expect: [200])
        // Keys a newer server knows and this agent does not are left out, not refused.
        let policy = try decode(response) { json throws(DocumentError) in try DevicePolicy(json: json, ignoringUnknownKeys: true) }
        let etag = response.headers["ETag"].map { String($0.filter { $0 != "\"" }) }
        return (policy, etag.flatMap(Self.policyTag) ?? policy.tag)
    }

    /// Reports the device's facts that changed (a merge patch of ``DeviceInfo``); returns them
    /// as the server keeps them.
    public func reportDeviceInfo(_ patch: JSONObject) async throws -> JSONObject {
        let response = try await send(
            .patch, "/v1/device/info", json: .object(patch), contentType: "application/merge-patch+json", expect: [200])
        return try decode(response) { json throws(DocumentError) in try ObjectReader(json, allowed: ["info"]).values("info") }
    }

    /// How long after the first request the last repeat of `repeats` may start: their sum,
    /// plus the last wait again for the time the requests themselves take. However slow the
    /// answers, a plan ends within this plus one request (the agent's watchdog counts on it).
    public static func repeatBound(_ repeats: [Duration]) -> Duration {
        repeats.reduce(.zero, +) + (repeats.last ?? .zero)
    }

    /// Sends a merge patch of writable settings based on `revision`; returns the new settings.
    public func patchSettings(app: String, patch: JSONObject, basedOn revision: Int64) async throws -> SettingsDocument {
        let response = try await send(
            .patch, "/v1/apps/\(app)/settings", json: .object(patch), contentType: "application/merge-patch+json",
            headers: ["If-Match": RevisionTag.etag(revision)], expect: [200])
        return try decode(response, SettingsDocument.init(json:))
    }

    /// Reports what happened to a revision.
    public func reportStatus(app: String, _ report: StatusReport) async throws {
        _ = try await send(.post, "/v1/apps/\(app)/status", json: report.json, expect: [202])
    }

    // MARK: - Admin side

    /// Stores a metadata document (its text as given); `message` says why, for the history.
    public func putMetadata(app: String, document: [UInt8], force: Bool = false, message: String = "") async throws -> MetadataPutResult {
        let response = try await send(
            .put,
            "/v1/admin/apps/\(app)/metadata" + Self.query(["force": force ? "true" : nil, "message": message.isEmpty ? nil : message]),
            body: document, contentType: "application/json", expect: [200])
        return try decode(response, MetadataPutResult.init(json:))
    }

    /// The bytes of the app's metadata document as stored (admin side).
    public func storedMetadata(app: String) async throws -> [UInt8] {
        try await send(.get, "/v1/admin/apps/\(app)/metadata", expect: [200]).body
    }

    /// `?a=1&b=2` of the parameters that are not `nil`, percent-encoded, in key order.
    static func query(_ parameters: [String: String?]) -> String {
        let pairs = parameters.compactMap { key, value in value.map { (key, $0) } }.sorted { $0.0 < $1.0 }
        guard !pairs.isEmpty else { return "" }
        return "?" + pairs.map { "\(percentEncoded($0.0))=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    /// The app's history, oldest first: of one scope, or the newest `limit` entries.
    public func history(app: String, scope: String? = nil, before: Int64? = nil, limit: Int? = nil) async throws -> HistoryList {
        let response = try await send(
            .get,
            "/v1/admin/apps/\(app)/history"
                + Self.query(["scope": scope, "before": before.map { String($0) }, "limit": limit.map(String.init)]), expect: [200])
        return try decode(response, HistoryList.init(json:))
    }

    /// Makes the values what they were after an earlier history entry (a new entry).
    public func revert(app: String, _ request: RevertRequest) async throws -> HistoryRecord {
        let response = try await send(.post, "/v1/admin/apps/\(app)/revert", json: request.json, expect: [201])
        return try decode(response) { json throws(DocumentError) in try HistoryRecord(json: json, at: .root) }
    }

    /// Sets the whole values of several scopes of `app` as one change, or with `dryRun` checks
    /// it and says what would change (`POST /v1/admin/apps/{app}/apply`).
    public func apply(app: String, _ request: ApplyRequest, dryRun: Bool = false) async throws -> ApplyResult {
        let path = "/v1/admin/apps/\(app)/apply" + Self.query(["dryRun": dryRun ? "true" : nil])
        return try decode(try await send(.post, path, json: request.json, expect: [200]), ApplyResult.init(json:))
    }

    /// The values of every scope of `app` that holds any, and its newest history entry.
    public func scopes(app: String) async throws -> AppScopes {
        try decode(try await send(.get, "/v1/admin/apps/\(app)/scopes", expect: [200]), AppScopes.init(json:))
    }

    /// The apps the caller may read, with their metadata's version.
    public func apps() async throws -> AppList {
        try decode(try await send(.get, "/v1/admin/apps", expect: [200]), AppList.init(json:))
    }

    /// Stages a change in waves.
    public func startRollout(app: String, _ request: RolloutRequest) async throws -> RolloutView {
        try decode(try await send(.post, "/v1/admin/apps/\(app)/rollouts", json: request.json, expect: [201]), RolloutView.init(json:))
    }

    /// The app's active or latest rollout with its progress.
    public func rollout(app: String) async throws -> RolloutView {
        try decode(try await send(.get, "/v1/admin/apps/\(app)/rollout", expect: [200]), RolloutView.init(json:))
    }

    /// Resumes the app's paused rollout with its next wave.
    public func resumeRollout(app: String) async throws -> RolloutView {
        try decode(try await send(.post, "/v1/admin/apps/\(app)/rollout/resume", expect: [200]), RolloutView.init(json:))
    }

    /// Aborts the app's active rollout: every device is back on the stored values.
    public func abortRollout(app: String) async throws -> RolloutView {
        try decode(try await send(.post, "/v1/admin/apps/\(app)/rollout/abort", expect: [200]), RolloutView.init(json:))
    }

    /// The values set at `scope` (`app`, `group:NAME`, `device:ID`).
    public func values(app: String, scope: String) async throws -> ScopedValues {
        let response = try await send(.get, "/v1/admin/apps/\(app)/values?scope=\(Self.percentEncoded(scope))", expect: [200])
        return try decode(response, ScopedValues.init(json:))
    }

    /// Applies a merge patch (a `null` clears) to the values at `scope`; `message` says why, for
    /// the history; `force` writes settings a running rollout stages.
    /// Sets (`value`) or removes (`nil`) the value at `keyPath` inside one setting at `scope`;
    /// the server writes the whole setting. Returns the scope's values.
    public func setValue(
        app: String, scope: String, keyPath: JSONPointer, to value: JSONValue?, message: String = "", force: Bool = false
    ) async throws -> ScopedValues {
        let query = Self.query(["scope": scope, "message": message.isEmpty ? nil : message, "force": force ? "true" : nil])
        let path = "/v1/admin/apps/\(app)/values/" + Self.encodedKeyPath(keyPath) + query
        let response: HTTPClient.Response
        if let value {
            response = try await send(.put, path, json: value, expect: [200])
        } else {
            response = try await send(.delete, path, expect: [200])
        }
        return try decode(response, ScopedValues.init(json:))
    }

    /// A key path as URL path segments: each part escaped as in a JSON pointer, then percent-encoded.
    static func encodedKeyPath(_ keyPath: JSONPointer) -> String {
        keyPath.tokens.map { percentEncoded(JSONPointer.escape($0)) }.joined(separator: "/")
    }

    public func patchValues(app: String, scope: String, patch: JSONObject, message: String = "", force: Bool = false) async throws
        -> ScopedValues
    {
        let query = Self.query(["scope": scope, "message": message.isEmpty ? nil : message, "force": force ? "true" : nil])
        let response = try await send(
            .patch, "/v1/admin/apps/\(app)/values" + query, json: .object(patch), contentType: "application/merge-patch+json",
            expect: [200])
        return try decode(response, ScopedValues.init(json:))
    }

    /// Every device with its last contact, served revision and latest status.
    public func devices(app: String) async throws -> DeviceList {
        try decode(try await send(.get, "/v1/admin/apps/\(app)/devices?detail=true", expect: [200]), DeviceList.init(json:))
    }

    /// A device's effective values and where each comes from.
    public func explain(app: String, deviceID: String) async throws -> Explanation {
        let response = try await send(.get, "/v1/admin/apps/\(app)/devices/\(Self.percentEncoded(deviceID))/explain", expect: [200])
        return try decode(response, Explanation.init(json:))
    }

    /// The calling device's own effective values and where each comes from (device token).
    public func explainSelf(app: String) async throws -> Explanation {
        try decode(try await send(.get, "/v1/apps/\(app)/explain", expect: [200]), Explanation.init(json:))
    }

    /// Makes an enrollment token.
    public func makeEnrollmentToken(_ request: EnrollmentTokenRequest) async throws -> EnrollmentTokenResponse {
        let response = try await send(.post, "/v1/admin/enrollment-tokens", json: request.json, expect: [201])
        return try decode(response, EnrollmentTokenResponse.init(json:))
    }

    /// Every device with its apps, groups and state.
    public func allDevices(where filters: [DeviceInfoFilter] = []) async throws -> DeviceRecordList {
        let query = filters.isEmpty ? "" : "?" + filters.map { "where=" + Self.percentEncoded($0.description) }.joined(separator: "&")
        return try decode(try await send(.get, "/v1/admin/devices" + query, expect: [200]), DeviceRecordList.init(json:))
    }

    /// What the server asks of one device's agent, app by app, and where each key was set.
    public func devicePolicy(id: String) async throws -> DevicePolicy {
        try decode(
            try await send(.get, "/v1/admin/devices/\(Self.percentEncoded(id))/policy", expect: [200]),
            { json throws(DocumentError) in try DevicePolicy(json: json) })
    }

    /// Every scope's agent policy.
    public func policies() async throws -> PolicyList {
        try decode(try await send(.get, "/v1/admin/policies", expect: [200]), PolicyList.init(json:))
    }

    /// Changes the agent policy at `scope` by a merge patch (`null` removes a key); returns it.
    public func patchPolicy(scope: PolicyScope, _ patch: JSONObject) async throws -> AgentPolicy {
        let response = try await send(
            .patch, "/v1/admin/policies/\(Self.percentEncoded(scope.description))", json: .object(patch),
            contentType: "application/merge-patch+json", expect: [200])
        return try decode(response) { json throws(DocumentError) in try AgentPolicy(json: json) }
    }

    /// Every group, with its query when one defines it and its member count.
    public func groups() async throws -> GroupList {
        try decode(try await send(.get, "/v1/admin/groups", expect: [200]), GroupList.init(json:))
    }

    /// One group with its query and its members.
    public func group(name: String) async throws -> GroupDetail {
        try decode(try await send(.get, "/v1/admin/groups/\(Self.percentEncoded(name))", expect: [200]), GroupDetail.init(json:))
    }

    /// Defines group `name` by a query on the devices' facts (or replaces its query); returns
    /// the group with its members as they are now.
    public func defineGroup(name: String, where conditions: [DeviceInfoFilter]) async throws -> GroupDetail {
        let body = GroupDefinition(name: name, conditions: conditions).queryJSON
        let response = try await send(.put, "/v1/admin/groups/\(Self.percentEncoded(name))", json: body, expect: [200])
        return try decode(response, GroupDetail.init(json:))
    }

    /// Removes the query of group `name`: its members leave it.
    public func removeGroupDefinition(name: String) async throws {
        _ = try await send(.delete, "/v1/admin/groups/\(Self.percentEncoded(name))", expect: [204])
    }

    /// One device.
    public func device(id: String) async throws -> DeviceRecord {
        try decode(
            try await send(.get, "/v1/admin/devices/\(Self.percentEncoded(id))", expect: [200]),
            { json throws(DocumentError) in try DeviceRecord(json: json) })
    }

    /// Changes a device's apps or groups, disables or enables it, or asks it to rotate its token.
    public func updateDevice(id: String, _ update: DeviceUpdate) async throws -> DeviceRecord {
        let response = try await send(
            .patch, "/v1/admin/devices/\(Self.percentEncoded(id))", json: update.json, contentType: "application/merge-patch+json",
            expect: [200])
        return try decode(response, { json throws(DocumentError) in try DeviceRecord(json: json) })
    }

    /// Deletes a device; its token stops working at once.
    public func deleteDevice(id: String) async throws {
        _ = try await send(.delete, "/v1/admin/devices/\(Self.percentEncoded(id))", expect: [204])
    }

    /// The enrollment tokens that can still be used.
    public func enrollmentTokens() async throws -> EnrollmentTokenList {
        try decode(try await send(.get, "/v1/admin/enrollment-tokens", expect: [200]), EnrollmentTokenList.init(json:))
    }

    /// Revokes an enrollment token by its id.
    public func revokeEnrollmentToken(id: String) async throws {
        _ = try await send(.delete, "/v1/admin/enrollment-tokens/\(Self.percentEncoded(id))", expect: [204])
    }

    // MARK: - Transport

    func send(
        _ method: HTTPClient.Method, _ path: String, json: JSONValue? = nil, body: [UInt8]? = nil, contentType: String = "application/json",
        headers: HTTPClient.Headers = [:], limits: TransferLimits? = nil, startDelay: Duration = .zero,
        repeats: HTTPClient.NotModifiedRepeats? = nil, expect: Set<Int>
    ) async throws -> HTTPClient.Response {
        var request = HTTPClient.Request(
            method: method, url: baseURL + path, headers: headers, limits: limits, startDelay: startDelay, notModifiedRepeats: repeats)
        if let token { request.headers["Authorization"] = "Bearer " + token }
        request.headers["Accept"] = "application/json"
        if let payload = json.map({ Array($0.serialized().utf8) }) ?? body {
            request.body = payload
            request.headers["Content-Type"] = contentType
        }
        let response = try await http.execute(request)
        guard expect.contains(response.status) else {
            let errorBody = (try? JSONParser.parse(response.body)).flatMap { try? ErrorBody(json: $0) }
            throw FleetClientError.refused(status: response.status, body: errorBody, retryAfter: response.retryAfter)
        }
        return response
    }

    func decode<Message>(_ response: HTTPClient.Response, _ make: (JSONValue) throws(DocumentError) -> Message) throws -> Message {
        do {
            return try make(try JSONParser.parse(response.body))
        } catch let error as DocumentError {
            throw FleetClientError.badResponse("the server's answer does not match protocol v1: \(error)")
        } catch {
            throw FleetClientError.badResponse("the server's answer is not JSON: \(error)")
        }
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func percentEncoded(_ text: String) -> String { PercentEncoding.encoded(text) }
}

/// A server answer the client cannot use.
public enum FleetClientError: Error, Sendable, CustomStringConvertible {
    /// The server refused the request: its status, error body (if it sent one) and the delay
    /// it asked for in `Retry-After` (if it did).
    case refused(status: Int, body: ErrorBody?, retryAfter: Duration?)
    /// The answer does not match the protocol.
    case badResponse(String)

    /// The status of a refusal.
    public var status: Int? {
        if case .refused(let status, _, _) = self { return status }
        return nil
    }

    /// The error code of a refusal (`stale-revision`, …).
    public var code: ErrorCode? {
        if case .refused(_, let body, _) = self { return body?.error }
        return nil
    }

    /// The delay the server asked for with `Retry-After`, if any.
    public var retryAfter: Duration? {
        if case .refused(_, _, let delay) = self { return delay }
        return nil
    }

    /// `409 stale-revision: the settings are at revision 4, …` with one indented line per detail.
    public var description: String {
        switch self {
        case .refused(let status, let body?, _):
            var text = "\(status) \(body.error): \(body.message)"
            for detail in body.details { text += "\n  \(detail.pointer.isEmpty ? "/" : detail.pointer): \(detail.message)" }
            return text
        case .refused(let status, nil, _):
            return "the server answered \(status) without an error description"
        case .badResponse(let message):
            return message
        }
    }
}
