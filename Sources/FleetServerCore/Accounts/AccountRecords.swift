import FleetJSON
import FleetProtocol

/// An account as the stores keep it: what the API shows, and what only the server reads (its
/// password's hash, its second factor).
///
/// Every store keeps it as one text column (``storedText``), so that what sign-in needs adds
/// members, not migrations.
public struct StoredAccount: Sendable, Hashable {
    public var account: Account
    /// Raised by every change of the role, the scope, `disabled`, the password or the second
    /// factor (what a server-side session of the account compares, to end when the account changed).
    public var generation: Int64
    /// The password's hash, when it has one.
    public var password: PasswordHash? {
        didSet { account.hasPassword = password != nil }
    }
    /// Its second factor, when one was set up.
    public var twoFactor: TwoFactor? {
        didSet { account.hasTwoFactor = twoFactor?.confirmed == true }
    }
    /// Its console sessions, oldest first (at most ``ConsoleSession/perAccount``).
    public var sessions: [ConsoleSessionRecord]
    /// The person at the identity provider it stands for, when it signs in with single sign-on.
    public var singleSignOn: SingleSignOnBinding?

    /// The identity an account signing in through an OpenID Provider is bound to: the provider's
    /// issuer and the person's subject there (never a name or an email, which can change hands),
    /// and whether its groups granted nothing at its last sign-in (what disabled it then, and
    /// what a sign-in whose groups grant a role again undoes).
    public struct SingleSignOnBinding: Sendable, Hashable {
        public var issuer: String
        public var subject: String
        public var disabledByMapping: Bool

        public init(issuer: String, subject: String, disabledByMapping: Bool = false) {
            self.issuer = issuer
            self.subject = subject
            self.disabledByMapping = disabledByMapping
        }

        var json: JSONValue {
            .object(["issuer": .string(issuer), "subject": .string(subject), "disabledByMapping": .bool(disabledByMapping)])
        }

        init?(json: JSONValue) {
            guard case .object(let object) = json, case .string(let issuer)? = object["issuer"],
                case .string(let subject)? = object["subject"], case .bool(let disabled)? = object["disabledByMapping"]
            else { return nil }
            self.init(issuer: issuer, subject: subject, disabledByMapping: disabled)
        }
    }

    /// A second factor: the TOTP secret, whether it was confirmed with a code, the last step
    /// used (a code is good once), and the recovery codes' hashes not used yet.
    public struct TwoFactor: Sendable, Hashable {
        public var totp: TOTP
        public var confirmed: Bool
        public var lastStep: Int64?
        public var recoveryHashes: [String]

        public init(totp: TOTP, confirmed: Bool = false, lastStep: Int64? = nil, recoveryHashes: [String] = []) {
            self.totp = totp
            self.confirmed = confirmed
            self.lastStep = lastStep
            self.recoveryHashes = recoveryHashes
        }

        var json: JSONValue {
            var object: JSONObject = [
                "secret": .string(totp.base32), "confirmed": .bool(confirmed),
                "recovery": .array(recoveryHashes.map(JSONValue.string)),
            ]
            if let lastStep { object["lastStep"] = .number(.integer(lastStep)) }
            return .object(object)
        }

        init?(json: JSONValue) {
            guard case .object(let object) = json, case .string(let secret)? = object["secret"], let totp = TOTP(base32: secret),
                case .bool(let confirmed)? = object["confirmed"], case .array(let recovery)? = object["recovery"]
            else { return nil }
            self.totp = totp
            self.confirmed = confirmed
            recoveryHashes = recovery.compactMap { if case .string(let hash) = $0 { hash } else { nil } }
            if case .number(let number)? = object["lastStep"] { lastStep = number.int64Value } else { lastStep = nil }
        }
    }

    public init(
        account: Account, generation: Int64 = 1, password: PasswordHash? = nil, twoFactor: TwoFactor? = nil,
        sessions: [ConsoleSessionRecord] = [], singleSignOn: SingleSignOnBinding? = nil
    ) {
        self.account = account
        self.generation = generation
        self.password = password
        self.twoFactor = twoFactor
        self.sessions = sessions
        self.singleSignOn = singleSignOn
        self.account.hasPassword = password != nil
        self.account.hasTwoFactor = twoFactor?.confirmed == true
    }

    public var name: String { account.name }

    /// The text a store keeps.
    public var storedText: String {
        guard case .object(var object) = account.json else { return "" }
        object["generation"] = .number(.integer(generation))
        object["hasPassword"] = nil
        object["hasTwoFactor"] = nil
        if let password { object["password"] = .string(password.text) }
        if let twoFactor { object["twoFactor"] = twoFactor.json }
        if !sessions.isEmpty { object["sessions"] = .array(sessions.map(\.json)) }
        if let singleSignOn { object["singleSignOn"] = singleSignOn.json }
        return JSONValue.object(object).serialized()
    }

