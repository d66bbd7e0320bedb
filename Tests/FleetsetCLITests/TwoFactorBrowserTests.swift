import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Two-factor sign-in to the console in a real browser (Debian's chromium through
/// chromium-driver, driven by selenium from `Tests/Browser/two_factor_browser.py`), against two
/// real server instances on one PostgreSQL: a password, then a second factor set up from the
/// QR code the server draws (read back with zbarimg) and a code computed by pyotp; a wrong code
/// refused; the session accepted by the other instance, and ended there by signing out here.
///
/// Screenshots and the axe results go to `.build/two-factor-screenshots/`. It needs what the
/// console's browser test needs (`scripts/install-deps`, `scripts/python-tools`), and zbarimg;
/// `scripts/test` requires them (`FLEETSET_REQUIRE_PYTHON_TOOLS`).
@Suite("Two-factor sign-in in a real browser, across two instances")
struct TwoFactorBrowserTests {
    static let script = TestTools.repository + "/Tests/Browser/two_factor_browser.py"
    static let screenshots = TestTools.repository + "/.build/two-factor-screenshots"
    static let toolsPresent = TestTools.browserPresent && TestTools.present("/usr/bin/zbarimg")

    @Test(
        "password, a QR code read back, pyotp's code; a wrong code refused; sign-out here ends the session the other instance accepted",
        .enabled(if: toolsPresent || TestTools.required), .timeLimit(.minutes(5)))
    func twoFactorInChromium() async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let database = try await PostgresCluster.shared().makeDatabase()
        // The two instances share the database and the admin token file, as behind a balancer.
        let cheapPasswords = ["--password-cost", "10", "--log-level", "info"]
        let a = try await ServerProcess.start(in: directory, database: database, extraArguments: cheapPasswords)
        defer { a.kill() }
        let b = try await ServerProcess.start(in: directory, database: database, extraArguments: cheapPasswords)
        defer { b.kill() }
        let token = try String(contentsOfFile: directory + "/admin.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        let owner = FleetClient(http: http, baseURL: a.url, token: token)
        let password = "a browser's long password"
        _ = try await owner.createAccount(AccountRequest(name: "alice", displayName: "Alice", kind: .person, role: .viewer))
        try await owner.setPassword(account: "alice", to: password)

        try? FileManager.default.removeItem(atPath: Self.screenshots)
        let results = Self.screenshots + "/axe-results.json"
        let browser = try RunningProcess(
            TestTools.python,
            [
                Self.script, "--a", a.url, "--b", b.url, "--name", "alice", "--password", password, "--screenshots", Self.screenshots,
                "--results", results,
            ], standardOutputToLog: true)
        defer { browser.kill() }
        let status = await browser.waitForExit(timeout: .seconds(240))
        #expect(status == 0, "the browser steps failed:\n\(browser.log)\nA:\n\(a.log)\nB:\n\(b.log)")
        #expect(browser.log.contains("ALL OK"))

        let axe = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: results))))
        let pages = axe.objectValue?.keys ?? []
        #expect(
            Set(pages).isSuperset(of: ["sign-in-refused", "account", "two-factor-setup", "recovery-codes", "sign-in-code"]),
            "pages checked: \(pages)")
        for page in pages { #expect(axe[page]?["seriousOrCritical"] == 0, "\(page): \(axe[page]?.serialized() ?? "")") }

        // The trail has it all: the refused password, the sign-ins, the refused code, both instances.
        let trail = try await owner.audit(who: "alice").entries
        let signIns = trail.filter { $0.action.hasPrefix("console.sign-in") }.map { "\($0.action) \($0.status)" }
        #expect(signIns.contains("console.sign-in.code 401") && signIns.contains("console.sign-in.code 303"), "\(signIns)")
        #expect(try await owner.account(name: "alice").hasTwoFactor)
        // Neither the password nor the session cookie reached either log.
        let cookieLine = browser.log.split(separator: "\n").first { $0.hasPrefix("session-cookie ") }
        let cookie = try #require(cookieLine.map { String($0.dropFirst("session-cookie ".count)) })
        let secret = try #require(cookie.split(separator: ":").dropFirst().first.map(String.init))
        #expect(secret.count >= 40)
        for log in [a.log, b.log] { #expect(!log.contains(password) && !log.contains(secret)) }
        await http.shutdown()
    }
}
