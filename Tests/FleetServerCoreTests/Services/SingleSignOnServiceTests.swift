import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// The accounts single sign-on makes and keeps: found only by their binding to an issuer and
/// subject, their role set at every sign-in from the groups' grant, disabled (sessions ended)
/// when the groups grant nothing, and never taking over an account they are not bound to.
@Suite("Services: single sign-on's accounts")
struct SingleSignOnServiceTests {
    static let issuer = "https://id.example.com"
    static let alice = SingleSignOnIdentity(issuer: issuer, subject: "s-alice", preferredUsername: "Alice", displayName: "Alice A.")
    static let admin = SingleSignOnGrant(role: .admin, scope: .everything)
    static let kioskEditor = SingleSignOnGrant(role: .editor, scope: AccountScope(apps: ["kiosk"]))

    @Test("a first sign-in makes the account (lowercased name, display name, binding); the next finds it by subject and sets its role")
    func justInTime() async throws {
        let harness = ServiceHarness()
        _ = try await harness.owner()
        let accounts = harness.services.accounts
        let made = try await accounts.signIn(Self.alice, grant: Self.kioskEditor)
        #expect(made.name == "alice" && made.account.displayName == "Alice A." && made.account.role == .editor)
        #expect(made.singleSignOn == StoredAccount.SingleSignOnBinding(issuer: Self.issuer, subject: "s-alice"))
        #expect(made.password == nil && made.account.scope.apps == ["kiosk"])
        // Its stored form reads back with the binding.
        #expect(try StoredAccount(storedText: made.storedText) == made)

        // A session, then a sign-in with a new role: the role is set, the session ends (the generation rose).
        let session = try await accounts.startSingleSignOnConsoleSession(made, address: "192.0.2.1")
        #expect(try await accounts.consoleCaller(session)?.role == .editor)
        var renamed = Self.alice
        renamed.preferredUsername = "alice.new"
        let promoted = try await accounts.signIn(renamed, grant: Self.admin)
        #expect(promoted.name == "alice" && promoted.account.role == .admin && promoted.account.scope.isEverything)
        #expect(promoted.generation > made.generation)
        #expect(try await accounts.consoleCaller(session) == nil)
        // The same grant again changes nothing.
        #expect(try await accounts.signIn(renamed, grant: Self.admin).generation == promoted.generation)
    }

    @Test("a mapping that grants nothing: refused, the bound account disabled with its sessions; a grant again brings it back")
    func grantsNothing() async throws {
        let harness = ServiceHarness()
        _ = try await harness.owner()
        let accounts = harness.services.accounts
        let nobody = await serviceError { try await accounts.signIn(Self.alice, grant: nil) }
        #expect(nobody?.status == .unauthorized && nobody?.message.contains("grant no role") == true)
        #expect(try await accounts.exists("alice") == false, "no account for a person without a role")

        let made = try await accounts.signIn(Self.alice, grant: Self.admin)
        let session = try await accounts.startSingleSignOnConsoleSession(made, address: "-")
        let dropped = await serviceError { try await accounts.signIn(Self.alice, grant: nil) }
        #expect(dropped?.status == .unauthorized)
        let disabled = try await accounts.account(name: "alice")
        #expect(disabled.disabled)
        #expect(try await accounts.consoleCaller(session) == nil)
        #expect(try await accounts.signIn(Self.alice, grant: Self.admin).account.disabled == false)
    }

    @Test(
        "an account an owner disabled stays disabled; a local account of the same name is never taken over; the last owner is not disabled by a mapping"
    )
    func neverTakenOver() async throws {
        let harness = ServiceHarness()
        let owner = try await harness.owner()
        let accounts = harness.services.accounts
        _ = try await accounts.createAccount(AccountRequest(name: "alice", role: .viewer))
        let local = await serviceError { try await accounts.signIn(Self.alice, grant: Self.admin) }
        #expect(local?.message.contains("not bound to this identity") == true)
        #expect(try await accounts.account(name: "alice").role == .viewer)
        // Another subject with the same preferred name: refused too, not merged into the first.
        var bob = SingleSignOnIdentity(issuer: Self.issuer, subject: "s-bob", preferredUsername: "bob")
        _ = try await accounts.signIn(bob, grant: Self.admin)
        bob.subject = "s-another-bob"
        #expect(await serviceError { try await accounts.signIn(bob, grant: Self.admin) }?.message.contains("not bound") == true)
        // The same subject at another issuer is another person.
        bob.subject = "s-bob"
        bob.issuer = "https://other.example.com"
        #expect(await serviceError { try await accounts.signIn(bob, grant: Self.admin) }?.status == .unauthorized)

        // Disabled by an owner: refused even with a grant.
        _ = try await accounts.updateAccount(name: "bob", AccountRequest(disabled: true))
        bob.issuer = Self.issuer
        let disabled = await serviceError { try await accounts.signIn(bob, grant: Self.admin) }
        #expect(disabled?.message.contains("disabled by an owner") == true)

        // The only enabled owner, mapped by single sign-on, is not disabled when its groups drop it.
        let ownerGrant = SingleSignOnGrant(role: .owner, scope: .everything)
        let carol = SingleSignOnIdentity(issuer: Self.issuer, subject: "s-carol", preferredUsername: "carol")
        _ = try await accounts.signIn(carol, grant: ownerGrant)
        _ = try await accounts.updateAccount(name: owner.name, AccountRequest(disabled: true))
        #expect(await serviceError { try await accounts.signIn(carol, grant: nil) }?.status == .unauthorized)
        #expect(try await accounts.account(name: "carol").disabled == false)
    }

