import FleetProtocol
import HTTPTypes

/// Who an OpenID Provider said signed in, as the accounts need it: the issuer and subject
/// that bind an account for good, and what may name the account when it is made.
public struct SingleSignOnIdentity: Sendable, Hashable {
    public var issuer: String
    public var subject: String
    /// The provider's `preferred_username`: the account's name when it is a valid one.
    public var preferredUsername: String?
    public var email: String?
    public var displayName: String?

    public init(issuer: String, subject: String, preferredUsername: String? = nil, email: String? = nil, displayName: String? = nil) {
        self.issuer = issuer
        self.subject = subject
        self.preferredUsername = preferredUsername
        self.email = email
        self.displayName = displayName.flatMap(Self.cleaned)
    }

    /// A provider's `name` as a display name: without control characters, at most
    /// ``Account/displayNameLength`` characters; `nil` when nothing is left.
    static func cleaned(_ name: String) -> String? {
        let text = name.printablePrefix(Account.displayNameLength)[...].trimmingSpaces()
        return text.isEmpty ? nil : String(text)
    }

    /// The name a new account gets: `preferred_username` when it is a valid account name
    /// (lowercased), else the part of it before an `@` (Entra ID's is the user principal name,
    /// `alice@contoso.com`), else the email's, else `sso-` and 12 hex digits of the issuer and
    /// subject's hash.
    public var accountName: String {
        func localPart(_ address: String?) -> String? { address?.split(separator: "@").first.map(String.init) }
        for candidate in [preferredUsername, localPart(preferredUsername), localPart(email)] {
            if let name = candidate?.lowercased(), Account.isValidName(name) { return name }
        }
        return "sso-" + Credentials.hash("\(issuer)\n\(subject)").prefix(12)
    }
}

/// What a person's groups at the provider grant here: a role and its scope.
public struct SingleSignOnGrant: Sendable, Hashable {
    public var role: Role
    public var scope: AccountScope

    public init(role: Role, scope: AccountScope) {
        self.role = role
        self.scope = scope
    }
}

extension AccountService {
    /// Signs in a person the OpenID Provider vouched for, in one write: the account bound to
    /// its issuer and subject gets the role and scope its groups grant now (its console
    /// sessions end when they change); a person seen the first time gets an account (just in
    /// time). Returns the account.
    ///
    /// An account is only ever found by its binding, never by a name or an email: an account
    /// of the same name that is not bound to this person (a local one, or another subject's)
    /// is never taken over.
    ///
    /// - Throws: 401 `unauthenticated` when the groups grant nothing (a bound account is
    ///   disabled then, and its sessions end; it comes back when its groups grant a role
    ///   again), when an owner disabled the account, or when the name is taken; 409
    ///   `last-owner` when the change would leave no enabled owner.
    public func signIn(_ identity: SingleSignOnIdentity, grant: SingleSignOnGrant?) async throws -> StoredAccount {
        let time = now
        let outcome = try await writes.run {
            try await store.writeAccount { all throws(ServiceError) in try Self.decide(identity, grant: grant, among: all, at: time) }
        }
        if let refusal = outcome.refusal { throw refusal }
        guard let account = outcome.account else { throw ServiceError(401, .unauthenticated, "single sign-on found no account") }
        return account
    }

    /// A console session for an account single sign-on just signed in (no code step: the
    /// provider asked for what it asks for).
    public func startSingleSignOnConsoleSession(_ stored: StoredAccount, address: String) async throws -> ConsoleSession {
        try await addConsoleSession(name: stored.name, awaitsCode: false, address: address, generation: stored.generation)
    }

    /// What a single sign-on does to the accounts: the account to write (`nil`: none) and the
    /// refusal to answer after writing it (`nil`: signed in).
    static func decide(_ identity: SingleSignOnIdentity, grant: SingleSignOnGrant?, among all: [StoredAccount], at time: Int64)
        throws(ServiceError) -> (account: StoredAccount?, refusal: ServiceError?)
    {
        let grantsNothing = ServiceError(
            401, .unauthenticated, "your groups at the identity provider grant no role on this server; ask its owners")
        guard
            let bound = all.first(where: { $0.singleSignOn?.issuer == identity.issuer && $0.singleSignOn?.subject == identity.subject })
        else {
            guard let grant else { return (nil, grantsNothing) }
            let name = identity.accountName
            if all.contains(where: { $0.name == name }) {
                return (
                    nil,
                    ServiceError(
                        401, .unauthenticated,
                        "an account named \(name) exists and is not bound to this identity; an owner renames or removes it first")
                )
            }
            let account = Account(
                name: name, displayName: identity.displayName ?? name, kind: .person, role: grant.role, scope: grant.scope,
                createdAt: time, updatedAt: time)
            try check(account)
            return (
                StoredAccount(
                    account: account, singleSignOn: StoredAccount.SingleSignOnBinding(issuer: identity.issuer, subject: identity.subject)),
                nil
            )
        }
        var changed = bound
        guard let grant else {
            guard !bound.account.disabled else { return (nil, grantsNothing) }
            changed.account.disabled = true
            changed.singleSignOn?.disabledByMapping = true
            changed.account.updatedAt = time
            changed.generation += 1
            changed.sessions = []
            // The last owner is never disabled this way (owners restore one with accounts restore-owner).
            let others = all.map { $0.name == bound.name ? changed : $0 }
            if (try? keepAnOwner(others)) == nil { return (nil, grantsNothing) }
            return (changed, grantsNothing)
        }
        if bound.account.disabled && bound.singleSignOn?.disabledByMapping != true {
            return (nil, ServiceError(401, .unauthenticated, "the account \(bound.name) is disabled by an owner"))
        }
        changed.account.role = grant.role
        changed.account.scope = grant.scope
        changed.account.disabled = false
        changed.singleSignOn?.disabledByMapping = false
        if let displayName = identity.displayName { changed.account.displayName = displayName }
        guard changed != bound else { return (bound, nil) }
        try check(changed.account)
        try keepAnOwner(all.map { $0.name == bound.name ? changed : $0 })
        changed.account.updatedAt = time
        if (changed.account.role, changed.account.scope, changed.account.disabled)
            != (bound.account.role, bound.account.scope, bound.account.disabled)
        {
            changed.generation += 1
            changed.sessions = []
        }
        return (changed, nil)
    }
}
