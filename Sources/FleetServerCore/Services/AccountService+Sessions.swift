import FleetProtocol
import HTTPTypes

/// The console's sessions: started by a sign-in, kept in the account's stored document
/// (``ConsoleSessionRecord``), and checked against the account at every request.
extension AccountService {
    /// Signs in to the console with a name and password: a new session, which awaits the
    /// second factor's code when the account has one (``finishConsoleSignIn(_:code:)``).
    ///
    /// The session is added only if the account is still as the password was checked against
    /// (its generation unchanged): a password reset or a second factor turned on while the hash
    /// ran refuses the sign-in. With a second factor, the password's check of the account's
    /// budget is given back only when the code is right too.
    ///
    /// - Throws: as ``signIn(name:password:code:)`` does for a wrong name or password.
    public func startConsoleSignIn(name: String, password: String, address: String) async throws -> (
        session: ConsoleSession, awaitsCode: Bool
    ) {
        let stored = try await checkPassword(name: name, password: password)
        let awaitsCode = stored.twoFactor?.confirmed == true
        let session = try await addConsoleSession(
            name: name, awaitsCode: awaitsCode, address: address, generation: stored.generation)
        if !awaitsCode { signIns.refund(name) }
        return (session, awaitsCode)
    }

    /// A console session of the bootstrap owner, whose admin token file the console took.
    ///
    /// - Throws: 401 when that account is disabled or no longer an owner.
    public func startOwnerConsoleSession(address: String) async throws -> ConsoleSession {
        if try await store.account(name: Authenticator.bootstrapOwner) == nil { try await bootstrap() }
        guard let stored = try await store.account(name: Authenticator.bootstrapOwner), !stored.account.disabled,
            stored.account.role == .owner
        else {
            throw ServiceError(
                401, .unauthenticated,
                "the admin token file acts as account \(Authenticator.bootstrapOwner), which is disabled or no longer an owner")
        }
        return try await addConsoleSession(
            name: Authenticator.bootstrapOwner, awaitsCode: false, address: address, generation: stored.generation)
    }

    /// Finishes a sign-in that awaits its code: the code (from the authenticator, or a recovery
    /// code) is checked and spent, and the waiting session replaced by a new one (a new id and
    /// secret: a cookie planted before the code is worth nothing after it), in one write.
    /// Returns the new session.
    ///
    /// - Throws: 401 `unauthenticated` for a wrong or used code, or a session that is no longer
    ///   waiting; 429 `rate-limited` past the account's budget (a wrong code counts as a wrong password).
    public func finishConsoleSignIn(_ session: ConsoleSession, code: String) async throws -> (caller: Caller, session: ConsoleSession) {
        try signIns.admit(session.account)
        let time = now
        let fresh = ConsoleSession.make(account: session.account)
        let accepted = try await spendCode(name: session.account, code: code) { account throws(ServiceError) in
            guard let record = session.record(in: account), record.awaitsCode, record.isCurrent(for: account, now: time),
                let index = account.sessions.firstIndex(of: record)
            else { throw ServiceError(401, .unauthenticated, "this sign-in has ended; sign in again") }
            account.sessions[index] = fresh.record(
                generation: account.generation, now: time, awaitsCode: false, address: record.address)
        }
        // Both checks given back: the code's and the password's before it.
        signIns.refund(session.account)
        signIns.refund(session.account)
        return (Caller(account: accepted.account, credential: .consoleSession(id: fresh.id)), fresh)
    }

    /// The caller a console request's session stands for: `nil` when the session is unknown,
    /// ended, expired, still awaits its code, or its account changed since it began.
    public func consoleCaller(_ session: ConsoleSession) async throws -> Caller? {
        guard let (account, record) = try await current(session), !record.awaitsCode else { return nil }
        return Caller(account: account, credential: .consoleSession(id: session.id))
    }

    /// Whether `session` is a sign-in waiting for its code (the code page's check).
    public func awaitsCode(_ session: ConsoleSession) async throws -> Bool {
        try await current(session)?.record.awaitsCode == true
    }

    /// The account of `session` and the session's record, when the session stands at this time.
    private func current(_ session: ConsoleSession) async throws -> (account: Account, record: ConsoleSessionRecord)? {
        guard let stored = try await store.account(name: session.account), let record = session.record(in: stored),
            record.isCurrent(for: stored, now: now)
        else { return nil }
        return (stored.account, record)
    }

    /// Ends `session` (signing out): its cookie is refused from now on, on every instance.
    public func endConsoleSession(_ session: ConsoleSession) async throws {
        _ = try await writes.run {
            try await store.changeAccount(name: session.account) { stored, _ in
                var changed = stored
                changed.sessions.removeAll { $0.id == session.id }
                return changed
            }
        }
    }

    /// How many sign-ins may wait for their code at once per account: a password alone cannot
    /// push an account's signed-in sessions out.
    static let waitingSessions = 3

    /// Adds a new session to the account named `name`, if it is still at `generation` and
    /// enabled, dropping its ended sessions and, past the limits, its oldest waiting one or its
    /// oldest signed-in one (a waiting one never pushes out a signed-in one). The generation
    /// stays: other sessions go on.
    ///
    /// - Throws: 401 `unauthenticated` when the account changed since its password was checked.
    func addConsoleSession(name: String, awaitsCode: Bool, address: String, generation: Int64) async throws -> ConsoleSession {
        let time = now
        let session = ConsoleSession.make(account: name)
        let changed = try await writes.run {
            try await store.changeAccount(name: name) { stored, _ in
                guard stored.generation == generation, !stored.account.disabled else {
                    throw ServiceError(401, .unauthenticated, "the account changed while signing in; sign in again")
                }
                var changed = stored
                let record = session.record(generation: stored.generation, now: time, awaitsCode: awaitsCode, address: address)
                var waiting = stored.sessions.filter { $0.isCurrent(for: stored, now: time) && $0.awaitsCode }
                var signedIn = stored.sessions.filter { $0.isCurrent(for: stored, now: time) && !$0.awaitsCode }
                if awaitsCode {
                    waiting = Array((waiting + [record]).suffix(Self.waitingSessions))
                } else {
                    signedIn = Array((signedIn + [record]).suffix(ConsoleSession.perAccount))
                }
                changed.sessions = (signedIn + waiting).sorted { $0.startedAt < $1.startedAt }
                return changed
            }
        }
        guard changed != nil else { throw Self.unknownAccount(name) }
        return session
    }
}
