import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import Foundation
import Testing

/// Sign-in over HTTP with a password and a second factor, the codes computed by an independent
/// TOTP (PyPI's pyotp, in `.build/python-tools`).
@Suite("Sign-in and two factors over HTTP")
struct TwoFactorRouteTests {
    static let python = ContractTests.tools + "/python"
    static let pyotpPresent = FileManager.default.isExecutableFile(atPath: python)

    /// pyotp's code for `secret` at `time`.
    static func pyotp(_ secret: String, at time: Int64) async throws -> String {
        let result = try await ContractTests.run(
            python, ["-c", "import pyotp, sys; sys.stderr.write(pyotp.TOTP('\(secret)').at(\(time)))"])
        #expect(result.status == 0, "\(result.output)")
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test("the server's TOTP and pyotp give the same codes", .enabled(if: pyotpPresent))
    func sameCodesAsPyotp() async throws {
        for _ in 0..<3 {
            let totp = TOTP.generate()
            for time: Int64 in [0, 59, 1_111_111_109, 1_790_000_000, 4_102_444_800] {
                #expect(try await Self.pyotp(totp.base32, at: time) == totp.code(step: TOTP.step(at: time)), "at \(time)")
            }
        }
    }

    @Test(
        "a person signs in for a personal token; with a second factor set up by pyotp's codes, sign-in takes one, once",
        .enabled(if: pyotpPresent))
    func signIn() async throws {
        try await TestFleetServer.with { server in
            _ = try await server.admin.createAccount(
                AccountRequest(name: "alice", displayName: "Alice", role: .editor, scope: AccountScope(apps: ["kiosk"])))
            try await server.admin.setPassword(account: "alice", to: "correct horse battery")
            let anonymous = server.client(token: nil)
            let wrong = await refusal { try await anonymous.signIn(SignInRequest(name: "alice", password: "wrong horse battery")) }
            #expect(wrong?.status == 401 && wrong?.code == .unauthenticated)
            let made = try await anonymous.signIn(SignInRequest(name: "alice", password: "correct horse battery", tokenName: "laptop"))
            #expect(made.token.hasPrefix("fsk_") && made.info.name == "laptop" && made.info.account == "alice")
            let alice = server.client(token: made.token)
            #expect(try await alice.whoami().account.name == "alice")

            let setup = try await alice.startTwoFactor()
            #expect(setup.uri.contains("secret=\(setup.secret)"))
            let now = server.clock.secondsSinceEpoch()
            let recovery = try await alice.confirmTwoFactor(code: try await Self.pyotp(setup.secret, at: now))
            #expect(recovery.codes.count == 10)
            let needed = await refusal { try await anonymous.signIn(SignInRequest(name: "alice", password: "correct horse battery")) }
            #expect(needed?.status == 401 && needed?.code == .twoFactorRequired)
            let badCode = await refusal {
                try await anonymous.signIn(SignInRequest(name: "alice", password: "correct horse battery", code: "000000"))
            }
            #expect(badCode?.status == 401 && badCode?.code == .unauthenticated)
            server.clock.advance(by: 30)
            let code = try await Self.pyotp(setup.secret, at: server.clock.secondsSinceEpoch())
            _ = try await anonymous.signIn(SignInRequest(name: "alice", password: "correct horse battery", code: code))
            let replay = await refusal {
                try await anonymous.signIn(SignInRequest(name: "alice", password: "correct horse battery", code: code))
            }
            #expect(replay?.status == 401, "a code is good once")

            // Every sign-in is in the audit trail; no password, code or token is in it or in the log.
            let entries = try await server.admin.audit(action: "signIn").entries
            #expect(entries.map(\.status) == [401, 201, 401, 401, 201, 401] && entries.allSatisfy { $0.actor == "alice" })
            let kept = entries.map { $0.json.serialized() }.joined() + server.log.all.joined()
            for secret in ["correct horse battery", setup.secret, code, made.token] {
                #expect(!kept.contains(secret), "\(secret) was kept")
            }
            #expect(try await server.admin.account(name: "alice").hasTwoFactor)
        }
    }
}
