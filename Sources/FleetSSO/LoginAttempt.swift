import ExtrasBase64
import FleetJSON
import FleetProtocol

/// One sign-in through the provider, between the console sending the browser there and the
/// browser coming back: the `state` that names it, the `nonce` the ID token must carry, the
/// PKCE verifier, and where the person was going. Kept by the server (the store, so that the
/// callback may reach another instance), and used once.
public struct LoginAttempt: Sendable, Hashable {
    /// How long a person has to sign in at the provider: 10 minutes.
    public static let lifetime: Int64 = 10 * 60

    public let state: String
    public let nonce: String
    public let pkce: PKCE
    public let startedAt: Int64
    /// The console path to land on after signing in (only ever a `/console/` path).
    public let returnTo: String

    /// A new attempt at `now`, going back to `returnTo` when it is a console path (anything
    /// else, which could send the person to another site, is replaced by `/console`).
    public static func start(now: Int64, returnTo: String?) -> LoginAttempt {
        LoginAttempt(
            state: randomToken(), nonce: randomToken(), pkce: .generate(), startedAt: now, returnTo: consolePath(returnTo) ?? "/console")
    }

    init(state: String, nonce: String, pkce: PKCE, startedAt: Int64, returnTo: String) {
        self.state = state
        self.nonce = nonce
        self.pkce = pkce
        self.startedAt = startedAt
        self.returnTo = returnTo
    }

    /// Whether the attempt may still be finished at `now`.
    public func isCurrent(now: Int64) -> Bool {
        let (age, overflow) = now.subtractingReportingOverflow(startedAt)
        return !overflow && (0..<Self.lifetime).contains(age)
    }

    /// Where to send the browser: the provider's authorization endpoint with the code flow's
    /// parameters (RFC 6749 §4.1.1, OpenID Connect Core §3.1.2.1, RFC 7636 §4.3).
    public func authorizationURL(
        endpoint: String, clientID: String, redirectURI: String, scopes: [String] = ["openid", "profile", "email"]
    )
        -> String
    {
        let parameters = [
            ("response_type", "code"), ("client_id", clientID), ("redirect_uri", redirectURI), ("scope", scopes.joined(separator: " ")),
            ("state", state), ("nonce", nonce), ("code_challenge", pkce.challenge), ("code_challenge_method", "S256"),
        ]
        let query = parameters.map { "\($0.0)=\(PercentEncoding.encoded($0.1))" }.joined(separator: "&")
        return endpoint + (endpoint.contains("?") ? "&" : "?") + query
    }

    /// The text a store keeps.
    public var storedText: String {
        JSONValue.object([
            "state": .string(state), "nonce": .string(nonce), "verifier": .string(pkce.verifier),
            "startedAt": .number(.integer(startedAt)), "returnTo": .string(returnTo),
        ]).serialized()
    }

    /// Reads what ``storedText`` wrote; `nil` for anything else.
    public init?(storedText: String) {
        guard case .object(let object)? = try? JSONParser.parse(Array(storedText.utf8)), case .string(let state)? = object["state"],
            case .string(let nonce)? = object["nonce"], case .string(let verifier)? = object["verifier"],
            let pkce = PKCE(verifier: verifier),
            case .number(let started)? = object["startedAt"], let startedAt = started.int64Value,
            case .string(let returnTo)? = object["returnTo"], Self.consolePath(returnTo) == returnTo
        else { return nil }
        self.init(state: state, nonce: nonce, pkce: pkce, startedAt: startedAt, returnTo: returnTo)
    }

    /// `path` when it is a path of the console (`/console` or below, no `//`, no `\`, no
    /// scheme): never a way to another site.
    static func consolePath(_ path: String?) -> String? {
        guard let path, path == "/console" || path.hasPrefix("/console/"), !path.contains("//"), !path.contains("\\"),
            path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }), path.utf8.count <= 512
        else { return nil }
        return path
    }

    /// 32 random octets, base64url.
    static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Base64.encodeToString(bytes: bytes, options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }
}
