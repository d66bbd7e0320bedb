import FleetJSON

/// `PUT /v1/admin/accounts/{name}/password` (`current` absent: an owner sets it) and
/// `PUT /v1/admin/whoami/password` (`current`: the password now, when there is one).
public struct PasswordChange: Sendable, Hashable {
    public var current: String?
    /// 12 to 256 characters.
    public var password: String

    public init(current: String? = nil, password: String) {
        self.current = current
        self.password = password
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["current", "password"])
        current = try reader.optionalString("current", maximumLength: 256)
        password = try reader.string("password", maximumLength: 1024)
    }

    public var json: JSONValue {
        var object: JSONObject = ["password": .string(password)]
        if let current { object["current"] = .string(current) }
        return .object(object)
    }
}

/// The answer to `POST /v1/admin/whoami/two-factor`: the new TOTP secret (base32) and its
/// `otpauth://` URI, for the authenticator app.
public struct TwoFactorSetup: Sendable, Hashable {
    public var secret: String
    public var uri: String

    public init(secret: String, uri: String) {
        self.secret = secret
        self.uri = uri
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["secret", "uri"])
        secret = try reader.string("secret", maximumLength: 128)
        uri = try reader.string("uri", maximumLength: 512)
    }

    public var json: JSONValue { ["secret": .string(secret), "uri": .string(uri)] }
}

/// `POST /v1/admin/whoami/two-factor/confirm`: a code from the authenticator.
public struct TwoFactorCode: Sendable, Hashable {
    public var code: String

    public init(code: String) { self.code = code }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["code"])
        code = try reader.string("code", maximumLength: 32)
    }

    public var json: JSONValue { ["code": .string(code)] }
}

/// The answer to confirming a second factor: ten one-time recovery codes, shown once.
public struct RecoveryCodeList: Sendable, Hashable {
    public var codes: [String]

    public init(codes: [String]) { self.codes = codes }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["codes"])
        codes = try reader.names("codes", maximumCount: 64, maximumLength: 32) ?? []
    }

    public var json: JSONValue { ["codes": .array(codes.map(JSONValue.string))] }
}

/// `POST /v1/admin/sign-in`: a person's name, password and (with a second factor) code, for a
/// personal API token (`fleetset admin login`).
public struct SignInRequest: Sendable, Hashable {
    public var name: String
    public var password: String
    /// The authenticator's code, or a recovery code.
    public var code: String?
    /// The token's name (default `login`).
    public var tokenName: String
    /// Seconds until the token expires (default 30 days, at most 400).
    public var expiresIn: Int64

    /// How long a login's token lives when the request does not say: 30 days.
    public static let defaultLifetime: Int64 = 30 * 86_400

    public init(
        name: String, password: String, code: String? = nil, tokenName: String = "login", expiresIn: Int64 = SignInRequest.defaultLifetime
    ) {
        self.name = name
        self.password = password
        self.code = code
        self.tokenName = tokenName
        self.expiresIn = expiresIn
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["name", "password", "code", "tokenName", "expiresIn"])
        name = try reader.string("name", maximumLength: 64)
        password = try reader.string("password", maximumLength: 1024)
        code = try reader.optionalString("code", maximumLength: 32)
        (tokenName, expiresIn) = try Self.token(reader)
    }

    /// The login token's name and lifetime a sign-in asks for (`tokenName`, `expiresIn`).
    static func token(_ reader: ObjectReader) throws(DocumentError) -> (name: String, expiresIn: Int64) {
        let name = try reader.optionalString("tokenName", maximumLength: 64) ?? "login"
        guard APITokenInfo.isValidName(name) else {
            throw DocumentError(at: JSONPointer.root.appending("tokenName"), "must be 1 to 64 characters without control characters")
        }
        return (name, try reader.integer("expiresIn", in: 60...APITokenRequest.longestLifetime, default: Self.defaultLifetime))
    }

    public var json: JSONValue {
        var object: JSONObject = [
            "name": .string(name), "password": .string(password), "tokenName": .string(tokenName),
            "expiresIn": .number(.integer(expiresIn)),
        ]
        if let code { object["code"] = .string(code) }
        return .object(object)
    }
}

/// `GET /v1/admin/sso`: how the CLI signs in through the organization's OpenID Provider with
/// the device grant (RFC 8628): the provider, the CLI's client there, and the endpoints it
/// asks. No credential needed; 404 when the server has no single sign-on, or none for the CLI.
public struct SingleSignOnInfo: Sendable, Hashable {
    public var issuer: String
    public var clientID: String
    public var deviceAuthorizationEndpoint: String
    public var tokenEndpoint: String

    public init(issuer: String, clientID: String, deviceAuthorizationEndpoint: String, tokenEndpoint: String) {
        self.issuer = issuer
        self.clientID = clientID
        self.deviceAuthorizationEndpoint = deviceAuthorizationEndpoint
        self.tokenEndpoint = tokenEndpoint
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["issuer", "clientID", "deviceAuthorizationEndpoint", "tokenEndpoint"])
        issuer = try reader.string("issuer", maximumLength: 2048)
        clientID = try reader.string("clientID", maximumLength: 256)
        deviceAuthorizationEndpoint = try reader.string("deviceAuthorizationEndpoint", maximumLength: 2048)
        tokenEndpoint = try reader.string("tokenEndpoint", maximumLength: 2048)
    }

    public var json: JSONValue {
        [
            "issuer": .string(issuer), "clientID": .string(clientID), "deviceAuthorizationEndpoint": .string(deviceAuthorizationEndpoint),
            "tokenEndpoint": .string(tokenEndpoint),
        ]
    }
}

/// `POST /v1/admin/sign-in/sso`: what the provider gave the CLI at the end of the device grant
/// (its ID token when it gave one, its access token otherwise), for a personal API token as
/// `POST /v1/admin/sign-in` answers. Each is taken once.
public struct SingleSignOnSignIn: Sendable, Hashable {
    public var idToken: String?
    public var accessToken: String?
    /// The token's name (default `login`).
    public var tokenName: String
    /// Seconds until the token expires (default 30 days, at most 400).
    public var expiresIn: Int64

    public init(idToken: String?, accessToken: String?, tokenName: String = "login", expiresIn: Int64 = SignInRequest.defaultLifetime) {
        self.idToken = idToken
        self.accessToken = accessToken
        self.tokenName = tokenName
        self.expiresIn = expiresIn
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["idToken", "accessToken", "tokenName", "expiresIn"])
        idToken = try reader.optionalString("idToken", maximumLength: 16_384)
        accessToken = try reader.optionalString("accessToken", maximumLength: 16_384)
        guard idToken != nil || accessToken != nil else { throw DocumentError(at: .root, "needs an idToken or an accessToken") }
        (tokenName, expiresIn) = try SignInRequest.token(reader)
    }

    public var json: JSONValue {
        var object: JSONObject = ["tokenName": .string(tokenName), "expiresIn": .number(.integer(expiresIn))]
        if let idToken { object["idToken"] = .string(idToken) }
        if let accessToken { object["accessToken"] = .string(accessToken) }
        return .object(object)
    }
}
