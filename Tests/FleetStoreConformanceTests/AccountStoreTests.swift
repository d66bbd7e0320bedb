import FleetProtocol
import FleetServerCore
import FleetStorePostgres
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import GRDB
import Logging
import Testing

/// Accounts, API tokens and the audit trail: the same contract on every store.
@Suite("Store conformance: accounts, API tokens, the audit trail")
struct AccountStoreTests {
    static func account(_ name: String, role: Role = .viewer, disabled: Bool = false) -> StoredAccount {
        StoredAccount(
            account: Account(
                name: name, displayName: name.uppercased(), kind: .person, role: role,
                scope: role == .viewer ? AccountScope(apps: ["kiosk"], groups: ["lobby"]) : .everything, disabled: disabled,
                createdAt: 100, updatedAt: 100))
    }

    static func token(_ id: String, account: String, createdAt: Int64 = 100) -> StoredAPIToken {
        StoredAPIToken(
            info: APITokenInfo(id: id, name: "ci \(id)", account: account, createdAt: createdAt, expiresAt: createdAt + 3600),
            hash: Credentials.hash("secret-\(id)"))
    }

    @Test("accounts: one per name, changed whole, listed in byte order, removed with their tokens", arguments: ConformingStore.allCases)
    func accounts(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            #expect(try await store.addAccount(Self.account("zoe")))
            #expect(try await store.addAccount(Self.account("Bob".lowercased(), role: .owner)))
            #expect(try await store.addAccount(Self.account("zoe", role: .owner)) == false)
            #expect(try await store.accounts().map(\.name) == ["bob", "zoe"])
            #expect(try await store.account(name: "zoe") == Self.account("zoe"))
            let changed = try await store.changeAccount(name: "zoe") { stored, all in
                #expect(all.count == 2)
                var changed = stored
                changed.account.role = .editor
                changed.generation += 1
                return changed
            }
            #expect(changed?.generation == 2)
            #expect(try await store.account(name: "zoe")?.account.role == .editor)
            #expect(try await store.changeAccount(name: "nobody") { stored, _ in stored } == nil)
            #expect(try await store.addAPIToken(Self.token("at-1", account: "zoe")))
            #expect(try await store.addAPIToken(Self.token("at-2", account: "nobody")) == false)
            #expect(try await store.removeAccount(name: "zoe") { _, _ in })
            #expect(try await store.apiTokens(account: nil).isEmpty)
            #expect(try await store.removeAccount(name: "zoe") { _, _ in } == false)
            // A refused removal writes nothing.
            struct Refused: Error {}
            await #expect(throws: Refused.self) { try await store.removeAccount(name: "bob") { _, _ in throw Refused() } }
            #expect(try await store.account(name: "bob") != nil)
        }
    }

    @Test(
        "one-time values: kept once per key, taken once, not after they expire, expired ones forgotten; accounts written whole or made",
        arguments: ConformingStore.allCases)
    func oneTimeValuesAndWrittenAccounts(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            #expect(try await store.addOneTimeValue(key: "sso-attempt:a", value: "first", expiresAt: 200, now: 100))
            #expect(try await store.addOneTimeValue(key: "sso-attempt:a", value: "second", expiresAt: 200, now: 100) == false)
            #expect(try await store.takeOneTimeValue(key: "sso-attempt:a", now: 150) == "first")
            #expect(try await store.takeOneTimeValue(key: "sso-attempt:a", now: 150) == nil)
            #expect(try await store.addOneTimeValue(key: "sso-attempt:b", value: "late", expiresAt: 200, now: 100))
            #expect(try await store.takeOneTimeValue(key: "sso-attempt:b", now: 200) == nil)
            // An expired key is forgotten by the next insert, so that it may be kept again.
            #expect(try await store.addOneTimeValue(key: "sso-attempt:c", value: "old", expiresAt: 120, now: 100))
            #expect(try await store.addOneTimeValue(key: "sso-attempt:c", value: "new", expiresAt: 300, now: 130))
            #expect(try await store.takeOneTimeValue(key: "sso-attempt:c", now: 140) == "new")

            var bound = Self.account("sam")
            bound.singleSignOn = StoredAccount.SingleSignOnBinding(issuer: "https://id.example.com", subject: "s-1")
            let first = bound
            struct Refusal: Error, Sendable, Equatable {}
            let made = try await store.writeAccount { all throws(Refusal) in
                #expect(all.isEmpty)
                return (first, nil)
            }
            #expect(made.account == bound && made.refusal == nil)
            #expect(try await store.account(name: "sam") == bound)
            bound.account.role = .admin
            bound.account.scope = .everything
            let promoted = bound
            let refused = try await store.writeAccount { _ throws(Refusal) in (promoted, Refusal()) }
            #expect(refused.refusal == Refusal())
            #expect(try await store.account(name: "sam")?.account.role == .admin)
            #expect(try await store.accounts().count == 1)
        }
    }

    @Test("API tokens: found by hash, listed by account oldest first, their listing changed", arguments: ConformingStore.allCases)
    func tokens(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            #expect(try await store.addAccount(Self.account("ci")))
            #expect(try await store.addAccount(Self.account("ann")))
            #expect(try await store.addAPIToken(Self.token("at-b", account: "ci", createdAt: 200)))
            #expect(try await store.addAPIToken(Self.token("at-a", account: "ci", createdAt: 100)))
            #expect(try await store.addAPIToken(Self.token("at-c", account: "ann", createdAt: 150)))
            await #expect(throws: (any Error).self) { _ = try await store.addAPIToken(Self.token("at-a", account: "ann")) }
            #expect(try await store.apiToken(hash: Credentials.hash("secret-at-b"))?.id == "at-b")
            #expect(try await store.apiToken(hash: Credentials.hash("secret-none")) == nil)
            #expect(try await store.apiTokens(account: "ci").map(\.id) == ["at-a", "at-b"])
            #expect(try await store.apiTokens(account: nil).map(\.id) == ["at-a", "at-c", "at-b"])
            let used = try await store.changeAPIToken(id: "at-a") { stored in
                var used = stored
                used.info.lastUsedAt = 160
                used.info.lastUsedFrom = "192.0.2.7"
                used.info.revoked = true
                return used
            }
            #expect(used?.info.revoked == true)
            let stored = try #require(try await store.apiToken(hash: Credentials.hash("secret-at-a")))
            #expect(stored.info.lastUsedAt == 160 && stored.info.lastUsedFrom == "192.0.2.7" && stored.info.revoked)
            #expect(try await store.changeAPIToken(id: "at-none") { $0 } == nil)
        }
    }

    @Test(
        "the audit trail: numbered from 1, each entry chained to the one before, read back by filter", arguments: ConformingStore.allCases)
    func audit(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            let drafts = [
                AuditDraft(
                    actor: "ann", credential: "token at-1", address: "192.0.2.1", action: "patchValues", target: "app=kiosk", status: 200,
                    outcome: "ok"),
                AuditDraft(
                    actor: "bob", credential: "token at-2", address: "192.0.2.2", action: "putMetadata", target: "app=pay", status: 403,
                    outcome: "needs-write-metadata"),
                AuditDraft(
                    actor: "ann", credential: "session cs-1", address: "192.0.2.1", action: "patchValues", target: "app=kiosk", status: 200,
                    outcome: "ok", detail: "louder"),
            ]
            var records: [AuditRecord] = []
            for (index, draft) in drafts.enumerated() { records.append(try await store.appendAudit(draft, at: 1000 + Int64(index) * 10)) }
            #expect(records.map(\.sequence) == [1, 2, 3])
            #expect(try records[0].entry().previousHash == AuditChain.origin && records[1].entry().previousHash == records[0].hash)
            #expect(try await store.auditRecords(AuditQuery()) == records)
            #expect(try await store.auditRecords(AuditQuery(actor: "ann")).map(\.sequence) == [1, 3])
            #expect(try await store.auditRecords(AuditQuery(action: "putMetadata")).map(\.sequence) == [2])
            #expect(try await store.auditRecords(AuditQuery(since: 1010)).map(\.sequence) == [2, 3])
            #expect(try await store.auditRecords(AuditQuery(after: 1, limit: 1)).map(\.sequence) == [2])
            #expect(try records[2].entry().detail == "louder")
            #expect(try await AuditTrail.verify(store) == AuditChain.Position(sequence: 3, hash: records[2].hash))
            // A second entry with a number taken is refused.
            let taken = records[1]
            await #expect(throws: (any Error).self) { try await store.write { try await $0.insertAuditRecord(taken) } }
        }
    }

    @Test("accounts, tokens and the audit trail move with a snapshot, hashes and all", arguments: ConformingStore.allCases)
    func snapshot(kind: ConformingStore) async throws {
        let source = InMemoryStore()
        #expect(try await source.addAccount(Self.account("ann", role: .owner)))
        #expect(try await source.addAPIToken(Self.token("at-1", account: "ann")))
        _ = try await source.appendAudit(
            AuditDraft(
                actor: "ann", credential: "token at-1", address: "-", action: "createAccount", target: "name=ann", status: 201,
                outcome: "ok"),
            at: 5)
        let snapshot = try await source.snapshot()
        try await withStore(kind) { store in
            try await store.restore(snapshot)
            #expect(try await store.snapshot().sorted() == snapshot.sorted())
            #expect(try await AuditTrail.verify(store).sequence == 1)
            await #expect(throws: StoreNotEmpty.self) { try await store.restore(snapshot) }
        }
    }
}

