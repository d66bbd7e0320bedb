import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Accounts, API tokens, the permission table's checks and the audit trail, in process.
@Suite("Services: accounts, API tokens, access control")
struct AccountServiceTests {
    @Test("an account's role and scope are checked: an editor names its apps, an owner, admin or auditor takes no scope, names are unique")
    func accountRules() async throws {
        let harness = ServiceHarness()
        _ = try await harness.owner()
        let accounts = harness.services.accounts
        #expect(await serviceError { try await accounts.createAccount(AccountRequest(name: "ed", role: .editor)) }?.status == .badRequest)
        let scoped = AccountRequest(name: "al", role: .admin, scope: AccountScope(apps: ["kiosk"]))
        #expect(await serviceError { try await accounts.createAccount(scoped) }?.status == .badRequest)
        #expect(await serviceError { try await accounts.createAccount(AccountRequest(name: "ed")) }?.status == .badRequest)
        let editor = try await accounts.createAccount(AccountRequest(name: "ed", role: .editor, scope: AccountScope(apps: ["kiosk"])))
        #expect(editor.displayName == "ed" && editor.kind == .person && editor.scope.apps == ["kiosk"])
        #expect(await serviceError { try await accounts.createAccount(AccountRequest(name: "ed", role: .viewer)) }?.code == .accountExists)
        #expect(
            await serviceError { try await accounts.updateAccount(name: "ed", AccountRequest(kind: .service)) }?.status == .badRequest)
        // Made an auditor, it sees everything: the editor's scope goes.
        #expect(try await accounts.updateAccount(name: "ed", AccountRequest(role: .auditor)).scope == .everything)
        #expect(
            await serviceError { try await accounts.updateAccount(name: "nobody", AccountRequest(role: .viewer)) }?.code == .unknownAccount)
    }

    @Test("no change may leave the fleet without an enabled owner; a new role, scope or disabled raises the generation")
    func lastOwner() async throws {
        let harness = ServiceHarness()
        _ = try await harness.owner()
        let accounts = harness.services.accounts
        let owner = Authenticator.bootstrapOwner
        #expect(await serviceError { try await accounts.updateAccount(name: owner, AccountRequest(disabled: true)) }?.code == .lastOwner)
        #expect(await serviceError { try await accounts.updateAccount(name: owner, AccountRequest(role: .admin)) }?.code == .lastOwner)
        #expect(await serviceError { try await accounts.removeAccount(name: owner) }?.code == .lastOwner)
        _ = try await accounts.createAccount(AccountRequest(name: "second", role: .owner))
        let before = try #require(try await harness.store.account(name: owner)).generation
        _ = try await accounts.updateAccount(name: owner, AccountRequest(displayName: "The box"))
        #expect(try await harness.store.account(name: owner)?.generation == before)
        _ = try await accounts.updateAccount(name: owner, AccountRequest(disabled: true))
        #expect(try await harness.store.account(name: owner)?.generation == before + 1)
        // The admin token file's account is disabled: the token is refused, on every instance (no memory of it).
        #expect(await serviceError { try await harness.owner() }?.status == .unauthorized)
        let restored = try await accounts.restoreOwner()
        #expect(restored.role == .owner && !restored.disabled)
        #expect(try await harness.owner().name == owner)
    }

    @Test("an API token acts as its account until it expires, is revoked or its account is disabled; its last use is kept")
    func apiTokens() async throws {
        let harness = ServiceHarness()
        let owner = try await harness.owner()
        let accounts = harness.services.accounts
        _ = try await accounts.createAccount(
            AccountRequest(name: "ci", kind: .service, role: .editor, scope: AccountScope(apps: ["kiosk"])))
        let made = try await accounts.createToken(APITokenRequest(name: "ci-deploy", expiresIn: 3600, account: "ci"), by: owner)
        #expect(made.token.hasPrefix("fsk_") && made.info.account == "ci")
        #expect(try await harness.store.apiTokens(account: "ci").first?.hash == Credentials.hash(made.token))
        let caller = try await harness.account(token: made.token, from: "192.0.2.9")
        #expect(caller.name == "ci" && caller.role == .editor && caller.credential == .apiToken(id: made.info.id))
        let used = try #require(try await harness.store.apiTokens(account: "ci").first?.info)
        #expect(used.lastUsedAt == harness.wallClock.secondsSinceEpoch() && used.lastUsedFrom == "192.0.2.9")
        // The editor makes its own token, but not one for another account.
        let own = try await accounts.createToken(APITokenRequest(name: "laptop"), by: caller)
        #expect(own.info.account == "ci")
        #expect(
            await serviceError { try await accounts.createToken(APITokenRequest(name: "x", account: "owner"), by: caller) }?.code
                == .needs(.manageAccounts))
        #expect(try await accounts.tokens(account: nil, by: caller).tokens.map(\.id).sorted() == [made.info.id, own.info.id].sorted())
        #expect(await serviceError { try await accounts.revokeToken(id: "at-none", by: caller) }?.code == .unknownAPIToken)
        harness.wallClock.advance(by: 3600)
        #expect(await serviceError { try await harness.account(token: made.token) }?.message.contains("expired") == true)
        _ = try await accounts.revokeToken(id: own.info.id, by: owner)
        #expect(await serviceError { try await harness.account(token: own.token) }?.message.contains("revoked") == true)
        let third = try await accounts.createToken(APITokenRequest(name: "later", account: "ci"), by: owner)
        _ = try await accounts.updateAccount(name: "ci", AccountRequest(disabled: true))
        #expect(await serviceError { try await harness.account(token: third.token) }?.status == .unauthorized)
    }

    @Test("every operation × every role: allowed exactly when the permission table gives the role the operation's right")
    func permissionTable() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (device, _) = try await harness.enroll(apps: ["kiosk"], groups: ["lobby"])
        for role in Role.allCases {
            let caller = Caller(
                account: Account(
                    name: "r-\(role.rawValue)", displayName: "", kind: .person, role: role,
                    scope: role.isScoped ? AccountScope(apps: ["kiosk"]) : .everything, createdAt: 0, updatedAt: 0),
                credential: .apiToken(id: "at-x"))
            for operation in AdminOperation.allCases {
                let target = OperationTarget(app: "kiosk", deviceID: device.id, scope: .device(device.id))
                let error = await serviceError { try await harness.services.accounts.authorize(caller, operation, target) }
                if let right = operation.right, !role.rights.contains(right) {
                    #expect(error?.status == .forbidden && error?.code == .needs(right), "\(role) \(operation)")
                } else {
                    #expect(error == nil, "\(role) \(operation): \(String(describing: error))")
                }
                #expect(operation.roles.contains(role) == (error == nil), "\(role) \(operation)")
            }
        }
    }

    @Test("a scoped account: another app is 403 naming the right, another group 403, a device it does not see 404 as if absent")
    func scopes() async throws {
        let harness = ServiceHarness()
        try await harness.putKiosk()
        let (lobby, _) = try await harness.enroll(apps: ["kiosk"], groups: ["lobby"])
        let (office, _) = try await harness.enroll(apps: ["kiosk"], groups: ["office"])
        let accounts = harness.services.accounts
        let editor = Caller(
            account: Account(
                name: "ed", displayName: "", kind: .person, role: .editor, scope: AccountScope(apps: ["kiosk"], groups: ["lobby"]),
                createdAt: 0, updatedAt: 0), credential: .apiToken(id: "at-1"))
        let payments = await serviceError {
            try await accounts.authorize(editor, .patchValues, OperationTarget(app: "payments", scope: .app))
        }
        #expect(payments?.code == .needs(.writeValues) && payments?.message.contains("payments") == true)
        let wholeApp = await serviceError { try await accounts.authorize(editor, .patchValues, OperationTarget(app: "kiosk", scope: .app)) }
        #expect(wholeApp?.code == .needs(.writeValues))
        #expect(
            await serviceError { try await accounts.authorize(editor, .putMetadata, OperationTarget(app: "kiosk")) }?.code
                == .needs(.writeMetadata))
        #expect(
            await serviceError { try await accounts.authorize(editor, .patchValues, OperationTarget(app: "kiosk", scope: .group("lobby"))) }
                == nil)
        let office403 = await serviceError {
            try await accounts.authorize(editor, .patchValues, OperationTarget(app: "kiosk", scope: .group("office")))
        }
        #expect(office403?.code == .needs(.writeValues))
        #expect(
            await serviceError {
                try await accounts.authorize(editor, .patchValues, OperationTarget(app: "kiosk", scope: .device(lobby.id)))
            }
                == nil)
        let hidden = await serviceError { try await accounts.authorize(editor, .getDevice, OperationTarget(deviceID: office.id)) }
        #expect(hidden?.code == .unknownDevice && hidden?.message == ServiceError.unknownDevice(office.id).message)
        let listed = try await harness.directory.allDevices(visibleTo: editor).devices.map(\.id)
        #expect(listed == [lobby.id])
        #expect(try await harness.admin.devices(app: "kiosk", visibleTo: editor).devices.map(\.id) == [lobby.id])
        // The history shows it the app's scope, its group's and its devices', not the others'.
        try await harness.set(["title": "Lobby"], at: .group("lobby"))
        try await harness.set(["title": "Office"], at: .group("office"))
        try await harness.set(["volume": 2], at: .device(office.id))
        try await harness.set(["volume": 3], at: .device(lobby.id))
        let seen = try await harness.admin.history(app: "kiosk", scope: nil, limit: nil, visibleTo: editor).entries.flatMap(\.scopes).map(
            \.scope)
        #expect(seen == ["group:lobby", "device:\(lobby.id)"])
        let all = try await harness.admin.history(app: "kiosk", scope: nil, limit: nil).entries.flatMap(\.scopes).map(\.scope)
        #expect(all.count == 4)

        // The console's live stream passes on only what the scope covers.
        let heard: [(ServiceEvent, Bool)] = [
            (.statusReported(app: "kiosk", device: lobby.id, state: .applied), true),
            (.statusReported(app: "kiosk", device: office.id, state: .applied), false),
            (.statusReported(app: "payments", device: lobby.id, state: .applied), false),
            (.settingsChanged(app: "kiosk", scope: .app), true), (.settingsChanged(app: "payments", scope: .app), false),
            (.settingsChanged(app: "kiosk", scope: .group("lobby")), true),
            (.settingsChanged(app: "kiosk", scope: .group("office")), false),
            (.settingsChanged(app: "kiosk", scope: .device(office.id)), false), (.deviceChanged(device: lobby.id), true),
            (.deviceChanged(device: office.id), false), (.unknown, true),
        ]
        for (event, expected) in heard { #expect(await accounts.sees(editor, event: event) == expected, "\(event)") }
        let owner = try await harness.owner()
        for (event, _) in heard { #expect(await accounts.sees(owner, event: event), "\(event)") }
    }

    @Test("the audit trail: appended in order, hash-chained, read back by filter; the chain verifies")
    func auditTrail() async throws {
        let harness = ServiceHarness()
        let audit = harness.services.audit
        for (index, action) in ["createAccount", "patchValues", "putMetadata"].enumerated() {
            harness.wallClock.advance(by: 10)
            try await audit.record(
                AuditDraft(
                    actor: index == 1 ? "ed" : "owner", credential: "token at-\(index)", address: "192.0.2.1", action: action,
                    target: "app=kiosk", status: 200, outcome: "ok"))
        }
        let entries = try await audit.entries(AuditQuery()).entries
        #expect(entries.map(\.sequence) == [1, 2, 3] && entries.map(\.action) == ["createAccount", "patchValues", "putMetadata"])
        #expect(entries[1].previousHash == entries[0].hash && entries[0].previousHash == AuditChain.origin)
        #expect(try await audit.entries(AuditQuery(actor: "ed")).entries.map(\.sequence) == [2])
        #expect(try await audit.verify() == AuditChain.Position(sequence: 3, hash: entries[2].hash))
    }
}

