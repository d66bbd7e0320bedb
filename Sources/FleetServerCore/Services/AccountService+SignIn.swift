import FleetJSON
import FleetProtocol
import HTTPTypes
import PosixThreads

/// What sign-in keeps between requests: the password hasher (two hashes at a time) and the
/// failed sign-ins per account.
public final class SignInGuard: Sendable {
    /// Failed sign-ins an account may have at once (10), then one more every 30 s: a guesser
    /// gets 2,880 guesses a day at most per account, whatever addresses it uses (the
    /// per-address limit of every request comes on top).
    public static let failures = RateLimiter<String>.Limit(rate: 1.0 / 30, burst: 10)

    let hasher: PasswordHasher
    /// What new password hashes cost (``PasswordHash/Parameters/current`` unless told).
    let parameters: PasswordHash.Parameters
    private let failed = Locked(RateLimiter<String>(SignInGuard.failures, maximumKeys: 100_000))
    private let origin = ContinuousClock.now

    public init(hasher: PasswordHasher = PasswordHasher(), parameters: PasswordHash.Parameters = .current) {
        self.hasher = hasher
        self.parameters = parameters
    }

    private var now: Duration { origin.duration(to: .now) }

    /// Whether `account` may try to sign in now.
    func isLockedOut(_ account: String) -> Bool { failed.withLock { $0.isExhausted(account, now: now) } }

    /// Counts a failed sign-in of `account`.
    func recordFailure(_ account: String) { _ = failed.withLock { $0.take(account, now: now) } }
}

extension AccountService {
    /// Sets the password of a person's account (an owner setting a first one, or resetting a
    /// forgotten one). Ends its sessions (the generation rises).
    ///
    /// - Throws: 404 `unknown-account`; 400 `weak-password`; 400 for a service account.
    public func setPassword(name: String, to password: String) async throws {
        try PasswordHash.check(password)
        guard try await storedAccount(name).account.kind == .person else {
            throw ServiceError.badRequest("\(name) is a service account: it uses API tokens, never a password")
        }
        let parameters = signIns.parameters
        let hash = try await signIns.hasher.run { Result { try PasswordHash.make(password, parameters: parameters) } }.get()
        try await changeStored(name: name) { stored throws(ServiceError) in
            guard stored.account.kind == .person else {
                throw ServiceError.badRequest("\(name) is a service account: it uses API tokens, never a password")
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
            guard await verify(change.current ?? "", against: hash, account: caller.name) else {
                throw ServiceError(401, .unauthenticated, "the current password is not right")
            }
        }
        try await setPassword(name: caller.name, to: change.password)
    }

    /// Starts setting up the caller's second factor: a new TOTP secret, to confirm with a code
    /// (``confirmTwoFactor(code:by:)``). A second factor set up already stays until then.
    public func startTwoFactor(by caller: Caller) async throws -> TwoFactorSetup {
        let totp = TOTP.generate()
        try await changeStored(name: caller.name) { stored throws(ServiceError) in
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
        try await changeStored(name: caller.name) { stored throws(ServiceError) in
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
        let refused = ServiceError(401, .unauthenticated, "the name or the password is not right")
        guard !signIns.isLockedOut(name) else {
            throw ServiceError(429, .rateLimited, "too many failed sign-ins of \(name); retry in a minute", retryAfterSeconds: 30)
        }
        let stored = try await store.account(name: name)
        guard let stored, let hash = stored.password else {
            // The same work as a real check, so that the time does not tell which names exist.
            _ = await signIns.hasher.run { PasswordHash.decoy.verifies(password) }
            signIns.recordFailure(name)
            throw refused
        }
        guard await verify(password, against: hash, account: name), !stored.account.disabled else { throw refused }
        guard let twoFactor = stored.twoFactor, twoFactor.confirmed else { return stored.account }
        guard let code, !code.isEmpty else {
            throw ServiceError(401, .twoFactorRequired, "enter the code from your authenticator app, or a recovery code")
        }
        let time = now
        let accepted = try await writes.run {
            try await store.changeAccount(name: name) { current, _ in
                var changed = current
                guard var factor = current.twoFactor, factor.confirmed else { return current }
                if let step = factor.totp.matchingStep(code, at: time, after: factor.lastStep) {
                    factor.lastStep = step
                } else if let index = factor.recoveryHashes.firstIndex(of: RecoveryCodes.hash(code)) {
                    factor.recoveryHashes.remove(at: index)
                } else {
                    return current
                }
                changed.twoFactor = factor
                return changed
            }
        }
        guard let accepted, accepted != stored else {
            signIns.recordFailure(name)
            throw ServiceError(401, .unauthenticated, "that code is not right (or was used already)")
        }
        return accepted.account
    }

    /// Whether `password` is `hash`'s, off the concurrency pool; a failure counts against the account.
    private func verify(_ password: String, against hash: PasswordHash, account: String) async -> Bool {
        let right = await signIns.hasher.run { hash.verifies(password) }
        if !right { signIns.recordFailure(account) }
        return right
    }

    private func storedAccount(_ name: String) async throws -> StoredAccount {
        guard let stored = try await store.account(name: name) else { throw Self.unknownAccount(name) }
        return stored
    }

    /// Changes the stored account named `name` with `change`, raising its generation.
    private func changeStored(name: String, _ change: @escaping @Sendable (inout StoredAccount) throws(ServiceError) -> Void) async throws {
        let time = now
        let changed = try await writes.run {
            try await store.changeAccount(name: name) { stored, _ in
                var changed = stored
                try change(&changed)
                changed.account.updatedAt = time
                changed.generation += 1
                return changed
            }
        }
        guard changed != nil else { throw Self.unknownAccount(name) }
    }
}

extension PasswordHash {
    /// A hash no password matches (of 32 random bytes), verified against for a name without a
    /// password so that a refusal takes as long either way.
    static let decoy: PasswordHash = {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return (try? PasswordHash.make(Credentials.base64URL(random))) ?? PasswordHash(
            text: "scrypt$N=2,r=1,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")!
    }()
}