/// A database of the release before accounts: upgraded in place, the admin token file acts as
/// the bootstrap owner made at the first start.
@Suite("Store migration: accounts begin with the bootstrap owner")
struct AccountMigrationTests {
    static func expectBootstrap(_ store: any SettingsStore) async throws {
        #expect(try await store.accounts().isEmpty)
        let services = FleetServices(
            store: store, adminTokenHash: Credentials.hash("fsa_upgrade-admin-token-0123456789"), wallClock: FixedWallClock(),
            logger: storeTestLogger)
        #expect(try await services.accounts.bootstrap())
        guard case .account(let caller) = try await services.auth.authenticate(authorization: "Bearer fsa_upgrade-admin-token-0123456789")
        else {
            Issue.record("the admin token is not an account")
            return
        }
        #expect(caller.name == Authenticator.bootstrapOwner && caller.role == .owner)
        #expect(try await store.metadata(app: "kiosk")?.version == 3)
    }

    @Test("SQLite: a database at schema v7 gets the account tables; the admin token still works, as the owner")
    func sqlite() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("fleet.sqlite").path
        do {
            let store = try SQLiteStore(path: path)
            #expect(try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 3, document: "{}"), expectedVersion: nil))
        }
        let pool = try DatabasePool(path: path)
        try await pool.write { db in
            try db.execute(sql: "DROP TABLE accounts; DROP TABLE api_tokens; DROP TABLE audit_log")
            try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier LIKE 'v8:%'")
        }
        try pool.close()
        try await Self.expectBootstrap(try SQLiteStore(path: path))
    }

    @Test("PostgreSQL: a database at schema v7 gets the account tables; the admin token still works, as the owner")
    func postgres() async throws {
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        let location = try PostgresLocation(url: url)
        try await PostgresStore.with(location, logger: storeTestLogger) { store in
            let stored = try await store.replaceMetadata(StoredMetadata(app: "kiosk", version: 3, document: "{}"), expectedVersion: nil)
            #expect(stored)
        }
        _ = try await cluster.psql(
            "DROP TABLE accounts; DROP TABLE api_tokens; DROP TABLE audit_log; DELETE FROM fleetset_migrations WHERE name LIKE 'v8:%'",
            database: PostgresCluster.databaseName(url))
        try await PostgresStore.with(location, logger: storeTestLogger) { store in try await Self.expectBootstrap(store) }
    }
}

/// A wall clock that stands still.
struct FixedWallClock: WallClock {
    func secondsSinceEpoch() -> Int64 { 1_790_000_000 }
}