/// The chain's verdicts on stored records changed every way an editor of the table could.
@Suite("Audit chain")
struct AuditChainTests {
    static func chain(_ count: Int) -> [AuditRecord] {
        var records: [AuditRecord] = []
        for index in 0..<count {
            records.append(
                AuditDraft(
                    actor: "a\(index)", credential: "-", address: "-", action: "patchValues", target: "app=kiosk", status: 200,
                    outcome: "ok"
                ).entry(after: records.last, at: 100 + Int64(index)))
        }
        return records
    }

    @Test("an untouched chain holds")
    func holds() throws {
        let records = Self.chain(5)
        #expect(try AuditChain.verify(records, from: .start) == AuditChain.Position(sequence: 5, hash: records[4].hash))
        // Paged: the second page follows the first.
        let first = try AuditChain.verify(Array(records[..<2]), from: .start)
        #expect(try AuditChain.verify(Array(records[2...]), from: first).sequence == 5)
    }

    func broken(_ records: [AuditRecord]) -> AuditChain.Break? {
        do {
            _ = try AuditChain.verify(records, from: .start)
            return nil
        } catch {
            return error
        }
    }

    @Test("a changed text, a changed column, a changed hash: that entry is named")
    func changed() {
        var records = Self.chain(5)
        records[2].text = records[2].text.replacing("\"a2\"", with: "\"mallory\"")
        #expect(broken(records) == AuditChain.Break(sequence: 3, reason: "was changed: its text no longer matches its hash"))
        records = Self.chain(5)
        records[2].actor = "mallory"
        #expect(broken(records)?.sequence == 3)
        records = Self.chain(5)
        records[3].hash = String(repeating: "f", count: 64)
        #expect(broken(records)?.sequence == 4)
    }

