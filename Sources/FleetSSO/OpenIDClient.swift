import ExtrasBase64
import FleetJSON
import FleetProtocol

/// One answer of an OpenID Provider over HTTP.
public struct ProviderAnswer: Sendable {
    public var status: Int
    public var body: [UInt8]

    public init(status: Int, body: [UInt8]) {
        self.status = status
        self.body = body
    }
}

/// How the server asks its OpenID Provider (libcurl in the server; anything in tests).
public protocol ProviderTransport: Sendable {
    /// `GET url`, with `bearer` as the `Authorization: Bearer` token when given.
    func get(_ url: String, bearer: String?) async throws -> ProviderAnswer
    /// `POST url` of a form (`application/x-www-form-urlencoded`), with HTTP basic
    /// authentication as `client` when given (RFC 6749 §2.3.1).
    func postForm(_ url: String, form: [(String, String)], client: ClientCredentials?) async throws -> ProviderAnswer
}

/// A confidential client's id and secret at the provider.
public struct ClientCredentials: Sendable, Hashable {
    public var id: String
    public var secret: String

    public init(id: String, secret: String) {
        self.id = id
        self.secret = secret
    }

    /// The `Authorization: Basic` value of RFC 6749 §2.3.1 (both parts form-encoded first).
    public var basicAuthorization: String {
        let pair = "\(PercentEncoding.encoded(id)):\(PercentEncoding.encoded(secret))"
        return "Basic " + Base64.encodeToString(bytes: Array(pair.utf8))
    }
}

/// Who signed in at the provider: its issuer and subject (what names a person for good),
/// the groups that map to a role, and what names them for people.
public struct SignedInPerson: Sendable, Hashable {
    public var issuer: String
    public var subject: String
    public var groups: [String]
    public var preferredUsername: String?
    public var name: String?
    public var email: String?
    /// Until when the token that vouched for the person is good (its `exp`), in seconds since
    /// the epoch: how long a server must remember it was used.
    public var tokenExpires: Int64

    public init(
        issuer: String, subject: String, groups: [String], preferredUsername: String? = nil, name: String? = nil, email: String? = nil,
        tokenExpires: Int64
    ) {
        self.issuer = issuer
        self.subject = subject
        self.groups = groups
        self.preferredUsername = preferredUsername
        self.name = name
        self.email = email
        self.tokenExpires = tokenExpires
    }

    init(_ claims: IDTokenClaims) {
        self.init(
            issuer: claims.issuer, subject: claims.subject, groups: claims.groups, preferredUsername: claims.preferredUsername,
            name: claims.name, email: claims.email, tokenExpires: claims.expires)
    }
}

