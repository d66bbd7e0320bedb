import FleetJSON
import FleetProtocol
import HTTPTypes
import Logging

extension AccountService {
    /// Makes the bootstrap owner (``Authenticator/bootstrapOwner``, whom the admin token file
    /// acts as) when the store has no account: a fleet upgraded from a release without accounts
    /// keeps working with its admin token. Returns whether it made it.
    @discardableResult
    public func bootstrap() async throws -> Bool {
        guard try await store.accounts().isEmpty else { return false }
        let made = try await store.addAccount(StoredAccount(account: Self.bootstrapAccount(at: now)))
        if made {
            logger.notice(
                "bootstrap owner made", metadata: ["event": "account-bootstrap", "account": "\(Authenticator.bootstrapOwner)"])
        }
        return made
    }

    /// Makes the bootstrap owner an enabled owner of everything again, making it when missing
    /// (`fleetset-server accounts restore-owner`, run on the server machine when no owner can
    /// sign in). Returns the account.
    public func restoreOwner() async throws -> Account {
        let time = now
        let restored = try await store.changeAccount(name: Authenticator.bootstrapOwner) { stored, _ in
            var owner = stored
            owner.account.role = .owner
            owner.account.scope = .everything
            owner.account.disabled = false
            owner.account.updatedAt = time
            owner.generation += 1
            return owner
        }
        if let restored { return restored.account }
        let account = Self.bootstrapAccount(at: time)
        _ = try await store.addAccount(StoredAccount(account: account))
        return account
    }

    private static func bootstrapAccount(at time: Int64) -> Account {
        Account(
            name: Authenticator.bootstrapOwner, displayName: "Owner (the admin token file)", kind: .person, role: .owner,
            createdAt: time, updatedAt: time)
    }

    /// `GET /v1/admin/whoami`.
    public func describe(_ caller: Caller) -> CallerInfo {
        CallerInfo(account: caller.account, rights: caller.role.rights.sorted(), credential: caller.credential.description)
    }

    // MARK: - Accounts

    /// Every account.
    public func accounts() async throws -> AccountList {
        AccountList(accounts: try await store.accounts().map(\.account))
    }

    /// Whether an account is named `name`.
    public func exists(_ name: String) async throws -> Bool {
        Account.isValidName(name) ? try await store.account(name: name) != nil : false
    }

    /// The account named `name`.
    ///
    /// - Throws: 404 `unknown-account`.
    public func account(name: String) async throws -> Account {
        guard let stored = try await store.account(name: name) else { throw Self.unknownAccount(name) }
        return stored.account
    }

    /// Makes an account; with `password` (a person's first), made with its hash in the same write.
    ///
    /// - Throws: 400 `bad-request` for a request without a name or a role, or with a scope its
    ///   role cannot have, or a password for a service account; 400 `weak-password`; 409 `account-exists`.
    public func createAccount(_ request: AccountRequest, password: String? = nil) async throws -> Account {
        guard let name = request.name, let role = request.role else {
            throw ServiceError.badRequest("an account needs a \"name\" and a \"role\"")
        }
        let time = now
        let account = Account(
            name: name, displayName: request.displayName ?? name, kind: request.kind ?? .person, role: role,
            scope: request.scope ?? .everything, disabled: request.disabled ?? false, createdAt: time, updatedAt: time)
        try Self.check(account)
        var hash: PasswordHash?
        if let password { hash = try await hashPassword(password, for: account) }
        guard try await store.addAccount(StoredAccount(account: account, password: hash)) else {
            throw ServiceError(409, .accountExists, "an account named \(name) exists")
        }
        return account
    }

    /// Changes an account: its display name, role, scope, or disabled. A change of the role, the
    /// scope or disabled ends the account's console sessions on every instance.
    ///
    /// - Throws: 404 `unknown-account`; 400 `bad-request` for a `name` or `kind` (they cannot
    ///   change) or a scope its role cannot have; 409 `last-owner` when no enabled owner would remain.
    public func updateAccount(name: String, _ request: AccountRequest) async throws -> Account {
        guard request.name == nil || request.name == name, request.kind == nil else {
            throw ServiceError.badRequest("an account's name and kind cannot change; make a new account")
        }
        let time = now
        let changed = try await writes.run {
            try await store.changeAccount(name: name) { stored, all in
                var changed = stored
                if let displayName = request.displayName { changed.account.displayName = displayName }
                if let role = request.role {
                    changed.account.role = role
                    // An account that becomes an owner, admin or auditor sees everything.
                    if !role.isScoped && request.scope == nil { changed.account.scope = .everything }
                }
                if let scope = request.scope { changed.account.scope = scope }
                if let disabled = request.disabled {
                    changed.account.disabled = disabled
                    // An owner's word stands: a later sign-in through the identity provider
                    // does not undo it (only a disabling by the groups' mapping is undone so).
                    changed.singleSignOn?.disabledByMapping = false
                }
                try Self.check(changed.account)
                guard changed != stored else { return stored }
                changed.account.updatedAt = time
                if (changed.account.role, changed.account.scope, changed.account.disabled)
                    != (stored.account.role, stored.account.scope, stored.account.disabled)
                {
                    // Its console sessions end, on every instance at their next request.
                    changed.generation += 1
                    changed.sessions = []
                }
                try Self.keepAnOwner(all.map { $0.name == name ? changed : $0 })
                return changed
            }
        }
        guard let changed else { throw Self.unknownAccount(name) }
        return changed.account
    }

