import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A real OpenID Provider that nobody here wrote, for the single sign-on tests:
/// django-oauth-toolkit on Django (`Tests/OIDC/provider`, its packages pinned in
/// `scripts/python-tools`), on 127.0.0.1 with its state in a folder of its own. Its people,
/// groups and clients are `Tests/OIDC/provider/spec.example.json`'s.
public struct OpenIDProvider: Sendable {
    /// The provider's files: `start-op.sh`, the scripts that drive it.
    public static let folder = TestTools.repository + "/Tests/OIDC/provider"
    /// Whether its Python packages are installed.
    public static let present =
        TestTools.present(TestTools.python)
        && (try? Process.run(URL(fileURLWithPath: TestTools.python), arguments: ["-c", "import oauth2_provider"]))
            .map { process -> Bool in
                process.waitUntilExit()
                return process.terminationStatus == 0
            } ?? false

    public let issuer: String
    /// Its state: the database, `keys/active.pem` (its signing key), its log.
    public let directory: String
    public let port: Int

    /// Starts a provider whose console client sends browsers back to
    /// `http://127.0.0.1:<relyingPartyPort>/console/sso/callback`.
    public static func start(relyingPartyPort: Int) async throws -> OpenIDProvider {
        let directory = try CLIRunner.temporaryDirectory().path
        let port = try TestTools.freePort()
        let start = try RunningProcess(
            folder + "/start-op.sh", [String(port)],
            environment: ["OP_DIR": directory, "RP_PORT": String(relyingPartyPort), "OP_PYTHON": TestTools.python],
            standardOutputToLog: true)
        guard await start.waitForExit(timeout: .seconds(120)) == 0 else { throw ProcessFailed(log: start.log) }
        return OpenIDProvider(issuer: "http://127.0.0.1:\(port)", directory: directory, port: port)
    }

    /// Stops it and removes its folder.
    public func stop() {
        if let pid = try? String(contentsOfFile: directory + "/pid", encoding: .utf8),
            let number = Int32(pid.trimmingCharacters(in: .whitespacesAndNewlines))
        {
            kill(number, SIGTERM)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// What it logged.
    public var log: String { (try? String(contentsOfFile: directory + "/server.log", encoding: .utf8)) ?? "" }

    /// An ID token for the console's client, for `user` signed in through the provider's own
    /// form, with `nonce` (`Tests/OIDC/provider/id_token.py`).
    public func idToken(user: String, password: String, nonce: String, relyingPartyPort: Int = 9000) async throws -> String {
        try await tokens(user: user, password: password, nonce: nonce, relyingPartyPort: relyingPartyPort).idToken
    }

    /// The ID token and the access token the console's client gets for `user` (see ``idToken(user:password:nonce:relyingPartyPort:)``).
    public func tokens(user: String, password: String, nonce: String, relyingPartyPort: Int = 9000) async throws -> (
        idToken: String, accessToken: String
    ) {
        let run = try RunningProcess(
            TestTools.python, [Self.folder + "/id_token.py", issuer, String(relyingPartyPort), user, password, nonce],
            standardOutputToLog: true)
        guard await run.waitForExit(timeout: .seconds(60)) == 0 else { throw ProcessFailed(log: run.log) }
        let lines = run.log.split(separator: "\n")
        guard let idToken = lines.last(where: { $0.hasPrefix("eyJ") }),
            let access = lines.last(where: { $0.hasPrefix("access_token ") })?.dropFirst("access_token ".count)
        else { throw ProcessFailed(log: run.log) }
        return (String(idToken), String(access))
    }

    /// A new signing key at the provider (the old one stays published), taken at once.
    public func rotateKey() async throws {
        let run = try RunningProcess(Self.folder + "/rotate-key.sh", [directory], standardOutputToLog: true)
        guard await run.waitForExit(timeout: .seconds(60)) == 0 else { throw ProcessFailed(log: run.log) }
    }

    /// A token signed with the provider's own signing key (`Tests/OIDC/provider/mint_token.py`):
    /// what the provider could have issued, with the claims a test wants (`--aud`, `--exp-in`,
    /// `--sub`…); with `forgedKey`, signed with a key of its own under the provider's key id.
    public func mint(_ arguments: [String], forgedKey: Bool = false) async throws -> String {
        let run = try RunningProcess(
            TestTools.python,
            [Self.folder + "/mint_token.py", "--key", directory + "/keys/active.pem", "--iss", issuer] + arguments
                + (forgedKey ? ["--forge"] : []),
            standardOutputToLog: true)
        guard await run.waitForExit(timeout: .seconds(60)) == 0 else { throw ProcessFailed(log: run.log) }
        guard let token = run.log.split(separator: "\n").last(where: { $0.hasPrefix("eyJ") }) else { throw ProcessFailed(log: run.log) }
        return String(token)
    }
}