    @Test("an owner's disabling stands after the mapping's was undone; no password for a bound account; a long name is cut")
    func ownersWord() async throws {
        let harness = ServiceHarness()
        let owner = try await harness.owner()
        let accounts = harness.services.accounts
        _ = try await accounts.signIn(Self.alice, grant: Self.admin)
        _ = await serviceError { try await accounts.signIn(Self.alice, grant: nil) }
        #expect(try await accounts.account(name: "alice").disabled)
        // The owner enables it, then disables it again: a sign-in with a grant does not undo that.
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: false))
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: true))
        let refused = await serviceError { try await accounts.signIn(Self.alice, grant: Self.admin) }
        #expect(refused?.message.contains("disabled by an owner") == true)
        #expect(try await accounts.account(name: "alice").disabled)

        // A password would be a way in past the provider: refused, by an owner and by the person.
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: false))
        let set = await serviceError { try await accounts.setPassword(name: "alice", to: "a long enough password") }
        #expect(set?.status == .badRequest && set?.message.contains("identity provider") == true)
        let alice = Caller(account: try await accounts.account(name: "alice"), credential: .singleSignOn)
        let own = await serviceError { try await accounts.changeOwnPassword(PasswordChange(password: "a long enough password"), by: alice) }
        #expect(own?.status == .badRequest)
        #expect(try await harness.store.account(name: "alice")?.password == nil)

        // A provider's name of any length or content: cut and cleaned, and every account still reads back.
        let long = SingleSignOnIdentity(
            issuer: Self.issuer, subject: "s-long", preferredUsername: "long", displayName: "\u{7}" + String(repeating: "é", count: 500))
        let made = try await accounts.signIn(long, grant: Self.admin)
        #expect(made.account.displayName == String(repeating: "é", count: Account.displayNameLength))
        #expect(try await accounts.accounts().accounts.count == 3 && owner.name == "owner")
    }

    @Test("the last enabled owner is not demoted by its groups: 409, nothing changed")
    func lastOwner() async throws {
        let harness = ServiceHarness()
        let owner = try await harness.owner()
        let accounts = harness.services.accounts
        let carol = SingleSignOnIdentity(issuer: Self.issuer, subject: "s-carol", preferredUsername: "carol")
        _ = try await accounts.signIn(carol, grant: SingleSignOnGrant(role: .owner, scope: .everything))
        _ = try await accounts.updateAccount(name: owner.name, AccountRequest(disabled: true))
        let demoted = await serviceError { try await accounts.signIn(carol, grant: Self.admin) }
        #expect(demoted?.status == .conflict && demoted?.code == .lastOwner)
        #expect(try await accounts.account(name: "carol").role == .owner)
    }

    @Test("a name that is not a valid account name: the part before its @, the email's, else sso- and a hash")
    func names() {
        #expect(SingleSignOnIdentity(issuer: "i", subject: "s", preferredUsername: "Dana.Smith").accountName == "dana.smith")
        #expect(
            SingleSignOnIdentity(issuer: "i", subject: "s", preferredUsername: "Dana Smith", email: "dana@x.test").accountName == "dana")
        let hashed = SingleSignOnIdentity(issuer: "i", subject: "s", preferredUsername: "Ünïcode", email: "@").accountName
        #expect(hashed.hasPrefix("sso-") && hashed.count == 16 && Account.isValidName(hashed))
        #expect(hashed != SingleSignOnIdentity(issuer: "i", subject: "t").accountName)
    }

    @Test("a one-time value is taken once, not after it expired, and a key is kept once")
    func oneTimeValues() async throws {
        let store = InMemoryStore()
        #expect(try await store.addOneTimeValue(key: "k", value: "v", expiresAt: 100, now: 0))
        #expect(try await !store.addOneTimeValue(key: "k", value: "w", expiresAt: 100, now: 0))
        #expect(try await store.takeOneTimeValue(key: "k", now: 50) == "v")
        #expect(try await store.takeOneTimeValue(key: "k", now: 50) == nil)
        #expect(try await store.addOneTimeValue(key: "late", value: "v", expiresAt: 100, now: 0))
        #expect(try await store.takeOneTimeValue(key: "late", now: 100) == nil)
    }
}
