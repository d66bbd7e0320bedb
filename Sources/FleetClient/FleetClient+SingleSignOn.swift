import Curl
import FleetJSON
import FleetProtocol

extension FleetClient {
    /// How the CLI signs in through the server's identity provider (`GET /v1/admin/sso`).
    public func singleSignOnInfo() async throws -> SingleSignOnInfo {
        try decode(try await send(.get, "/v1/admin/sso", expect: [200]), SingleSignOnInfo.init(json:))
    }

    /// Exchanges what the provider gave at the end of the device grant for a personal API token.
    public func signIn(_ request: SingleSignOnSignIn) async throws -> CreatedAPIToken {
        try decode(try await send(.post, "/v1/admin/sign-in/sso", json: request.json, expect: [201]), CreatedAPIToken.init(json:))
    }
}

/// The OAuth 2.0 Device Authorization Grant (RFC 8628) from the CLI's side, over libcurl: ask
/// the provider for a code, show the person where to enter it, poll the token endpoint as
/// ``DevicePoll`` says, and return the provider's tokens.
public struct DeviceGrant: Sendable {
    /// What the person is shown: where to go, and the code to enter there.
    public struct Prompt: Sendable, Hashable {
        public var verificationURI: String
        /// The URI with the code in it, when the provider gives one (nothing to type).
        public var verificationURIComplete: String?
        public var userCode: String
    }

    /// The provider's tokens at the end.
    public struct Tokens: Sendable, Hashable {
        public var idToken: String?
        public var accessToken: String?
    }

    let info: SingleSignOnInfo

    public init(_ info: SingleSignOnInfo) { self.info = info }

    /// Runs the grant: `show` is called once with the prompt; `sleep` waits between polls.
    ///
    /// - Throws: ``FleetClientError/badResponse(_:)`` saying what the provider answered (denied,
    ///   expired, an error), or the transport's failure.
    public func run(
        show: (Prompt) -> Void, sleep: (Int) async throws -> Void = { try await Task.sleep(for: .seconds($0)) }, now: () -> Int64
    ) async throws -> Tokens {
        let plain = [info.deviceAuthorizationEndpoint, info.tokenEndpoint].allSatisfy(ServerURL.isLoopbackHTTP)
        return try await withHTTPClient(configuration: .init(allowInsecureHTTP: plain, maxRedirects: 0, userAgent: "fleetset-admin")) {
            http in
            let started = try await Self.form(
                http, info.deviceAuthorizationEndpoint, [("client_id", info.clientID), ("scope", "openid profile email")])
            guard started.status == 200, case .object(let answer) = started.json, case .string(let deviceCode)? = answer["device_code"],
                case .string(let userCode)? = answer["user_code"], case .string(let uri)? = answer["verification_uri"]
            else { throw FleetClientError.badResponse("the identity provider did not start the device sign-in: \(Self.said(started))") }
            func integer(_ name: String) -> Int? {
                if case .number(let number)? = answer[name], let value = number.int64Value { Int(clamping: value) } else { nil }
            }
            var poll = DevicePoll(interval: integer("interval"), expiresIn: integer("expires_in") ?? 600, now: now())
            var complete: String?
            if case .string(let text)? = answer["verification_uri_complete"] { complete = text }
            show(Prompt(verificationURI: uri, verificationURIComplete: complete, userCode: userCode))
            var next = poll.first
            while true {
                switch next {
                case .stop(let reason): throw FleetClientError.badResponse(reason)
                case .done: throw FleetClientError.badResponse("the identity provider gave no tokens")
                case .poll(let seconds):
                    try await sleep(seconds)
                    let polled = try await Self.form(
                        http, info.tokenEndpoint,
                        [
                            ("grant_type", "urn:ietf:params:oauth:grant-type:device_code"), ("device_code", deviceCode),
                            ("client_id", info.clientID),
                        ])
                    if polled.status == 200, case .object(let tokens) = polled.json {
                        var result = Tokens()
                        if case .string(let id)? = tokens["id_token"] { result.idToken = id }
                        if case .string(let access)? = tokens["access_token"] { result.accessToken = access }
                        guard result.idToken != nil || result.accessToken != nil else {
                            throw FleetClientError.badResponse("the identity provider's answer has no token")
                        }
                        return result
                    }
                    next = poll.next(after: Self.answer(polled), now: now())
                }
            }
        }
    }

    /// What a poll's answer means (RFC 8628 §3.5).
    static func answer(_ polled: (status: Int, json: JSONValue?)) -> DevicePoll.Answer {
        guard case .object(let object)? = polled.json, case .string(let code)? = object["error"] else {
            return .failed("HTTP \(polled.status)")
        }
        switch code {
        case "authorization_pending": return .pending
        case "slow_down": return .slowDown
        case "access_denied": return .denied
        case "expired_token": return .expired
        default: return .failed(said(polled))
        }
    }

    static func said(_ answer: (status: Int, json: JSONValue?)) -> String {
        guard case .object(let object)? = answer.json, case .string(let code)? = object["error"] else { return "HTTP \(answer.status)" }
        if case .string(let description)? = object["error_description"] { return "\(code): \(description.prefix(200))" }
        return code
    }

    static func form(_ http: HTTPClient, _ url: String, _ fields: [(String, String)]) async throws -> (status: Int, json: JSONValue?) {
        let body = PercentEncoding.form(fields)
        let answer = try await http.execute(
            HTTPClient.Request(
                method: .post, url: url, headers: ["Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"],
                body: Array(body.utf8)))
        return (answer.status, try? JSONParser.parse(answer.body))
    }
}
