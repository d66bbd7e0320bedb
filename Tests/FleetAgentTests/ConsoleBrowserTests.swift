import Curl
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetTestSupport
import Foundation
import Testing

/// The admin console in a real browser (Debian's chromium through chromium-driver, driven by
/// selenium from `Tests/Browser/console_browser.py`), against a real server with a real agent
/// that applies what the browser changes. The script signs in, changes a setting and waits for
/// `settings.json`, enters an invalid value and finds the message next to its field, adds and
/// moves a list item, resets a device value to inherited, watches the roll-up change live when
/// the agent reports, reviews a metadata upload, makes and revokes an enrollment token, signs
/// out, and replays and forges forms (403). Every page is checked with axe-core.
///
/// Screenshots and the axe results go to `.build/console-screenshots/`. Like the contract tests,
/// it needs `.build/python-tools` (`scripts/python-tools`) and chromium (`scripts/install-deps`):
/// without them it is skipped with a message, unless `FLEETSET_REQUIRE_PYTHON_TOOLS` is set
/// (as `scripts/test` does), and then it fails.
@Suite("The admin console in a real browser")
struct ConsoleBrowserTests {
    static let script = TestTools.repository + "/Tests/Browser/console_browser.py"
    static let screenshots = TestTools.repository + "/.build/console-screenshots"
    static let toolsPresent = TestTools.browserPresent
    static let toolsRequired = TestTools.required

    @Test("the browser and its driver are there when the test command requires them")
    func toolsInstalled() {
        if !Self.toolsPresent && !Self.toolsRequired {
            print("ConsoleBrowserTests: skipped — run scripts/install-deps and scripts/python-tools for chromium and selenium")
        }
        #expect(Self.toolsPresent || !Self.toolsRequired, "FLEETSET_REQUIRE_PYTHON_TOOLS is set but chromium or selenium is missing")
    }

    @Test("over TLS the session cookie is Secure, and the console's pages come over HTTP/2 like the API")
    func secureCookieOverTLS() async throws {
        let fleet = try await Fleet.start(tls: true)
        defer { Task { await fleet.stop() } }
        let token = try String(contentsOfFile: fleet.directory + "/admin.token", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        try await withHTTPClient(configuration: .init(tls: .init(caFile: fleet.certificateFile), maxRedirects: 0)) { http in
            var request = HTTPClient.Request(method: .post, url: fleet.server.url + "/console/sign-in")
            request.headers["Content-Type"] = "application/x-www-form-urlencoded"
            request.body = Array("token=\(token)".utf8)
            let signedIn = try await http.execute(request)
            #expect(signedIn.status == 303)
            let cookie = signedIn.headers["Set-Cookie"] ?? ""
            #expect(cookie.hasPrefix("fleetset_console=") && cookie.hasSuffix("; HttpOnly; SameSite=Strict; Secure"), "\(cookie)")
            var page = HTTPClient.Request(method: .get, url: fleet.server.url + "/console/apps")
            page.headers["Cookie"] = String(cookie.prefix { $0 != ";" })
            let apps = try await http.execute(page)
            #expect(apps.status == 200 && apps.httpVersion == .http2)
        }
    }

    @Test(
        "sign in, a form change a real agent applies, an error by its field, a list item, a reset, a live roll-up, sign out, replays refused",
        .enabled(if: toolsPresent), .timeLimit(.minutes(5)))
    func consoleInChromium() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let metadata = try Data(contentsOf: URL(fileURLWithPath: TestTools.repository + "/Tests/Browser/kiosk.metadata.json"))
        _ = try await fleet.admin.putMetadata(app: "kiosk", document: Array(metadata))
        let agent = try await fleet.launchAgent([["id": "kiosk"]], storeMetadata: false)
        defer { agent.kill() }
        try await fleet.waitForStatusLine("kiosk", containing: ["state=applied"], agent: agent)
        let device = try fleet.identity().deviceId
        try? FileManager.default.removeItem(atPath: Self.screenshots)
        let results = Self.screenshots + "/axe-results.json"
        let browser = try RunningProcess(
            TestTools.python,
            [
                Self.script, "--url", fleet.server.url, "--admin-token-file", fleet.directory + "/admin.token", "--device", device,
                "--settings-file", fleet.layout.settingsFile("kiosk").path, "--cli", CLIRunner.product("fleetset"), "--agent-config",
                fleet.configurationFile, "--screenshots", Self.screenshots, "--results", results,
            ], standardOutputToLog: true)
        defer { browser.kill() }
        let status = await browser.waitForExit(timeout: .seconds(240))
        #expect(status == 0, "the browser steps failed:\n\(browser.log)\nserver log:\n\(fleet.server.log)")
        #expect(browser.log.contains("all console steps passed"))

        // Every page was checked, and none has a serious or critical accessibility violation.
        let axe = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: results))))
        let pages = axe.objectValue?.keys ?? []
        #expect(
            Set(pages).isSuperset(of: [
                "sign-in", "apps", "settings", "settings-error", "apps-live", "devices", "device", "metadata-preview", "tokens", "history",
            ]),
            "pages checked: \(pages)")
        for page in pages {
            #expect(axe[page]?["seriousOrCritical"] == 0, "\(page): \(axe[page]?.serialized() ?? "")")
        }
        // The admin token never reached the server's log or the browser's pages.
        let token = try String(contentsOfFile: fleet.directory + "/admin.token", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(!fleet.server.log.contains(token))
    }
}
