import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import Foundation
import Testing

/// Accounts and API tokens over HTTP: what their audit entries say, tokens that cannot outlive
/// their maker, secrets pasted into ids, and the console's sessions following the owner account.
@Suite("Accounts over HTTP")
struct AccountRouteTests {
    @Test("an audit entry says what the body set, names the account of a refused token, and never keeps a pasted secret")
    func auditEntries() async throws {
        try await TestFleetServer.with { server in
            _ = try await server.admin.createAccount(AccountRequest(name: "ci", kind: .service, role: .viewer))
            let made = try await server.admin.createAPIToken(APITokenRequest(name: "scrape", expiresIn: 3600, account: "ci"))
            _ = try await server.admin.revokeAPIToken(id: made.info.id)
            let refused = try await server.raw(.get, "/v1/admin/whoami", token: made.token)
            #expect(refused.status == 401)
            let secret = "fsk_" + String(repeating: "A", count: 43)
            #expect(try await server.raw(.delete, "/v1/admin/tokens/\(secret)", token: TestFleetServer.adminToken).status == 404)
            let entries = try await server.admin.audit().entries
            let created = try #require(entries.first { $0.action == "createAccount" })
            #expect(created.target.contains("account=ci") && created.target.contains("role=viewer"), "\(created.target)")
            let minted = try #require(entries.first { $0.action == "createAPIToken" })
            #expect(minted.target.contains("for=ci") && minted.target.contains("token-name=scrape"), "\(minted.target)")
            let refusal = try #require(entries.first { $0.action == "getCaller" })
            #expect(refusal.status == 401 && refusal.actor == "ci" && refusal.credential == "token \(made.info.id)")
            let pasted = try #require(entries.first { $0.action == "revokeAPIToken" && $0.status == 404 })
            #expect(!pasted.target.contains(secret) && !pasted.detail.contains(secret) && pasted.target.contains("fsk_…"), "\(pasted)")
            #expect(!server.log.all.joined().contains(secret))
        }
    }

    @Test("a token made with a token expires no later than it; a groups-limited viewer cannot see a rollout's devices")
    func tokenLifetimeAndRolloutStatus() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            _ = try await server.admin.createAccount(AccountRequest(name: "ed", role: .editor, scope: AccountScope(apps: ["kiosk"])))
            let short = try await server.admin.createAPIToken(APITokenRequest(name: "short", expiresIn: 600, account: "ed"))
            let minted = try await server.client(token: short.token).createAPIToken(APITokenRequest(name: "long", expiresIn: 400 * 86_400))
            #expect(minted.info.expiresAt == short.info.expiresAt)
            _ = try await server.admin.createAccount(
                AccountRequest(name: "lobby", role: .viewer, scope: AccountScope(apps: ["kiosk"], groups: ["lobby"])))
            let viewer = try await server.admin.createAPIToken(APITokenRequest(name: "v", account: "lobby"))
            let status = try await server.raw(.get, "/v1/admin/apps/kiosk/rollout", token: viewer.token)
            #expect(status.status == 403, "\(String(decoding: status.body, as: UTF8.self))")
        }
    }

    @Test("console sessions end at once when the owner account is no longer an owner, and it cannot sign in again")
    func consoleFollowsOwner() async throws {
        try await ConsoleRouteTests.withVisitor { server, visitor in
            #expect(try await visitor.signIn().status == 303)
            #expect(try await visitor.request(.get, "/console/apps").status == 200)
            _ = try await server.admin.createAccount(AccountRequest(name: "second", role: .owner))
            _ = try await server.admin.updateAccount(name: Authenticator.bootstrapOwner, AccountRequest(role: .admin))
            #expect(try await visitor.request(.get, "/console/apps").status == 303)
            visitor.cookie = nil
            #expect(try await visitor.signIn().status == 401)
        }
    }
}
