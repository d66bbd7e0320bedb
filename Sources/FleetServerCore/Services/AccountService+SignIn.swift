import FleetJSON
import FleetProtocol
import HTTPTypes
import PosixThreads

/// What sign-in keeps between requests: the password hasher (two hashes at a time), the
/// sign-in attempts per account, and a decoy hash to verify against for names without a password.
///
/// Kept in memory on each instance: with several instances on one database, each has its own
/// budget per account (documented).
public final class SignInGuard: Sendable {
    /// Password checks an account may have at once (10), then one more every 30 s; a check that
    /// succeeds is given back. A guesser gets 2,880 guesses a day at most per account and
    /// instance, whatever addresses it uses (the per-address failure limit comes on top).
    public static let failures = RateLimiter<String>.Limit(rate: 1.0 / 30, burst: 10)

    let hasher: PasswordHasher
    /// What new password hashes cost (``PasswordHash/Parameters/current`` unless told).
    let parameters: PasswordHash.Parameters
    private let attempts = Locked(RateLimiter<String>(SignInGuard.failures, maximumKeys: 100_000))
    private let origin = ContinuousClock.now
    private let decoyHash = Locked<PasswordHash?>(nil)

    public init(hasher: PasswordHasher = PasswordHasher(), parameters: PasswordHash.Parameters = .current) {
        self.hasher = hasher
        self.parameters = parameters
    }

    private var now: Duration { origin.duration(to: .now) }

    /// Takes one password check of `account`'s budget, before the hash.
    ///
    /// - Throws: 429 `rate-limited` when it is spent.
    func admit(_ account: String) throws(ServiceError) {
        let now = now
        if let wait = attempts.withLock({ $0.take(account, now: now) }) {
            throw ServiceError.rateLimited("sign-ins of \(account)", retryAfter: wait)
        }
    }

    /// Gives back the check of a password that was right.
    func refund(_ account: String) {
        let now = now
        attempts.withLock { $0.refund(account, now: now) }
    }

    /// A hash at this server's cost that no password matches: what a name without a password is
    /// checked against, so that its refusal takes as long as a wrong password's.
    func decoy() async -> PasswordHash? {
        if let made = decoyHash.withLock({ $0 }) { return made }
        let parameters = parameters
        let made = try? await hasher.run {
            var generator = SystemRandomNumberGenerator()
            let random = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            return try? PasswordHash.make(Credentials.base64URL(random), parameters: parameters)
        }
        decoyHash.withLock { $0 = $0 ?? made ?? nil }
        return made ?? nil
    }
}

extension AccountService {
    /// Sets the password of a person's account (an owner setting a first one, or resetting a
    /// forgotten one). Ends its sessions (the generation rises).
    ///
    /// - Throws: 404 `unknown-account`; 400 `weak-password`; 400 for a service account.
    public func setPassword(name: String, to password: String, keeping caller: Caller? = nil) async throws {
        let hash = try await hashPassword(password, for: try await storedAccount(name).account)
        // Sign-in tokens stay valid: an owner resetting a compromised account revokes them too
        // (`tokens list --account`, `tokens revoke`), as the docs say.
        try await changeStored(name: name, keeping: caller) { stored throws(ServiceError) in
            guard stored.account.kind == .person else { throw Self.notAPerson(name) }
            // A password would let the person in past the provider: its second factor, and being
            // removed there.
            guard stored.singleSignOn == nil else {
                throw ServiceError.badRequest("\(name) signs in through the identity provider; it has no password here")
            }
            stored.password = hash
        }
    }

    /// Changes the caller's own password; `current` must be its password now (when it has one).
    ///
    /// - Throws: 401 `unauthenticated` for a wrong current password (counted as a failed
    ///   sign-in of the account); 400 `weak-password`.
    public func changeOwnPassword(_ change: PasswordChange, by caller: Caller) async throws {
        try PasswordHash.check(change.password)
        let stored = try await storedAccount(caller.name)
        if let hash = stored.password {
            // The same budget as sign-in: a stolen API token cannot guess the password faster.
            try signIns.admit(caller.name)
            guard try await verify(change.current ?? "", against: hash) else {
                throw ServiceError(401, .unauthenticated, "the current password is not right")
            }
            signIns.refund(caller.name)
        }
        try await setPassword(name: caller.name, to: change.password, keeping: caller)
    }