/// The server's side of OpenID Connect with one provider: its discovery document and keys
/// (read once, the keys again when a token names one not seen yet, at most once a minute
/// unless configured otherwise),
/// the authorization code flow's exchange, and the check of what the CLI brings from the
/// device grant.
public actor OpenIDClient {
    /// How the server signs in its people.
    public struct Configuration: Sendable {
        /// The issuer URL, exactly as the provider names itself.
        public var issuer: String
        /// The console's client (confidential: id and secret).
        public var console: ClientCredentials
        /// The CLI's client (public, the device grant), when the CLI may sign in.
        public var cliClientID: String?
        /// The claim that lists a person's groups.
        public var groupsClaim: String
        /// When the provider joins groups into one string, its separator.
        public var groupsSeparator: String?
        /// The keys are read again for a token naming a key not seen yet at most this often, in
        /// seconds (a stream of forged tokens does not become a stream of requests to the provider).
        public var keysRefreshInterval: Int64

        public init(
            issuer: String, console: ClientCredentials, cliClientID: String? = nil, groupsClaim: String = "groups",
            groupsSeparator: String? = nil, keysRefreshInterval: Int64 = 60
        ) {
            self.keysRefreshInterval = keysRefreshInterval
            self.issuer = issuer
            self.console = console
            self.cliClientID = cliClientID
            self.groupsClaim = groupsClaim
            self.groupsSeparator = groupsSeparator
        }
    }

    /// Why a sign-in through the provider failed: what the log and the audit trail say
    /// (never a token).
    public struct Failure: Error, Sendable, Hashable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }

        public init(_ reason: String) { self.reason = reason }
    }

    /// How long the discovery document and the keys are kept before they are read again.
    public static let metadataLifetime: Int64 = 3600
    public nonisolated let configuration: Configuration
    private let transport: any ProviderTransport
    private var metadata: (value: ProviderMetadata, readAt: Int64)?
    private var keys: (value: ProviderKeys, readAt: Int64)?

    public init(_ configuration: Configuration, transport: any ProviderTransport) {
        self.configuration = configuration
        self.transport = transport
    }

    /// The provider's discovery document, read when not read within ``metadataLifetime``.
    public func providerMetadata(now: Int64) async throws(Failure) -> ProviderMetadata {
        if let metadata, now - metadata.readAt < Self.metadataLifetime { return metadata.value }
        let json = try await json(
            "the discovery document",
            try await ask { try await $0.get(ProviderMetadata.discoveryURL(issuer: configuration.issuer), bearer: nil) })
        do {
            let read = try ProviderMetadata(json: json, expectedIssuer: configuration.issuer)
            metadata = (read, now)
            return read
        } catch {
            throw Failure(error.reason)
        }
    }

    /// Where to send a browser for `attempt`.
    public func authorizationURL(for attempt: LoginAttempt, redirectURI: String, now: Int64) async throws(Failure) -> String {
        attempt.authorizationURL(
            endpoint: try await providerMetadata(now: now).authorizationEndpoint, clientID: configuration.console.id,
            redirectURI: redirectURI)
    }

    /// Finishes the console's sign-in: the code exchanged (with the PKCE verifier, as the
    /// console's client), the ID token checked against `attempt`'s nonce.
    public func finish(code: String, attempt: LoginAttempt, redirectURI: String, now: Int64) async throws(Failure) -> SignedInPerson {
        let metadata = try await providerMetadata(now: now)
        let answer = try await ask {
            try await $0.postForm(
                metadata.tokenEndpoint,
                form: [
                    ("grant_type", "authorization_code"), ("code", code), ("redirect_uri", redirectURI),
                    ("code_verifier", attempt.pkce.verifier),
                ], client: configuration.console)
        }
        let tokens = try await json("the token endpoint", answer)
        guard case .object(let object) = tokens, case .string(let idToken)? = object["id_token"] else {
            throw Failure("the token endpoint's answer has no id_token (is the openid scope allowed for \(configuration.console.id)?)")
        }
        let check = IDTokenCheck(
            issuer: configuration.issuer, clientID: configuration.console.id, groupsClaim: configuration.groupsClaim,
            groupsSeparator: configuration.groupsSeparator)
        return SignedInPerson(try await verify(idToken, with: check, nonce: attempt.nonce, now: now))
    }

    /// Checks what the CLI brings from the device grant: an ID token issued to the CLI's
    /// client when the provider gave one; else its access token, which must be active and
    /// issued to the CLI's client (RFC 7662 introspection, asked as the console's client),
    /// and whose holder the provider's userinfo names. A token of another application at
    /// the same provider is refused.
    public func person(idToken: String?, accessToken: String?, now: Int64) async throws(Failure) -> SignedInPerson {
        guard let cliClientID = configuration.cliClientID else {
            throw Failure("this server takes no sign-in from the CLI (serve --oidc-cli-client-id)")
        }
        if let idToken {
            let check = IDTokenCheck(
                issuer: configuration.issuer, clientID: cliClientID, groupsClaim: configuration.groupsClaim,
                groupsSeparator: configuration.groupsSeparator)
            return SignedInPerson(try await verify(idToken, with: check, nonce: nil, now: now))
        }
        guard let accessToken else { throw Failure("neither an ID token nor an access token was sent") }
        let metadata = try await providerMetadata(now: now)
        guard let introspection = metadata.introspectionEndpoint, let userinfo = metadata.userinfoEndpoint else {
            throw Failure(
                "the provider gave the CLI no ID token and offers no token introspection and userinfo: the server cannot tell whom the token is for"
            )
        }
        let introspected = try await json(
            "token introspection",
            try await ask { try await $0.postForm(introspection, form: [("token", accessToken)], client: configuration.console) })
        guard case .object(let facts) = introspected, facts["active"] == .bool(true) else {
            throw Failure("the provider says the access token is not active")
        }
        guard facts["client_id"] == .string(cliClientID) else {
            throw Failure("the access token was issued to another client, not the CLI's (\(cliClientID))")
        }
        // Without an exp, remembered as used for a day (a provider's access tokens live minutes to hours).
        var expires = now + 86_400
        if case .number(let expiry)? = facts["exp"], let stated = expiry.int64Value {
            guard stated > now else { throw Failure("the access token expired") }
            expires = min(stated, now + 400 * 86_400)
        }
        let claims = try await json("userinfo", try await ask { try await $0.get(userinfo, bearer: accessToken) })
        guard case .object(var members) = claims else { throw Failure("the provider's userinfo is not a JSON object") }
        // Userinfo is not signed: the issuer is the configured one, asked over its own endpoint.
        members["iss"] = .string(configuration.issuer)
        guard case .string(let subject)? = members["sub"], !subject.isEmpty else { throw Failure("the provider's userinfo has no sub") }
        if case .string(let named)? = facts["sub"], named != subject { throw Failure("userinfo and introspection name different subjects") }
        let groups = IDTokenClaims.groups(in: .object(members), claim: configuration.groupsClaim, separator: configuration.groupsSeparator)
        func string(_ name: String) -> String? { if case .string(let value)? = members[name] { value } else { nil } }
        return SignedInPerson(
            issuer: configuration.issuer, subject: subject, groups: groups, preferredUsername: string("preferred_username"),
            name: string("name"), email: string("email"), tokenExpires: expires)
    }

    /// The token's claims with the keys known, or (when it names a key not seen yet and the
    /// keys were not read within ``Configuration/keysRefreshInterval``) with the keys read again: how a key
    /// rotation at the provider is taken.
    private func verify(_ token: String, with check: IDTokenCheck, nonce: String?, now: Int64) async throws(Failure) -> IDTokenClaims {
        var known = try await currentKeys(now: now, refresh: false)
        if let kid = IDTokenCheck.keyID(of: token), !known.ids.contains(kid), let readAt = keys?.readAt,
            now - readAt >= configuration.keysRefreshInterval
        {
            known = try await currentKeys(now: now, refresh: true)
        }
        do {
            return try await check.claims(of: token, keys: known, nonce: nonce, now: now)
        } catch {
            throw Failure(error.reason)
        }
    }

    /// The keys read before, unless `refresh` or they are older than ``metadataLifetime`` (a key
    /// the provider withdrew is not trusted for longer than that).
    private func currentKeys(now: Int64, refresh: Bool) async throws(Failure) -> ProviderKeys {
        if let keys, !refresh, now - keys.readAt < Self.metadataLifetime { return keys.value }
        let metadata = try await providerMetadata(now: now)
        let answer = try await ask { try await $0.get(metadata.jwksURI, bearer: nil) }
        guard answer.status == 200 else { throw Failure("the provider's JWKS answered HTTP \(answer.status)") }
        do {
            let read = try await ProviderKeys(jwks: String(decoding: answer.body, as: UTF8.self))
            keys = (read, now)
            return read
        } catch {
            throw Failure(error.reason)
        }
    }

    private func ask(_ request: (any ProviderTransport) async throws -> ProviderAnswer) async throws(Failure) -> ProviderAnswer {
        do {
            return try await request(transport)
        } catch {
            throw Failure("the identity provider could not be reached: \(error)")
        }
    }

    /// The JSON of a successful answer; an OAuth error answer's `error` and description otherwise.
    private func json(_ what: String, _ answer: ProviderAnswer) async throws(Failure) -> JSONValue {
        let parsed = try? JSONParser.parse(answer.body)
        guard answer.status == 200, let parsed else {
            if case .object(let object)? = parsed, case .string(let code)? = object["error"] {
                var said = code
                if case .string(let description)? = object["error_description"] { said += ": \(description)" }
                throw Failure("\(what) answered HTTP \(answer.status), \(said.prefix(300))")
            }
            throw Failure("\(what) answered HTTP \(answer.status) without JSON")
        }
        return parsed
    }
}