    /// Removes an account and its API tokens. What it did stays in the history and the audit trail under its name.
    ///
    /// - Throws: 404 `unknown-account`; 409 `last-owner`.
    public func removeAccount(name: String) async throws {
        let removed = try await writes.run {
            try await store.removeAccount(name: name) { _, all in try Self.keepAnOwner(all.filter { $0.name != name }) }
        }
        guard removed else { throw Self.unknownAccount(name) }
    }

    /// Checks an account's scope against its role.
    static func check(_ account: Account) throws(ServiceError) {
        guard Account.isValidName(account.name) else {
            throw ServiceError.badRequest("an account's name is 1 to 64 of a-z, 0-9, '.', '_' and '-'")
        }
        guard account.displayName.unicodeScalars.count <= Account.displayNameLength else {
            throw ServiceError.badRequest("an account's display name is at most \(Account.displayNameLength) characters")
        }
        if !account.role.isScoped && !account.scope.isEverything {
            throw ServiceError.badRequest("an account of role \(account.role.rawValue) sees the whole fleet; give no scope")
        }
        if account.role == .editor && account.scope.apps.isEmpty {
            throw ServiceError.badRequest("an editor is scoped to apps; name them in scope.apps")
        }
    }

    /// Refuses a change after which no enabled owner would remain.
    static func keepAnOwner(_ accounts: [StoredAccount]) throws(ServiceError) {
        guard accounts.contains(where: { $0.account.role == .owner && !$0.account.disabled }) else {
            throw ServiceError(409, .lastOwner, "this would leave no enabled owner; make another owner first")
        }
    }

    static func unknownAccount(_ name: String) -> ServiceError {
        ServiceError(404, .unknownAccount, "no account is named \(name)")
    }

    // MARK: - API tokens

    /// A new API token for the caller, or (with ``AdminRight/manageAccounts``) for the account
    /// the request names: shown once, kept as its hash. Made with an API token, it expires no
    /// later than that token.
    ///
    /// - Throws: 403 `needs-manage-accounts` for another account's token without the right;
    ///   404 `unknown-account`.
    public func createToken(_ request: APITokenRequest, by caller: Caller) async throws -> CreatedAPIToken {
        let account = request.account ?? caller.name
        if account != caller.name { try caller.require(.manageAccounts) }
        let token = Credentials.generate(.api)
        let time = now
        var expiresAt = time + request.expiresIn
        if case .apiToken(let id) = caller.credential,
            let creating = try await store.apiTokens(account: caller.name).first(where: { $0.id == id })
        {
            // A token cannot outlive the one that made it: a leaked short-lived token does not
            // become lasting access.
            expiresAt = min(expiresAt, creating.info.expiresAt)
        }
        let info = APITokenInfo(
            id: Credentials.identifier(prefix: "at-"), name: request.name, account: account, createdAt: time, expiresAt: expiresAt)
        guard try await store.addAPIToken(StoredAPIToken(info: info, hash: Credentials.hash(token))) else {
            throw Self.unknownAccount(account)
        }
        return CreatedAPIToken(info: info, token: token)
    }

    /// How long a token is still listed after it expired: 30 days (to see what needs making again).
    public static let expiredTokensListed: Int64 = 30 * 86_400

    /// The API tokens the caller may see: its own, or with ``AdminRight/manageAccounts`` every
    /// account's (or `account`'s); those that expired more than ``expiredTokensListed`` ago are left out.
    public func tokens(account: String?, by caller: Caller) async throws -> APITokenList {
        let whose = caller.has(.manageAccounts) ? account : caller.name
        if let account, account != caller.name { try caller.require(.manageAccounts) }
        let time = now
        return APITokenList(
            tokens: try await store.apiTokens(account: whose).map(\.info).filter { $0.expiresAt + Self.expiredTokensListed > time })
    }

    /// Revokes an API token of the caller's (or, with ``AdminRight/manageAccounts``, anyone's).
    ///
    /// - Throws: 404 `unknown-token`, also for another account's token without the right.
    public func revokeToken(id: String, by caller: Caller) async throws -> APITokenInfo {
        let manages = caller.has(.manageAccounts)
        let revoked = try await store.changeAPIToken(id: id) { stored throws(ServiceError) in
            guard manages || stored.info.account == caller.name else { throw Self.unknownToken(id) }
            var revoked = stored
            revoked.info.revoked = true
            return revoked
        }
        guard let revoked else { throw Self.unknownToken(id) }
        return revoked.info
    }

    static func unknownToken(_ id: String) -> ServiceError {
        ServiceError(404, .unknownAPIToken, "no API token of yours has id \(id)")
    }
}
