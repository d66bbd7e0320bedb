import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestWaiting
import HTTPTypes
import PosixThreads
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// TOTP against RFC 6238's own vectors, and the codes as sign-in takes them.
@Suite("TOTP")
struct TOTPTests {
    /// RFC 6238, appendix B (SHA-1, the ASCII secret "12345678901234567890"): the six low digits of each code.
    @Test(
        "the RFC's test vectors",
        arguments: [
            (59, "287082"), (1_111_111_109, "081804"), (1_111_111_111, "050471"), (1_234_567_890, "005924"), (2_000_000_000, "279037"),
            (20_000_000_000, "353130"),
        ] as [(Int64, String)])
    func vectors(time: Int64, code: String) {
        let totp = TOTP(secret: Array("12345678901234567890".utf8))
        #expect(totp.code(step: TOTP.step(at: time)) == code)
    }

    @Test("a secret reads back from its base32; a code matches its step and the steps beside it, once")
    func matching() throws {
        let totp = TOTP.generate()
        #expect(try #require(TOTP(base32: totp.base32)) == totp)
        #expect(TOTP(base32: totp.base32.lowercased()) == totp)
        #expect(TOTP(base32: "not base32!") == nil)
        let time: Int64 = 1_790_000_015
        let step = TOTP.step(at: time)
        #expect(totp.matchingStep(totp.code(step: step), at: time, after: nil) == step)
        #expect(totp.matchingStep(totp.code(step: step - 1), at: time, after: nil) == step - 1)
        #expect(totp.matchingStep(totp.code(step: step + 1), at: time, after: nil) == step + 1)
        #expect(totp.matchingStep(totp.code(step: step - 2), at: time, after: nil) == nil)
        #expect(totp.matchingStep(totp.code(step: step), at: time, after: step) == nil, "a code is good once")
        #expect(totp.matchingStep("12345", at: time, after: nil) == nil)
        #expect(totp.uri(account: "alice").hasPrefix("otpauth://totp/fleetset:alice?secret=\(totp.base32)&issuer=fleetset"))
    }

    @Test("a password hash verifies its password only, keeps its parameters, and reads back from its text")
    func passwords() throws {
        let hash = try PasswordHash.make("correct horse battery", parameters: PasswordHash.Parameters(cost: 10))
        #expect(hash.verifies("correct horse battery") && !hash.verifies("correct horse batterY"))
        #expect(hash.parameters == PasswordHash.Parameters(cost: 10))
        #expect(hash.text.hasPrefix("scrypt$N=1024,r=8,p=1$") && !hash.text.contains("correct"))
        #expect(PasswordHash(text: hash.text) == hash)
        #expect(PasswordHash(text: "scrypt$N=1000,r=8,p=1$AAAA$BBBB") == nil)
        let again = try PasswordHash.make("correct horse battery", parameters: PasswordHash.Parameters(cost: 10))
        #expect(again != hash, "a fresh salt each time")
    }
}

/// Passwords, second factors and sign-in, in process.
@Suite("Services: sign-in")
struct SignInServiceTests {
    static func person(_ harness: ServiceHarness, _ name: String = "alice") async throws -> Caller {
        _ = try await harness.owner()
        _ = try await harness.services.accounts.createAccount(AccountRequest(name: name, role: .viewer))
        try await harness.services.accounts.setPassword(name: name, to: "a long enough password")
        return Caller(account: try await harness.services.accounts.account(name: name), credential: .password)
    }

