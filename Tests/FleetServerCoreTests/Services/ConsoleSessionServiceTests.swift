import FleetProtocol
import FleetServerCore
import HTTPTypes
import Testing

/// Console sessions as their accounts keep them: started by a password (and a code), checked
/// against the account at every request, ended by signing out or by any change of the account.
@Suite("Services: console sessions")
struct ConsoleSessionServiceTests {
    static let password = "a long enough password"

    /// A person named `name` with a password, and a harness.
    static func person(_ name: String = "alice", role: Role = .viewer) async throws -> ServiceHarness {
        let harness = ServiceHarness()
        _ = try await harness.owner()
        _ = try await harness.services.accounts.createAccount(AccountRequest(name: name, role: role))
        try await harness.services.accounts.setPassword(name: name, to: password)
        return harness
    }

    @Test("a password sign-in starts a session the cookie brings back; a forged or altered cookie is nobody")
    func startAndCheck() async throws {
        let harness = try await Self.person()
        let accounts = harness.services.accounts
        let (session, awaitsCode) = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "192.0.2.1")
        #expect(!awaitsCode)
        let read = try #require(ConsoleSession(cookie: session.cookie))
        let caller = try #require(try await accounts.consoleCaller(read))
        #expect(caller.name == "alice" && caller.credential == .consoleSession(id: session.id))
        #expect(read.csrfToken == session.csrfToken && read.isValidCSRFToken(session.csrfToken) && !read.isValidCSRFToken("x"))
        // The stored record holds a hash of the secret, never the secret.
        let stored = try #require(try await harness.store.account(name: "alice"))
        let secret = String(session.cookie.split(separator: ":")[1])
        #expect(stored.sessions.count == 1 && !stored.storedText.contains(secret) && stored.sessions[0].address == "192.0.2.1")