    /// Starts setting up the caller's second factor: a new TOTP secret, to confirm with a code
    /// (``confirmTwoFactor(code:by:)``). A second factor set up already stays until then.
    public func startTwoFactor(by caller: Caller) async throws -> TwoFactorSetup {
        let totp = TOTP.generate()
        try await changeStored(name: caller.name, keeping: caller) { stored throws(ServiceError) in
            guard stored.account.kind == .person else { throw ServiceError.badRequest("a service account does not sign in") }
            if stored.twoFactor?.confirmed == true {
                throw ServiceError(
                    409, .twoFactorRequired,
                    "\(caller.name) has a second factor; an owner resets it (users reset-two-factor) to set up another")
            }
            stored.twoFactor = StoredAccount.TwoFactor(totp: totp)
        }
        return TwoFactorSetup(secret: totp.base32, uri: totp.uri(account: caller.name))
    }

    /// Confirms the second factor being set up with a code from the authenticator: from then on
    /// sign-in takes a code. Returns ten recovery codes, shown once.
    ///
    /// - Throws: 409 when none is being set up; 400 `bad-request` for a wrong code.
    public func confirmTwoFactor(code: String, by caller: Caller) async throws -> RecoveryCodeList {
        let codes = RecoveryCodes.generate()
        let time = now
        try await changeStored(name: caller.name, keeping: caller) { stored throws(ServiceError) in
            guard var pending = stored.twoFactor, !pending.confirmed else {
                throw ServiceError(409, .twoFactorRequired, "no second factor is being set up; start with POST /v1/admin/whoami/two-factor")
            }
            guard let step = pending.totp.matchingStep(code, at: time, after: nil) else {
                throw ServiceError.badRequest("that is not the authenticator's current code")
            }
            pending.confirmed = true
            pending.lastStep = step
            pending.recoveryHashes = codes.map(RecoveryCodes.hash)
            stored.twoFactor = pending
        }
        return RecoveryCodeList(codes: codes)
    }

    /// Removes an account's second factor (its authenticator and recovery codes are lost): it
    /// signs in with its password alone until it sets up another.
    public func resetTwoFactor(name: String) async throws {
        try await changeStored(name: name) { stored throws(ServiceError) in stored.twoFactor = nil }
    }

    /// Signs in with a name, a password and (when the account has a second factor) a code from
    /// its authenticator or a recovery code.
    ///
    /// - Throws: 401 `unauthenticated` for an unknown name, a wrong password, a wrong code or a
    ///   disabled account (one message for each of them but the code: nothing tells whether a
    ///   name exists); 401 `two-factor-required` when the password is right and a code is
    ///   needed; 429 `rate-limited` when the account had too many failed sign-ins
    ///   (``SignInGuard/failures``).
    public func signIn(name: String, password: String, code: String?) async throws -> Account {
        let stored = try await checkPassword(name: name, password: password)
        guard stored.twoFactor?.confirmed == true else {
            signIns.refund(name)
            return stored.account
        }
        guard let code, !code.isEmpty else {
            signIns.refund(name)
            throw ServiceError(401, .twoFactorRequired, "enter the code from your authenticator app, or a recovery code")
        }
        let accepted = try await spendCode(name: name, code: code)
        signIns.refund(name)
        return accepted.account
    }

