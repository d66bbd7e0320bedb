import FleetJSON

/// What an OpenID Provider says of itself at `<issuer>/.well-known/openid-configuration`
/// (OpenID Connect Discovery 1.0 §3), as far as fleetset uses it.
public struct ProviderMetadata: Sendable, Hashable {
    public var issuer: String
    public var authorizationEndpoint: String
    public var tokenEndpoint: String
    public var jwksURI: String
    public var userinfoEndpoint: String?
    /// RFC 8628's endpoint, when the provider offers the device grant (the CLI's sign-in).
    public var deviceAuthorizationEndpoint: String?
    /// RFC 7662's endpoint, when the provider offers token introspection (how the server
    /// learns which client an access token was issued to).
    public var introspectionEndpoint: String?
    public var codeChallengeMethods: [String]

    /// The discovery document's URL for `issuer` (a trailing `/` is not doubled).
    public static func discoveryURL(issuer: String) -> String {
        (issuer.hasSuffix("/") ? String(issuer.dropLast()) : issuer) + "/.well-known/openid-configuration"
    }

    /// Reads a discovery document fetched for `expectedIssuer`.
    ///
    /// - Throws: ``Invalid`` when a required member is missing, the issuer is not exactly the
    ///   one configured (§4.3: a provider answering for another issuer is refused), an endpoint
    ///   is not `https` (but on `127.0.0.1`/`localhost`, for tests and local providers), or S256
    ///   PKCE is not offered.
    public init(json: JSONValue, expectedIssuer: String) throws(Invalid) {
        guard case .object(let object) = json else { throw Invalid(reason: "the discovery document is not a JSON object") }
        func string(_ name: String) -> String? { if case .string(let value)? = object[name] { value } else { nil } }
        func required(_ name: String) throws(Invalid) -> String {
            guard let value = string(name), !value.isEmpty else { throw Invalid(reason: "the discovery document has no \(name)") }
            return value
        }
        issuer = try required("issuer")
        guard issuer == expectedIssuer else {
            throw Invalid(reason: "the discovery document is for issuer \(issuer), not the configured \(expectedIssuer)")
        }
        authorizationEndpoint = try required("authorization_endpoint")
        tokenEndpoint = try required("token_endpoint")
        jwksURI = try required("jwks_uri")
        userinfoEndpoint = string("userinfo_endpoint")
        deviceAuthorizationEndpoint = string("device_authorization_endpoint")
        introspectionEndpoint = string("introspection_endpoint")
        if case .array(let methods)? = object["code_challenge_methods_supported"] {
            codeChallengeMethods = methods.compactMap { if case .string(let value) = $0 { value } else { nil } }
        } else {
            codeChallengeMethods = []
        }
        // Providers that leave the member out may still take S256 (RFC 8414 makes it optional);
        // one that lists methods without S256 would make PKCE useless.
        guard codeChallengeMethods.isEmpty || codeChallengeMethods.contains("S256") else {
            throw Invalid(reason: "the provider does not offer PKCE with S256 (it lists \(codeChallengeMethods.joined(separator: ", ")))")
        }
        for (name, url) in [
            ("authorization_endpoint", authorizationEndpoint), ("token_endpoint", tokenEndpoint), ("jwks_uri", jwksURI),
        ]
            + [
                userinfoEndpoint.map { ("userinfo_endpoint", $0) },
                deviceAuthorizationEndpoint.map { ("device_authorization_endpoint", $0) },
                introspectionEndpoint.map { ("introspection_endpoint", $0) },
            ]
            .compactMap(\.self)
        where !Self.isAcceptable(url) {
            throw Invalid(reason: "the provider's \(name) \(url) is not https (only 127.0.0.1 and localhost may use http)")
        }
    }

    /// Whether `url` is https to some host, or http to this machine (127.0.0.1, localhost,
    /// [::1]). The host is read from the URL, not matched as a prefix: `http://localhost:@evil/`
    /// names the host `evil`; a URL with user information is refused outright.
    public static func isAcceptable(_ url: String) -> Bool {
        let scheme: String
        if url.hasPrefix("https://") { scheme = "https" } else if url.hasPrefix("http://") { scheme = "http" } else { return false }
        let rest = url.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !authority.isEmpty, !authority.contains("@"), authority.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { return false }
        let host: Substring
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { return false }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            guard after.isEmpty || (after.hasPrefix(":") && after.dropFirst().allSatisfy(\.isNumber)) else { return false }
        } else {
            let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2, !parts[0].isEmpty, parts.count == 1 || parts[1].allSatisfy(\.isNumber) else { return false }
            host = parts[0]
        }
        return scheme == "https" || ["127.0.0.1", "localhost", "[::1]"].contains(String(host).lowercased())
    }

    /// What was wrong with a discovery document.
    public struct Invalid: Error, Sendable, Hashable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }
}
