import Crypto
import FleetJSON
import FleetProtocol

/// A console session as its account keeps it: the session's id, the hash of the secret its
/// cookie carries, the account's generation when it began, and when it ends.
///
/// Sessions live in their account's stored document, on every store: each console request
/// reads the account, so signing out, disabling the account, or changing its role, scope,
/// password or second factor (all of which raise its generation) ends the session on every
/// instance at the next request.
public struct ConsoleSessionRecord: Sendable, Hashable {
    /// The session's id (`cs-…`): what logs and the audit trail name. Not a secret.
    public var id: String
    /// ``Credentials/hash(_:)`` of the cookie's secret.
    public var secretHash: String
    /// The account's generation when the session began; any change of it ends the session.
    public var generation: Int64
    public var startedAt: Int64
    public var expiresAt: Int64
    /// Signed in with a password but still to give the second factor's code: such a session
    /// opens the code page and nothing else, for ``ConsoleSession/codeLifetime``.
    public var awaitsCode: Bool
    /// The address it signed in from.
    public var address: String

    public init(
        id: String, secretHash: String, generation: Int64, startedAt: Int64, expiresAt: Int64, awaitsCode: Bool, address: String
    ) {
        self.id = id
        self.secretHash = secretHash
        self.generation = generation
        self.startedAt = startedAt
        self.expiresAt = expiresAt
        self.awaitsCode = awaitsCode
        self.address = address
    }

    var json: JSONValue {
        [
            "id": .string(id), "secretHash": .string(secretHash), "generation": .number(.integer(generation)),
            "startedAt": .number(.integer(startedAt)), "expiresAt": .number(.integer(expiresAt)), "awaitsCode": .bool(awaitsCode),
            "address": .string(address),
        ]
    }

    init?(json: JSONValue) {
        guard case .object(let object) = json, case .string(let id)? = object["id"], case .string(let secretHash)? = object["secretHash"],
            case .number(let generation)? = object["generation"], let generation = generation.int64Value,
            case .number(let startedAt)? = object["startedAt"], let startedAt = startedAt.int64Value,
            case .number(let expiresAt)? = object["expiresAt"], let expiresAt = expiresAt.int64Value,
            case .bool(let awaitsCode)? = object["awaitsCode"], case .string(let address)? = object["address"]
        else { return nil }
        self.init(
            id: id, secretHash: secretHash, generation: generation, startedAt: startedAt, expiresAt: expiresAt, awaitsCode: awaitsCode,
            address: address)
    }

    /// Whether the session still stands for `account` at `now`.
    func isCurrent(for account: StoredAccount, now: Int64) -> Bool {
        generation == account.generation && now < expiresAt && !account.account.disabled
    }
}

/// A console session a request's cookie carries: which account, which session, and the
/// secret the cookie holds (from which the session's CSRF token is derived).
///
/// The cookie's value is `<id>:<secret>:<account>`; the secret is 256 random bits, and the
/// store keeps only its hash.
public struct ConsoleSession: Sendable, Hashable {
    /// How long a session lasts: 8 hours, a working day.
    public static let lifetime: Int64 = 8 * 3600
    /// How long a password sign-in waits for its second factor's code: 5 minutes.
    public static let codeLifetime: Int64 = 5 * 60
    /// The most signed-in sessions an account keeps; a new one ends the oldest.
    public static let perAccount = 20

    public let id: String
    public let account: String
    let secret: String

    /// Reads a cookie's value; `nil` when it is not one a session could have.
    public init?(cookie: String) {
        let parts = cookie.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].hasPrefix("cs-"), parts[0].utf8.count <= 64, (40...64).contains(parts[1].utf8.count),
            Account.isValidName(String(parts[2]))
        else { return nil }
        self.init(id: String(parts[0]), secret: String(parts[1]), account: String(parts[2]))
    }

    init(id: String, secret: String, account: String) {
        self.id = id
        self.secret = secret
        self.account = account
    }

    /// A new session of the account named `account`, with a fresh id and secret.
    static func make(account: String) -> ConsoleSession {
        var generator = SystemRandomNumberGenerator()
        let secret = Credentials.base64URL((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
        return ConsoleSession(id: Credentials.identifier(prefix: "cs-"), secret: secret, account: account)
    }

    /// The record the account keeps of this session, begun at `now` under its `generation`.
    func record(generation: Int64, now: Int64, awaitsCode: Bool, address: String) -> ConsoleSessionRecord {
        ConsoleSessionRecord(
            id: id, secretHash: Credentials.hash(secret), generation: generation, startedAt: now,
            expiresAt: now + (awaitsCode ? Self.codeLifetime : Self.lifetime), awaitsCode: awaitsCode, address: address)
    }

    /// The cookie's value.
    public var cookie: String { "\(id):\(secret):\(account)" }

    /// The record of this session in `account`, when its secret is the one stored.
    func record(in account: StoredAccount) -> ConsoleSessionRecord? {
        guard account.name == self.account, let record = account.sessions.first(where: { $0.id == id }) else { return nil }
        return Credentials.constantTimeEquals(Credentials.hash(secret), record.secretHash) ? record : nil
    }

    /// The session's CSRF token, which every console form carries: an HMAC of the session's id
    /// under its secret, so only a holder of the cookie can make it.
    public var csrfToken: String {
        let mac = HMAC<SHA256>.authenticationCode(for: Array("csrf|\(id)".utf8), using: SymmetricKey(data: Array(secret.utf8)))
        return Credentials.base64URL(Array(mac))
    }

    /// Whether `token` is this session's CSRF token.
    public func isValidCSRFToken(_ token: String?) -> Bool {
        guard let token else { return false }
        return Credentials.constantTimeEquals(token, csrfToken)
    }
}