    /// Checks a name and password after taking one check of the account's budget (which the
    /// caller gives back when the sign-in succeeds).
    ///
    /// - Throws: 401 `unauthenticated` for an unknown name, a wrong password or a disabled
    ///   account, after the same work for each; 429 when the account's budget is spent.
    func checkPassword(name: String, password: String) async throws -> StoredAccount {
        let refused = ServiceError(401, .unauthenticated, "the name or the password is not right")
        // Taken before the hash, so that requests sent together cannot all get past the budget.
        try signIns.admit(name)
        let stored = try await store.account(name: name)
        guard let stored, let hash = stored.password else {
            // The same work as a real check, so that the time does not tell which names exist.
            if let decoy = await signIns.decoy() { _ = try await verify(password, against: decoy) }
            throw refused
        }
        guard try await verify(password, against: hash), !stored.account.disabled else { throw refused }
        return stored
    }

    /// Checks a code of `name`'s second factor (from the authenticator, or a recovery code) and
    /// spends it, with `change` to the account, in one write: two sign-ins with one code cannot
    /// both pass.
    ///
    /// - Throws: 401 `unauthenticated` for a wrong or used code; what `change` throws (nothing is written then).
    func spendCode(
        name: String, code: String, also change: @escaping @Sendable (inout StoredAccount) throws(ServiceError) -> Void = { _ in }
    ) async throws -> StoredAccount {
        let time = now
        let wrongCode = ServiceError(401, .unauthenticated, "that code is not right (or was used already)")
        let accepted = try await writes.run {
            try await store.changeAccount(name: name) { current, _ in
                guard var factor = current.twoFactor, factor.confirmed, !current.account.disabled else { throw wrongCode }
                if let step = factor.totp.matchingStep(code, at: time, after: factor.lastStep) {
                    factor.lastStep = step
                } else if let index = factor.recoveryHashes.firstIndex(of: RecoveryCodes.hash(code)) {
                    factor.recoveryHashes.remove(at: index)
                } else {
                    throw wrongCode
                }
                var changed = current
                changed.twoFactor = factor
                try change(&changed)
                return changed
            }
        }
        guard let accepted else { throw ServiceError(401, .unauthenticated, "the name or the password is not right") }
        return accepted
    }

    /// `password` hashed at this server's cost for `account`, off the concurrency pool.
    ///
    /// - Throws: 400 for a service account; 400 `weak-password`; 503 `overloaded`.
    func hashPassword(_ password: String, for account: Account) async throws -> PasswordHash {
        guard account.kind == .person else { throw Self.notAPerson(account.name) }
        try PasswordHash.check(password)
        let parameters = signIns.parameters
        return try await signIns.hasher.run { Result { try PasswordHash.make(password, parameters: parameters) } }.get()
    }

    static func notAPerson(_ name: String) -> ServiceError {
        ServiceError.badRequest("\(name) is a service account: it uses API tokens, never a password")
    }

    /// Whether `password` is `hash`'s, off the concurrency pool.
    ///
    /// - Throws: 503 `overloaded` when too many checks wait already.
    private func verify(_ password: String, against hash: PasswordHash) async throws -> Bool {
        try await signIns.hasher.run { hash.verifies(password) }
    }

    private func storedAccount(_ name: String) async throws -> StoredAccount {
        guard let stored = try await store.account(name: name) else { throw Self.unknownAccount(name) }
        return stored
    }

    /// Changes the stored account named `name` with `change`, raising its generation: its
    /// console sessions end, but for the one `keeping` names (a caller changing its own
    /// password or second factor in the console stays signed in there, and only there).
    private func changeStored(
        name: String, keeping caller: Caller? = nil, _ change: @escaping @Sendable (inout StoredAccount) throws(ServiceError) -> Void
    ) async throws {
        let time = now
        var kept: String?
        if let caller, caller.name == name, case .consoleSession(let id) = caller.credential { kept = id }
        let keptSession = kept
        let changed = try await writes.run {
            try await store.changeAccount(name: name) { stored, _ in
                var changed = stored
                try change(&changed)
                changed.account.updatedAt = time
                changed.generation += 1
                changed.sessions = changed.sessions.filter { $0.id == keptSession && $0.isCurrent(for: stored, now: time) }
                for index in changed.sessions.indices { changed.sessions[index].generation = changed.generation }
                return changed
            }
        }
        guard changed != nil else { throw Self.unknownAccount(name) }
    }
}