    /// Reads what ``storedText`` wrote.
    ///
    /// - Throws: ``StoreCorruption`` naming the account.
    public init(storedText: String) throws {
        guard case .object(var object)? = try? JSONParser.parse(Array(storedText.utf8)),
            case .number(let number)? = object["generation"], let generation = number.int64Value
        else { throw StoreCorruption(what: "a stored account") }
        var password: PasswordHash?
        if case .string(let text)? = object["password"] {
            guard let hash = PasswordHash(text: text) else { throw StoreCorruption(what: "a stored account's password") }
            password = hash
        }
        var twoFactor: TwoFactor?
        if let stored = object["twoFactor"] {
            guard let read = TwoFactor(json: stored) else { throw StoreCorruption(what: "a stored account's second factor") }
            twoFactor = read
        }
        var sessions: [ConsoleSessionRecord] = []
        if let stored = object["sessions"] {
            guard case .array(let items) = stored else { throw StoreCorruption(what: "a stored account's sessions") }
            for item in items {
                guard let session = ConsoleSessionRecord(json: item) else { throw StoreCorruption(what: "a stored account's session") }
                sessions.append(session)
            }
        }
        var singleSignOn: SingleSignOnBinding?
        if let stored = object["singleSignOn"] {
            guard let binding = SingleSignOnBinding(json: stored) else {
                throw StoreCorruption(what: "a stored account's single sign-on")
            }
            singleSignOn = binding
        }
        for key in ["generation", "password", "twoFactor", "sessions", "singleSignOn"] { object[key] = nil }
        guard let account = try? Account(json: .object(object)) else { throw StoreCorruption(what: "a stored account") }
        self.init(
            account: account, generation: generation, password: password, twoFactor: twoFactor, sessions: sessions,
            singleSignOn: singleSignOn)
    }
}

/// An API token as the stores keep it: its listing and the SHA-256 of the token.
public struct StoredAPIToken: Sendable, Hashable {
    public var info: APITokenInfo
    /// ``Credentials/hash(_:)`` of the token.
    public var hash: String

    public init(info: APITokenInfo, hash: String) {
        self.info = info
        self.hash = hash
    }

    public var id: String { info.id }

    /// The text a store keeps (without the hash, which has its own indexed column).
    public var storedText: String { info.json.serialized() }

    /// Reads what ``storedText`` wrote.
    public init(storedText: String, hash: String) throws {
        guard let json = try? JSONParser.parse(Array(storedText.utf8)), let info = try? APITokenInfo(json: json) else {
            throw StoreCorruption(what: "a stored API token")
        }
        self.info = info
        self.hash = hash
    }
}

/// One stored entry of the audit trail: the text its hash covers, as stored, and the hash.
/// The stores keep `sequence`, `at`, `actor` and `action` in columns besides (indexed, to
/// filter by), which ``AuditChain`` checks against the text.
public struct AuditRecord: Sendable, Hashable {
    public var sequence: Int64
    public var at: Int64
    public var actor: String
    public var action: String
    /// The entry's wire form without its hash, serialized: what ``hash`` covers.
    public var text: String
    public var hash: String

    public init(sequence: Int64, at: Int64, actor: String, action: String, text: String, hash: String) {
        self.sequence = sequence
        self.at = at
        self.actor = actor
        self.action = action
        self.text = text
        self.hash = hash
    }

    /// The record of `entry` (whose ``AuditEntry/hash`` is ignored): its text and its hash.
    public init(_ entry: AuditEntry) {
        var unhashed = entry
        unhashed.hash = ""
        let text = unhashed.json.serialized()
        self.init(
            sequence: entry.sequence, at: entry.at, actor: entry.actor, action: entry.action, text: text,
            hash: AuditChain.hash(previous: entry.previousHash, text: text))
    }

    /// The entry the text holds, with the stored hash.
    public func entry() throws -> AuditEntry {
        guard let json = try? JSONParser.parse(Array(text.utf8)), var entry = try? AuditEntry(json: json) else {
            throw StoreCorruption(what: "audit entry \(sequence)")
        }
        entry.hash = hash
        return entry
    }
}

/// Which audit entries to read, oldest first.
public struct AuditQuery: Sendable, Hashable {
    /// Entries numbered above this.
    public var after: Int64
    /// At or after this time.
    public var since: Int64?
    /// By this account.
    public var actor: String?
    /// This action.
    public var action: String?
    /// At most this many.
    public var limit: Int

    public init(after: Int64 = 0, since: Int64? = nil, actor: String? = nil, action: String? = nil, limit: Int = 1000) {
        self.after = after
        self.since = since
        self.actor = actor
        self.action = action
        self.limit = limit
    }
}

/// What an action's audit entry says before it is numbered and chained.
public struct AuditDraft: Sendable, Hashable {
    public var actor: String
    public var credential: String
    public var address: String
    public var action: String
    public var target: String
    public var status: Int
    public var outcome: String
    public var detail: String

    public init(
        actor: String, credential: String, address: String, action: String, target: String, status: Int, outcome: String,
        detail: String = ""
    ) {
        self.actor = actor
        self.credential = credential
        self.address = address
        self.action = action
        self.target = target
        self.status = status
        self.outcome = outcome
        self.detail = detail
    }

    /// The entry it makes after `previous` (`nil`: the first), at `time`.
    public func entry(after previous: AuditRecord?, at time: Int64) -> AuditRecord {
        AuditRecord(
            AuditEntry(
                sequence: (previous?.sequence ?? 0) + 1, at: time, actor: Self.cut(actor, 64), credential: Self.cut(credential, 128),
                address: Self.cut(address, 64), action: Self.cut(action, 128), target: Self.cut(target, 1024), status: status,
                outcome: Self.cut(outcome, 64), detail: Self.cut(Credentials.redacted(detail), 2048),
                previousHash: previous?.hash ?? AuditChain.origin, hash: "")
        )
    }

    /// At most `length` characters of `text` (what ``AuditEntry`` reads back).
    private static func cut(_ text: String, _ length: Int) -> String {
        text.unicodeScalars.count <= length ? text : String(String.UnicodeScalarView(text.unicodeScalars.prefix(length)))
    }
}