        let parts = session.cookie.split(separator: ":").map(String.init)
        let otherSecret = String(repeating: "A", count: parts[1].count)
        for forged in ["\(parts[0]):\(otherSecret):alice", "\(parts[0]):\(parts[1]):owner", "cs-nosuchsession000000:\(parts[1]):alice"] {
            let cookie = try #require(ConsoleSession(cookie: forged))
            #expect(try await accounts.consoleCaller(cookie) == nil, "\(forged)")
        }
        for junk in ["", "a:b", "cs-x:short:alice", "\(parts[0]):\(parts[1]):Not A Name", "\(session.cookie):extra"] {
            #expect(ConsoleSession(cookie: junk) == nil, "\(junk)")
        }
        let wrong = await serviceError { try await accounts.startConsoleSignIn(name: "alice", password: "not the password", address: "-") }
        #expect(wrong?.status == .unauthorized)
    }

    @Test("signing out, an expiry, disabling the account and changing its role each end its sessions")
    func endings() async throws {
        let harness = try await Self.person()
        let accounts = harness.services.accounts
        func signIn() async throws -> ConsoleSession {
            try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        }
        let first = try await signIn()
        let second = try await signIn()
        try await accounts.endConsoleSession(first)
        #expect(try await accounts.consoleCaller(first) == nil)
        #expect(try await accounts.consoleCaller(second) != nil, "signing out ends that session only")

        _ = try await accounts.updateAccount(name: "alice", AccountRequest(role: .editor, scope: AccountScope(apps: ["kiosk"])))
        #expect(try await accounts.consoleCaller(second) == nil, "a new role: sign in again")

        let third = try await signIn()
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: true))
        #expect(try await accounts.consoleCaller(third) == nil)
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: false))
        #expect(try await accounts.consoleCaller(third) == nil, "enabling again does not bring old sessions back")

        let fourth = try await signIn()
        // A display name is not a change of what the account may do: the session goes on.
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(displayName: "Alice A."))
        #expect(try await accounts.consoleCaller(fourth)?.account.displayName == "Alice A.")
        harness.wallClock.advance(by: ConsoleSession.lifetime)
        #expect(try await accounts.consoleCaller(fourth) == nil, "8 hours on, the session has expired")
    }

    @Test("changing one's own password in the console keeps that session and ends the others; an owner's reset ends them all")
    func ownChanges() async throws {
        let harness = try await Self.person()
        let accounts = harness.services.accounts
        let here = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        let elsewhere = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        let caller = try #require(try await accounts.consoleCaller(here))
        try await accounts.changeOwnPassword(PasswordChange(current: Self.password, password: "another long password"), by: caller)
        #expect(try await accounts.consoleCaller(here) != nil)
        #expect(try await accounts.consoleCaller(elsewhere) == nil)
        // Setting up a second factor from the console keeps the session too.
        _ = try await accounts.startTwoFactor(by: caller)
        #expect(try await accounts.consoleCaller(here) != nil)
        try await accounts.setPassword(name: "alice", to: "an owner's reset password")
        #expect(try await accounts.consoleCaller(here) == nil)
    }

    @Test("with a second factor, the password opens a session that awaits its code: nothing else until a code, good once, finishes it")
    func secondFactor() async throws {
        let harness = try await Self.person()
        let accounts = harness.services.accounts
        let setupCaller = Caller(account: try await accounts.account(name: "alice"), credential: .password)
        let setup = try await accounts.startTwoFactor(by: setupCaller)
        let totp = try #require(TOTP(base32: setup.secret))
        let now = harness.wallClock.secondsSinceEpoch()
        let recovery = try await accounts.confirmTwoFactor(code: totp.code(step: TOTP.step(at: now)), by: setupCaller)
        harness.wallClock.advance(by: TOTP.period)

        let (session, awaitsCode) = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-")
        #expect(awaitsCode)
        #expect(try await accounts.consoleCaller(session) == nil, "no page but the code's before the code")
        #expect(try await accounts.awaitsCode(session))
        let factorBefore = try await harness.store.account(name: "alice")?.twoFactor
        let wrong = await serviceError { try await accounts.finishConsoleSignIn(session, code: "000000") }
        #expect(wrong?.status == .unauthorized)
        #expect(try await harness.store.account(name: "alice")?.twoFactor == factorBefore, "a refused code changes nothing")
        let code = totp.code(step: TOTP.step(at: harness.wallClock.secondsSinceEpoch()))
        let (caller, signedIn) = try await accounts.finishConsoleSignIn(session, code: code)
        #expect(caller.name == "alice" && caller.credential == .consoleSession(id: signedIn.id))
        // A new session: the cookie that waited for the code (which someone may have planted) is worth nothing now.
        #expect(signedIn.id != session.id && signedIn.cookie != session.cookie)
        #expect(try await accounts.consoleCaller(session) == nil)
        #expect(try await !accounts.awaitsCode(session))
        #expect(try await accounts.consoleCaller(signedIn) != nil)

        // The same code cannot finish another sign-in; a recovery code can, once.
        let other = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        #expect(await serviceError { try await accounts.finishConsoleSignIn(other, code: code) }?.status == .unauthorized)
        _ = try await accounts.finishConsoleSignIn(other, code: recovery.codes[0])
        let third = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        #expect(await serviceError { try await accounts.finishConsoleSignIn(third, code: recovery.codes[0]) }?.status == .unauthorized)

        // Sign-ins waiting for their code (a password is all they took) never push out a signed-in session.
        let kept = try #require(try await accounts.consoleCaller(signedIn))
        for _ in 0..<3 { _ = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-") }
        #expect(try await accounts.consoleCaller(signedIn) == kept)
        let stored = try #require(try await harness.store.account(name: "alice"))
        #expect(stored.sessions.filter(\.awaitsCode).count == 3)
        #expect(try await !accounts.awaitsCode(third), "the oldest waiting sign-in made way")

        // A sign-in left waiting past five minutes is over: sign in again.
        let fourth = try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session
        #expect(try await accounts.awaitsCode(fourth))
        harness.wallClock.advance(by: ConsoleSession.codeLifetime)
        #expect(try await !accounts.awaitsCode(fourth))
        #expect(await serviceError { try await accounts.finishConsoleSignIn(fourth, code: recovery.codes[1]) }?.status == .unauthorized)
        #expect(
            try await harness.store.account(name: "alice")?.twoFactor?.recoveryHashes.count == 9,
            "a refused finish spends no recovery code")
    }

    @Test("an account keeps its newest sessions only; the admin token's session is the bootstrap owner's")
    func cap() async throws {
        let harness = try await Self.person()
        let accounts = harness.services.accounts
        var sessions: [ConsoleSession] = []
        for _ in 0..<(ConsoleSession.perAccount + 2) {
            sessions.append(try await accounts.startConsoleSignIn(name: "alice", password: Self.password, address: "-").session)
        }
        #expect(try await harness.store.account(name: "alice")?.sessions.count == ConsoleSession.perAccount)
        #expect(try await accounts.consoleCaller(sessions[0]) == nil)
        #expect(try await accounts.consoleCaller(sessions[1]) == nil)
        #expect(try await accounts.consoleCaller(sessions[2]) != nil)

        let owner = try await accounts.startOwnerConsoleSession(address: "-")
        #expect(try await accounts.consoleCaller(owner)?.name == Authenticator.bootstrapOwner)
        _ = try await accounts.createAccount(AccountRequest(name: "boss", role: .owner))
        _ = try await accounts.updateAccount(name: Authenticator.bootstrapOwner, AccountRequest(role: .admin))
        #expect(try await accounts.consoleCaller(owner) == nil)
        #expect(await serviceError { try await accounts.startOwnerConsoleSession(address: "-") }?.status == .unauthorized)
    }
}
