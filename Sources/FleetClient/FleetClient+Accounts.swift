import Curl
import FleetJSON
import FleetProtocol

/// Accounts, API tokens, the caller and the audit trail (`/v1/admin/accounts`, `/tokens`,
/// `/whoami`, `/audit`).
extension FleetClient {
    /// The caller's account and rights.
    public func whoami() async throws -> CallerInfo {
        try decode(try await send(.get, "/v1/admin/whoami", expect: [200]), CallerInfo.init(json:))
    }

    /// Every account.
    public func accounts() async throws -> AccountList {
        try decode(try await send(.get, "/v1/admin/accounts", expect: [200]), AccountList.init(json:))
    }

    /// One account.
    public func account(name: String) async throws -> Account {
        try decode(try await send(.get, "/v1/admin/accounts/\(Self.percentEncoded(name))", expect: [200])) { json throws(DocumentError) in
            try Account(json: json)
        }
    }

    /// Makes an account.
    public func createAccount(_ request: AccountRequest) async throws -> Account {
        try decode(try await send(.post, "/v1/admin/accounts", json: request.json, expect: [201])) { json throws(DocumentError) in
            try Account(json: json)
        }
    }

    /// Changes an account (a merge patch).
    public func updateAccount(name: String, _ change: AccountRequest) async throws -> Account {
        let response = try await send(
            .patch, "/v1/admin/accounts/\(Self.percentEncoded(name))", json: change.json, contentType: "application/merge-patch+json",
            expect: [200])
        return try decode(response) { json throws(DocumentError) in try Account(json: json) }
    }

    /// Removes an account and its API tokens.
    public func removeAccount(name: String) async throws {
        _ = try await send(.delete, "/v1/admin/accounts/\(Self.percentEncoded(name))", expect: [204])
    }

    /// The API tokens the caller may see (its own; an owner's, `account`'s or everyone's).
    public func apiTokens(account: String? = nil) async throws -> APITokenList {
        try decode(try await send(.get, "/v1/admin/tokens" + Self.query(["account": account]), expect: [200]), APITokenList.init(json:))
    }

    /// A new API token: the answer holds the token, once.
    public func createAPIToken(_ request: APITokenRequest) async throws -> CreatedAPIToken {
        try decode(try await send(.post, "/v1/admin/tokens", json: request.json, expect: [201]), CreatedAPIToken.init(json:))
    }

    /// Revokes an API token.
    public func revokeAPIToken(id: String) async throws -> APITokenInfo {
        try decode(try await send(.delete, "/v1/admin/tokens/\(Self.percentEncoded(id))", expect: [200])) { json throws(DocumentError) in
            try APITokenInfo(json: json)
        }
    }

    /// Audit entries, oldest first.
    public func audit(after: Int64? = nil, since: String? = nil, who: String? = nil, action: String? = nil, limit: Int? = nil)
        async throws -> AuditPage
    {
        let query = Self.query([
            "after": after.map { String($0) }, "since": since, "who": who, "action": action, "limit": limit.map { String($0) },
        ])
        return try decode(try await send(.get, "/v1/admin/audit" + query, expect: [200]), AuditPage.init(json:))
    }
}

/// Passwords, second factors and sign-in.
extension FleetClient {
    /// Signs in with a name and password (and code): a personal API token, shown once.
    public func signIn(_ request: SignInRequest) async throws -> CreatedAPIToken {
        try decode(try await send(.post, "/v1/admin/sign-in", json: request.json, expect: [201]), CreatedAPIToken.init(json:))
    }

    /// Sets a person's password (an owner).
    public func setPassword(account: String, to password: String) async throws {
        _ = try await send(
            .put, "/v1/admin/accounts/\(Self.percentEncoded(account))/password", json: PasswordChange(password: password).json,
            expect: [204])
    }

    /// Removes an account's second factor (an owner).
    public func resetTwoFactor(account: String) async throws {
        _ = try await send(.delete, "/v1/admin/accounts/\(Self.percentEncoded(account))/two-factor", expect: [204])
    }

    /// Changes the caller's own password.
    public func changeOwnPassword(_ change: PasswordChange) async throws {
        _ = try await send(.put, "/v1/admin/whoami/password", json: change.json, expect: [204])
    }

    /// Starts setting up the caller's second factor.
    public func startTwoFactor() async throws -> TwoFactorSetup {
        try decode(try await send(.post, "/v1/admin/whoami/two-factor", expect: [201]), TwoFactorSetup.init(json:))
    }

    /// Confirms the caller's second factor with a code: the recovery codes, once.
    public func confirmTwoFactor(code: String) async throws -> RecoveryCodeList {
        try decode(
            try await send(.post, "/v1/admin/whoami/two-factor/confirm", json: TwoFactorCode(code: code).json, expect: [200]),
            RecoveryCodeList.init(json:))
    }
}
