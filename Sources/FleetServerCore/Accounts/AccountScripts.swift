import FleetProtocol

/// The write transactions of accounts, API tokens and the audit trail, over the primitives of
/// ``StoreTransaction``, once for every store.
extension SettingsStore {
    /// Inserts `account`; false when one with its name exists.
    public func addAccount(_ account: StoredAccount) async throws -> Bool {
        try await write { try await $0.insertAccount(account) }
    }

    /// Changes the account named `name` with `change`, which sees every account (to keep an
    /// enabled owner) and returns the new one; `nil` when there is no such account.
    public func changeAccount(
        name: String, _ change: @escaping @Sendable (StoredAccount, _ all: [StoredAccount]) throws -> StoredAccount
    ) async throws -> StoredAccount? {
        try await write { transaction in
            let all = try await transaction.accounts()
            guard let stored = all.first(where: { $0.name == name }) else { return nil }
            let changed = try change(stored, all)
            try await transaction.updateAccount(changed)
            return changed
        }
    }

    /// Removes the account named `name` and its tokens after `check`, which sees every account;
    /// false when there is no such account.
    public func removeAccount(name: String, check: @escaping @Sendable (StoredAccount, _ all: [StoredAccount]) throws -> Void)
        async throws -> Bool
    {
        try await write { transaction in
            let all = try await transaction.accounts()
            guard let stored = all.first(where: { $0.name == name }) else { return false }
            try check(stored, all)
            return try await transaction.removeAccount(name: name)
        }
    }

    /// Inserts an API token for an account that exists; false, inserting nothing, when it does not.
    public func addAPIToken(_ token: StoredAPIToken) async throws -> Bool {
        try await write { transaction in
            guard try await transaction.account(name: token.info.account) != nil else { return false }
            try await transaction.insertAPIToken(token)
            return true
        }
    }

    /// Changes the API token with `id` with `change` (which may throw to refuse); `nil` when there is none.
    public func changeAPIToken(id: String, _ change: @escaping @Sendable (StoredAPIToken) throws -> StoredAPIToken) async throws
        -> StoredAPIToken?
    {
        try await write { transaction in
            guard let stored = try await transaction.apiToken(id: id) else { return nil }
            let changed = try change(stored)
            try await transaction.updateAPIToken(changed)
            return changed
        }
    }

    /// Appends `draft` to the audit trail at `time`, numbered and chained after the newest
    /// entry, and tells the subscribers of the audit stream (`audit.entry`) in the same write.
    public func appendAudit(_ draft: AuditDraft, at time: Int64) async throws -> AuditRecord {
        try await write { transaction in
            let record = draft.entry(after: try await transaction.lastAuditRecord(), at: time)
            try await transaction.insertAuditRecord(record)
            try await transaction.enqueue([.audit(record)])
            return record
        }
    }

    /// Keeps `value` under `key` until `expiresAt`, for one ``takeOneTimeValue(key:now:)``
    /// (a single sign-on's attempt; a token accepted once); false when `key` is kept already.
    public func addOneTimeValue(key: String, value: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        try await write { try await $0.insertOneTimeValue(key: key, value: value, expiresAt: expiresAt, now: now) }
    }

    /// Removes the value kept under `key` and returns it, unless it expired at `now`: of
    /// requests taking the same key at once, on any instance, one gets it.
    public func takeOneTimeValue(key: String, now: Int64) async throws -> String? {
        try await write { try await $0.takeOneTimeValue(key: key, now: now) }
    }
}

extension SettingsStore {
    /// Writes the account `decide` returns, seeing every account: inserted when no account has
    /// its name, else replacing it. Returns what `decide` returned.
    ///
    /// - Throws: what `decide` throws (nothing is written then).
    public func writeAccount<Refusal: Error & Sendable>(
        _ decide: @escaping @Sendable ([StoredAccount]) throws(Refusal) -> (account: StoredAccount?, refusal: Refusal?)
    ) async throws -> (account: StoredAccount?, refusal: Refusal?) {
        try await write { transaction in
            let all = try await transaction.accounts()
            let decided = try decide(all)
            if let account = decided.account {
                if all.contains(where: { $0.name == account.name }) {
                    try await transaction.updateAccount(account)
                } else if try await !transaction.insertAccount(account) {
                    throw StoreCorruption(what: "account \(account.name), made twice at once")
                }
            }
            return decided
        }
    }
}
