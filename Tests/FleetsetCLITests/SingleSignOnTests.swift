import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Single sign-on against a real OpenID Provider that nobody here wrote (django-oauth-toolkit,
/// `Tests/OIDC/provider`) and a real `fleetset-server`: the console's authorization code flow
/// in chromium through the provider's own login page (`Tests/Browser/sso_browser.py`: roles
/// from groups, an editor of kiosk refused payments, a person without a role refused, a
/// replayed state and another browser's callback refused, a key rotation), the CLI's device
/// grant approved in the browser and `fleetset admin devices` run with its token; then ID
/// tokens sent as the CLI would: forged, expired and meant for another client, refused.
///
/// It needs the browser tests' tools and the provider's Python packages (`scripts/install-deps`,
/// `scripts/python-tools`); `scripts/test` requires them (`FLEETSET_REQUIRE_PYTHON_TOOLS`).
@Suite("Single sign-on with a real OpenID Provider", .serialized)
struct SingleSignOnTests {
    static let script = TestTools.repository + "/Tests/Browser/sso_browser.py"
    static let screenshots = TestTools.repository + "/.build/sso-screenshots"
    static let clientSecret = "console-secret"

    static let kiosk =
        #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"volume": {"type": "integer", "default": 5}}}}"#
    static let payments =
        #"{"app": "payments", "version": 1, "schema": {"type": "object", "properties": {"limit": {"type": "integer", "default": 50}}}}"#

    /// Runs `body` with a provider, a server on a port chosen first (the provider must know where
    /// to send browsers back) signing in through it, and the server's admin token; stops both after.
    static func withServer(
        extra: [String] = [], _ body: (ServerProcess, OpenIDProvider, String) async throws -> Void
    ) async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let port = try TestTools.freePort()
        let provider = try await OpenIDProvider.start(relyingPartyPort: port)
        defer { provider.stop() }
        let server = try await Self.server(in: directory, port: port, provider: provider, extra: extra)
        defer { server.kill() }
        let token = try String(contentsOfFile: directory + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        try await body(server, provider, token)
    }

    static func server(in directory: String, port: Int, provider: OpenIDProvider, extra: [String]) async throws -> ServerProcess {
        let secretFile = directory + "/oidc-client-secret"
        _ = FileManager.default.createFile(
            atPath: secretFile, contents: Data((clientSecret + "\n").utf8), attributes: [.posixPermissions: 0o600])
        return try await ServerProcess.start(
            in: directory, port: port,
            extraArguments: [
                "--password-cost", "10", "--log-level", "debug", "--oidc-issuer", provider.issuer, "--oidc-client-id", "fleetset-console",
                "--oidc-client-secret-file", secretFile, "--oidc-redirect-uri", "http://127.0.0.1:\(port)/console/sso/callback",
                "--oidc-cli-client-id", "fleetset-cli", "--oidc-role", "fleet-admins=admin", "--oidc-role", "fleet-viewers=viewer",
                "--oidc-role", "kiosk-devs=editor:apps=kiosk", "--oidc-keys-refresh-interval", "1", "--oidc-provider-name", "Test OP",
            ] + extra)
    }

    @Test(
        "the console through the provider's login page, roles from groups, refusals; the CLI's device grant; forged, expired and other clients' ID tokens refused",
        .enabled(if: (TestTools.browserPresent && OpenIDProvider.present) || TestTools.required), .timeLimit(.minutes(6)))
    func singleSignOn() async throws {
        try await Self.withServer { server, provider, token in try await Self.consoleAndCLI(server, provider, token) }
    }

    static func consoleAndCLI(_ server: ServerProcess, _ provider: OpenIDProvider, _ token: String) async throws {
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        defer { Task { await http.shutdown() } }
        let owner = FleetClient(http: http, baseURL: server.url, token: token)
        _ = try await owner.putMetadata(app: "kiosk", document: Array(Self.kiosk.utf8))
        _ = try await owner.putMetadata(app: "payments", document: Array(Self.payments.utf8))
        // A local account named as a person at the provider is never taken over by them.
        _ = try await owner.createAccount(AccountRequest(name: "bob", displayName: "Local Bob", kind: .person, role: .owner))

        try? FileManager.default.removeItem(atPath: Self.screenshots)
        let results = Self.screenshots + "/axe-results.json"
        let browser = try RunningProcess(
            TestTools.python,
            [
                Self.script, "--server", server.url, "--issuer", provider.issuer, "--provider-dir", provider.directory, "--rotate",
                OpenIDProvider.folder + "/rotate-key.sh", "--fleetset", CLIRunner.product("fleetset"), "--screenshots", Self.screenshots,
                "--results", results,
            ], standardOutputToLog: true)
        defer { browser.kill() }
        let status = await browser.waitForExit(timeout: .seconds(300))
        #expect(status == 0, "the browser steps failed:\n\(browser.log)\nserver:\n\(server.log)\nprovider:\n\(provider.log)")
        #expect(browser.log.contains("ALL OK"))
        let axe = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: results))))
        for (page, result) in axe.objectValue ?? [:] { #expect(result["seriousOrCritical"] == 0, "\(page): \(result.serialized())") }

        // Accounts made just in time, each bound to its subject, with the role its groups map to.
        let accounts = Dictionary(uniqueKeysWithValues: try await owner.accounts().accounts.map { ($0.name, $0) })
        #expect(accounts["alice"]?.role == .admin)
        #expect(accounts["carol"]?.role == .editor && accounts["carol"]?.scope.apps == ["kiosk"])
        #expect(accounts["dave"] == nil, "a person whose groups grant nothing gets no account")
        // The provider's bob is not the local bob: refused, the local account unchanged.
        #expect(accounts["bob"]?.role == .owner && accounts["bob"]?.displayName == "Local Bob")
        let trail = try await owner.audit(action: "sso.sign-in").entries
        let signedIn = trail.filter { $0.outcome == "ok" }
        #expect(
            signedIn.contains { $0.actor == "alice" && $0.detail.contains("issuer=\(provider.issuer)") && $0.detail.contains("role=admin") }
        )
        #expect(signedIn.contains { $0.actor == "alice" && $0.credential == "single sign-on" }, "the CLI's sign-in: \(trail)")
        let refusals = trail.filter { $0.status == 401 }.map(\.detail)
        #expect(refusals.contains { $0.contains("grant no role") })
        #expect(refusals.contains { $0.contains("used already") })
        #expect(refusals.contains { $0.contains("another browser") })
        #expect(refusals.contains { $0.contains("not bound to this identity") })

        // The token the CLI kept works as alice's.
        let config = try #require(browser.log.split(separator: "\n").first { $0.hasPrefix("cli-config ") }).dropFirst("cli-config ".count)
        let kept = try String(contentsOfFile: config + "/fleetset/admin-token", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(try await FleetClient(http: http, baseURL: server.url, token: kept).whoami().account.name == "alice")

        // ID tokens as the CLI would send them: one the provider's key signed for the CLI's client
        // is taken once; forged, expired and other clients' are refused, each for its reason.
        let anonymous = FleetClient(http: http, baseURL: server.url, token: nil)
        func refusal(_ idToken: String) async -> String { await Self.answer(anonymous, idToken: idToken) }
        let viewer = ["--aud", "fleetset-cli", "--sub", "minted-viewer", "--username", "minted", "--groups", "fleet-viewers"]
        let good = try await provider.mint(viewer)
        #expect(await refusal(good) == "accepted")
        #expect(await refusal(good).contains("used already"))
        #expect(await refusal(try await provider.mint(viewer, forgedKey: true)).contains("signature does not verify"))
        #expect(await refusal(try await provider.mint(viewer + ["--exp-in", "-120", "--iat-ago", "400"])).contains("expired"))
        let console = ["--aud", "fleetset-console", "--sub", "minted-viewer", "--groups", "fleet-viewers"]
        #expect(await refusal(try await provider.mint(console)).contains("not this server (fleetset-cli)"))

        // Access tokens as the CLI sends them when the provider gives no ID token: one the provider
        // issued to the console's client (another application) is refused, as is one it does not know.
        let consoleTokens = try await provider.tokens(user: "alice", password: "alice-pw", nonce: "n-access", relyingPartyPort: server.port)
        #expect(await Self.answer(anonymous, accessToken: consoleTokens.accessToken).contains("issued to another client"))
        #expect(await Self.answer(anonymous, accessToken: "not-a-token-the-provider-issued").contains("not active"))

        // Neither the client secret nor a token reached the log.
        for secret in [Self.clientSecret, good, kept, consoleTokens.accessToken] { #expect(!mentions(server.log, secret: secret)) }
    }

    /// What the server answers a token sent as the CLI sends one: `accepted`, or the refusal.
    static func answer(_ client: FleetClient, idToken: String? = nil, accessToken: String? = nil) async -> String {
        do {
            _ = try await client.signIn(SingleSignOnSignIn(idToken: idToken, accessToken: accessToken))
            return "accepted"
        } catch let error as FleetClientError {
            if case .refused(let status, let body, _) = error { return "\(status) \(body?.message ?? "")" }
            return "\(error)"
        } catch {
            return "\(error)"
        }
    }

    @Test(
        "--no-password-sign-in: names and passwords refused in the console and the API; the admin token file still signs in",
        .enabled(if: OpenIDProvider.present || TestTools.required), .timeLimit(.minutes(3)))
    func passwordsOff() async throws {
        try await Self.withServer(extra: ["--no-password-sign-in"]) { server, _, token in try await Self.passwordsRefused(server, token) }
    }

    static func passwordsRefused(_ server: ServerProcess, _ token: String) async throws {
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0)) { http in
            let owner = FleetClient(http: http, baseURL: server.url, token: token)
            _ = try await owner.createAccount(AccountRequest(name: "erin", displayName: "Erin", kind: .person, role: .viewer))
            try await owner.setPassword(account: "erin", to: "a long enough password")
            let anonymous = FleetClient(http: http, baseURL: server.url, token: nil)
            let refusal = await #expect(throws: FleetClientError.self) {
                _ = try await anonymous.signIn(SignInRequest(name: "erin", password: "a long enough password"))
            }
            guard case .refused(let status, let body, _)? = refusal else {
                Issue.record("not refused: \(String(describing: refusal))"); return
            }
            #expect(status == 403 && body?.error == .passwordSignInOff, "\(status) \(String(describing: body))")
            func post(_ form: String) async throws -> HTTPClient.Response {
                try await http.execute(
                    HTTPClient.Request(
                        method: .post, url: server.url + "/console/sign-in",
                        headers: ["Content-Type": "application/x-www-form-urlencoded", "Origin": server.url], body: Array(form.utf8)))
            }
            let password = try await post("name=erin&password=a+long+enough+password")
            #expect(password.status == 403 && String(decoding: password.body, as: UTF8.self).contains("Sign in with"))
            let page = try await http.execute(HTTPClient.Request(url: server.url + "/console/sign-in"))
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains("Sign in with Test OP") && !html.contains("id=\"password\""))
            let admin = try await post("token=\(PercentEncoding.encoded(token))")
            #expect(admin.status == 303 && admin.headers["Set-Cookie"]?.hasPrefix("fleetset_console=") == true)
        }
    }
}
