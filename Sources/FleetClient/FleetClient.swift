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
    }

    /// As ``settings(app:knownRevision:wait:)``, with the server's requests of the device.
    ///
    /// - Parameters:
    ///   - delay: how long the client waits before sending (see
    ///     ``HTTPClient/Request/startDelay``): a poll on a timer is scheduled at once, on the
    ///     client's own thread, and can be cancelled until it goes.
    ///   - repeats: the waits of the polls that follow while the server answers `304` (see
    ///     ``HTTPClient/NotModifiedRepeats``); a `304` asking for a token rotation ends them,
    ///     and none starts later than ``repeatBound(_:)`` after the first request went out.
    public func settingsAnswer(
        app: String, knownRevision: Int64? = nil, wait: Int = 0, after delay: Duration = .zero,
        repeatsWhileUnchanged repeats: [Duration] = []
    ) async throws -> SettingsAnswer {
        var headers: HTTPClient.Headers = [:]
        if let knownRevision { headers["If-None-Match"] = RevisionTag.etag(knownRevision) }
        var limits: TransferLimits?
        if wait > 0 {
            // A held request transfers nothing for up to `wait` seconds: no low-speed limit, and a
            // total timeout above the wait; the size cap stays the client's.
            limits = http.configuration.limits
            limits?.timeout = .seconds(wait + 30)
            limits?.lowSpeedLimit = nil
        }
        let query = wait > 0 ? "?wait=\(wait)" : ""
        let plan =
            repeats.isEmpty
            ? nil
            : HTTPClient.NotModifiedRepeats(delays: repeats, unlessHeaders: [Self.rotateTokenHeader], within: Self.repeatBound(repeats))
        let response = try await send(
            .get, "/v1/apps/\(app)/settings\(query)", headers: headers, limits: limits, startDelay: delay, repeats: plan,
            expect: [200, 304])
        let rotation = response.headers[Self.rotateTokenHeader] == "requested"
        guard response.status == 200 else { return SettingsAnswer(document: nil, tokenRotationRequested: rotation) }
        return SettingsAnswer(document: try decode(response, SettingsDocument.init(json:)), tokenRotationRequested: rotation)
    }

    /// How long after the first request the last repeat of `repeats` may start: their sum,
    /// plus the last wait again for the time the requests themselves take. However slow the
    /// answers, a plan ends within this plus one request (the agent's watchdog counts on it).
    public static func repeatBound(_ repeats: [Duration]) -> Duration {
        repeats.reduce(.zero, +) + (repeats.last ?? .zero)
    }

    /// The header by which the server asks the device to rotate its token.
    static let rotateTokenHeader = "Fleetset-Rotate-Token"

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

    /// `?a=1&b=2` of the parameters that are not `nil`, percent-encoded, in key order.
    static func query(_ parameters: [String: String?]) -> String {
        let pairs = parameters.compactMap { key, value in value.map { (key, $0) } }.sorted { $0.0 < $1.0 }
        guard !pairs.isEmpty else { return "" }
        return "?" + pairs.map { "\(percentEncoded($0.0))=\(percentEncoded($0.1))" }.joined(separator: "&")
    }

    /// The app's history, oldest first: of one scope, or the newest `limit` entries.
    public func history(app: String, scope: String? = nil, limit: Int? = nil) async throws -> HistoryList {
        let response = try await send(
            .get, "/v1/admin/apps/\(app)/history" + Self.query(["scope": scope, "limit": limit.map(String.init)]), expect: [200])
        return try decode(response, HistoryList.init(json:))
    }

    /// Makes the values what they were after an earlier revision (a new revision).
    public func revert(app: String, _ request: RevertRequest) async throws -> HistoryRecord {
        let response = try await send(.post, "/v1/admin/apps/\(app)/revert", json: request.json, expect: [201])
        return try decode(response) { json throws(DocumentError) in try HistoryRecord(json: json, at: .root) }
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
        try decode(try await send(.get, "/v1/admin/apps/\(app)/devices", expect: [200]), DeviceList.init(json:))
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
    public func allDevices() async throws -> DeviceRecordList {
        try decode(try await send(.get, "/v1/admin/devices", expect: [200]), DeviceRecordList.init(json:))
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

    private func send(
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

    private func decode<Message>(_ response: HTTPClient.Response, _ make: (JSONValue) throws(DocumentError) -> Message) throws -> Message {
        do {
            return try make(try JSONParser.parse(response.body))
        } catch let error as DocumentError {
            throw FleetClientError.badResponse("the server's answer does not match protocol v1: \(error)")
        } catch {
            throw FleetClientError.badResponse("the server's answer is not JSON: \(error)")
        }
    }

    /// Percent-encodes everything but RFC 3986's unreserved characters.
    static func percentEncoded(_ text: String) -> String {
        var encoded = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                encoded.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".unicodeScalars)
                encoded += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 0xF)])
            }
        }
        return encoded
    }
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
    public var code: String? {
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