    @Test("a password: set by an owner (not for a service account, not a short one), checked at sign-in, the same answer for every wrong")
    func passwords() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        _ = try await Self.person(harness)
        #expect(try await harness.store.account(name: "alice")?.account.hasPassword == true)
        #expect(await serviceError { try await accounts.setPassword(name: "alice", to: "short") }?.code == .weakPassword)
        _ = try await accounts.createAccount(AccountRequest(name: "ci", kind: .service, role: .viewer))
        #expect(await serviceError { try await accounts.setPassword(name: "ci", to: "a long enough password") }?.status == .badRequest)
        #expect(try await accounts.signIn(name: "alice", password: "a long enough password", code: nil).name == "alice")
        let wrong = await serviceError { try await accounts.signIn(name: "alice", password: "a wrong password!", code: nil) }
        let unknown = await serviceError { try await accounts.signIn(name: "nobody", password: "a wrong password!", code: nil) }
        let noPassword = await serviceError { try await accounts.signIn(name: "ci", password: "a wrong password!", code: nil) }
        #expect(wrong == unknown && unknown == noPassword && wrong?.status == .unauthorized)
        _ = try await accounts.updateAccount(name: "alice", AccountRequest(disabled: true))
        #expect(await serviceError { try await accounts.signIn(name: "alice", password: "a long enough password", code: nil) } == wrong)
    }

    @Test("ten failed sign-ins of an account lock it for a while, even for the right password; other accounts go on")
    func lockout() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        _ = try await Self.person(harness)
        _ = try await Self.person(harness, "bob")
        for _ in 0..<Int(SignInGuard.failures.burst) {
            #expect(
                await serviceError { try await accounts.signIn(name: "alice", password: "guess guess guess", code: nil) }?.status
                    == .unauthorized)
        }
        let locked = await serviceError { try await accounts.signIn(name: "alice", password: "a long enough password", code: nil) }
        #expect(locked?.status == .tooManyRequests && locked?.retryAfterSeconds != nil)
        #expect(try await accounts.signIn(name: "bob", password: "a long enough password", code: nil).name == "bob")
    }

    @Test("changing one's own password needs the current one")
    func ownPassword() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        let alice = try await Self.person(harness)
        let wrong = PasswordChange(current: "not the password", password: "another long password")
        #expect(await serviceError { try await accounts.changeOwnPassword(wrong, by: alice) }?.status == .unauthorized)
        try await accounts.changeOwnPassword(
            PasswordChange(current: "a long enough password", password: "another long password"), by: alice)
        #expect(try await accounts.signIn(name: "alice", password: "another long password", code: nil).name == "alice")
    }

    @Test("a second factor: confirmed with a code, then sign-in takes a code once, or a recovery code once; an owner can reset it")
    func twoFactor() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        let alice = try await Self.person(harness)
        let generation = try #require(try await harness.store.account(name: "alice")).generation
        let setup = try await accounts.startTwoFactor(by: alice)
        let totp = try #require(TOTP(base32: setup.secret))
        // Not confirmed yet: the password alone still signs in.
        #expect(try await accounts.signIn(name: "alice", password: "a long enough password", code: nil).hasTwoFactor == false)
        let now = harness.wallClock.secondsSinceEpoch()
        #expect(await serviceError { try await accounts.confirmTwoFactor(code: "000000", by: alice) }?.status == .badRequest)
        let recovery = try await accounts.confirmTwoFactor(code: totp.code(step: TOTP.step(at: now)), by: alice)
        #expect(recovery.codes.count == 10 && Set(recovery.codes).count == 10)
        #expect(try await harness.store.account(name: "alice")?.generation ?? 0 > generation)
        #expect(await serviceError { try await accounts.startTwoFactor(by: alice) }?.status == .conflict)

        let password = "a long enough password"
        let needed = await serviceError { try await accounts.signIn(name: "alice", password: password, code: nil) }
        #expect(needed?.code == .twoFactorRequired)
        // The code used to confirm is spent; the next step's works, once.
        #expect(
            await serviceError { try await accounts.signIn(name: "alice", password: password, code: totp.code(step: TOTP.step(at: now))) }
                != nil)
        harness.wallClock.advance(by: TOTP.period)
        let next = totp.code(step: TOTP.step(at: now + TOTP.period))
        #expect(try await accounts.signIn(name: "alice", password: password, code: next).hasTwoFactor)
        #expect(await serviceError { try await accounts.signIn(name: "alice", password: password, code: next) }?.status == .unauthorized)
        // A recovery code, typed any way, once.
        let code = recovery.codes[3]
        #expect(try await accounts.signIn(name: "alice", password: password, code: " " + code.uppercased() + " ").name == "alice")
        #expect(await serviceError { try await accounts.signIn(name: "alice", password: password, code: code) }?.status == .unauthorized)
        #expect(try await harness.store.account(name: "alice")?.twoFactor?.recoveryHashes.count == 9)
        // The authenticator is lost: an owner resets the second factor.
        try await accounts.resetTwoFactor(name: "alice")
        #expect(try await accounts.signIn(name: "alice", password: password, code: nil).hasTwoFactor == false)
        // Nothing secret is in what the API shows of the account.
        let shown = try await accounts.account(name: "alice").json.serialized()
        #expect(!shown.contains("scrypt") && !shown.contains(setup.secret))
    }

    @Test("two sign-ins with one code at the same time: one gets in, the other is refused; a recovery code likewise")
    func codeRace() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        let alice = try await Self.person(harness)
        let setup = try await accounts.startTwoFactor(by: alice)
        let totp = try #require(TOTP(base32: setup.secret))
        let now = harness.wallClock.secondsSinceEpoch()
        let recovery = try await accounts.confirmTwoFactor(code: totp.code(step: TOTP.step(at: now)), by: alice)
        harness.wallClock.advance(by: TOTP.period)
        for code in [totp.code(step: TOTP.step(at: now + TOTP.period)), recovery.codes[0]] {
            async let first = serviceError { try await accounts.signIn(name: "alice", password: "a long enough password", code: code) }
            async let second = serviceError { try await accounts.signIn(name: "alice", password: "a long enough password", code: code) }
            let outcomes = await [first, second]
            #expect(outcomes.filter { $0 == nil }.count == 1 && outcomes.contains { $0?.status == .unauthorized }, "\(outcomes)")
        }
    }

    @Test("sign-ins sent together cannot get past the account's budget: it is taken before the hash")
    func budgetTakenFirst() async throws {
        let harness = ServiceHarness()
        let accounts = harness.services.accounts
        _ = try await Self.person(harness)
        let outcomes = await withTaskGroup(of: ServiceError?.self) { group in
            for _ in 0..<16 {
                group.addTask { await serviceError { try await accounts.signIn(name: "alice", password: "guess guess guess", code: nil) } }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
        #expect(outcomes.filter { $0?.status == .unauthorized }.count == Int(SignInGuard.failures.burst))
        #expect(outcomes.filter { $0?.status == .tooManyRequests }.count == 16 - Int(SignInGuard.failures.burst))
        // The budget covers changing one's own password with a stolen token too.
        let alice = Caller(account: try await accounts.account(name: "alice"), credential: .apiToken(id: "at-stolen"))
        let guess = PasswordChange(current: "guess guess guess", password: "a new long password")
        #expect(await serviceError { try await accounts.changeOwnPassword(guess, by: alice) }?.status == .tooManyRequests)
    }

    @Test("the hasher runs two at a time, turns away what is past its queue with 503, and never computes an unaffordable hash")
    func hasherLimits() async throws {
        let hasher = PasswordHasher(concurrent: 1, maximumWaiting: 1)
        let gate = ManualGate()
        let first = Task { try await hasher.run { gate.wait() ? 1 : 0 } }
        try await Waiting.until(timeout: .seconds(30), "the first hash never started") { gate.isWaiting }
        let second = Task { try await hasher.run { 2 } }
        try await Waiting.until(timeout: .seconds(30), "the second hash never waited for a permit: \(hasher.waitingCount) waiting") {
            hasher.waitingCount >= 1
        }
        // The second waits; a third finds the queue full.
        let third = await serviceError { try await hasher.run { 3 } }
        #expect(third?.status == .serviceUnavailable && third?.code == .overloaded)
        gate.open()
        #expect(try await first.value == 1, "the first hash's gate did not open within 30 s")
        #expect(try await second.value == 2)
        let huge = try #require(
            PasswordHash(text: "scrypt$N=1073741824,r=8,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"))
        #expect(huge.verifies("anything") == false)
    }
}

/// A thread blocks in ``wait(timeout:)`` until ``open()``.
final class ManualGate: Sendable {
    private let state = Locked((waiting: false, open: false))

    var isWaiting: Bool { state.withLock { $0.waiting } }

    /// Blocks until ``open()``, and returns true; or returns false after `timeout`, so that a
    /// test that fails before opening the gate does not leave the thread blocked for good.
    func wait(timeout: Duration = .seconds(30)) -> Bool {
        state.withLock { $0.waiting = true }
        let deadline = ContinuousClock.now + timeout
        while !state.withLock({ $0.open }) {
            guard ContinuousClock.now < deadline else { return false }
            usleep(1000)
        }
        return true
    }

    func open() { state.withLock { $0.open = true } }
}
