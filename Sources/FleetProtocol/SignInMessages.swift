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
        tokenName = try reader.optionalString("tokenName", maximumLength: 64) ?? "login"
        guard APITokenInfo.isValidName(tokenName) else {
            throw DocumentError(at: JSONPointer.root.appending("tokenName"), "must be 1 to 64 characters without control characters")
        }
        expiresIn = try reader.integer("expiresIn", in: 60...APITokenRequest.longestLifetime, default: Self.defaultLifetime)
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