    @Test("a changed entry whose hash was recomputed: it is named, by the next entry's link")
    func recomputed() throws {
        var records = Self.chain(5)
        var forged = try records[1].entry()
        forged.actor = "mallory"
        records[1] = AuditRecord(forged)
        #expect(broken(records)?.sequence == 2 && broken(records)?.reason.contains("recomputed") == true)
    }

    @Test("a removed entry, first, middle, or several: the first number missing is named")
    func removed() {
        var records = Self.chain(5)
        records.remove(at: 2)
        #expect(broken(records) == AuditChain.Break(sequence: 3, reason: "was removed"))
        records = Self.chain(5)
        records.removeFirst()
        #expect(broken(records)?.sequence == 1)
        records = Self.chain(6)
        records.removeSubrange(1...3)
        #expect(broken(records)?.sequence == 2 && broken(records)?.reason.contains("up to 4") == true)
    }

    @Test("reordered entries (their numbers swapped too) are named")
    func reordered() {
        var records = Self.chain(5)
        (records[1].sequence, records[2].sequence) = (records[2].sequence, records[1].sequence)
        records.swapAt(1, 2)
        #expect(broken(records)?.sequence == 2)
    }
}

@Suite("Credentials: redaction")
struct CredentialRedactionTests {
    @Test("every kind of fleetset secret is cut to its prefix; short lookalikes and other text stay")
    func redacted() {
        for kind in Credentials.Kind.allCases {
            let secret = Credentials.generate(kind)
            #expect(Credentials.redacted("id=\(secret) done") == "id=\(kind.rawValue)… done")
        }
        #expect(Credentials.redacted("fsk_short and fsd_1234567 stay") == "fsk_short and fsd_1234567 stay")
        #expect(Credentials.redacted("ünïcode fsa_abcdefgh/x") == "ünïcode fsa_…/x")
    }
}
