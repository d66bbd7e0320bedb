import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Synchronization
import Testing

/// `fleetset-server` run as a process, as an admin runs it, driven by `fleetset admin` and
/// stopped with a real SIGTERM.
@Suite("fleetset-server process and fleetset admin")
struct ServerProcessTests {
    @Test(
        "started with a low open-file limit, the server raises it to the hard limit, logs it, and holds long-polls up to it less a reserve")
    func openFileLimit() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try RunningProcess(
            "/usr/bin/prlimit",
            [
                "--nofile=256:", "--", CLIRunner.product("fleetset-server"), "serve", "--database", directory.path + "/fleet.sqlite",
                "--listen", "127.0.0.1:0", "--admin-token-file", directory.path + "/admin.token",
            ])
        defer { server.kill() }
        let line = try await server.waitForLog("event=open-files")
        _ = try await server.waitForLog("event=listening")
        let limits = try String(contentsOfFile: "/proc/\(server.pid)/limits", encoding: .utf8)
        let openFiles = try #require(limits.split(separator: "\n").first { $0.hasPrefix("Max open files") })
        let numbers = openFiles.split(separator: " ").compactMap { Int($0) }
        #expect(numbers.count == 2 && numbers[0] == numbers[1], "the soft limit is the hard one: \(openFiles)")
        let hard = try #require(numbers.last)
        #expect(hard > 256)
        let fields = Dictionary(
            line.split(separator: " ").compactMap { field -> (String, String)? in
                let parts = field.split(separator: "=", maxSplits: 1)
                return parts.count == 2 ? (String(parts[0]), String(parts[1]).trimmingCharacters(in: .whitespacesAndNewlines)) : nil
            }, uniquingKeysWith: { first, _ in first })
        #expect(fields["was"] == "256" && fields["soft"] == "\(hard)" && fields["hard"] == "\(hard)", "\(line)")
        #expect(fields["max_long_polls"] == "\(hard - min(1000, hard / 4))", "\(line)")
        // Given on the command line, the most long-polls is that.
        let capped = try RunningProcess(
            CLIRunner.product("fleetset-server"),
            [
                "serve", "--database", directory.path + "/other.sqlite", "--listen", "127.0.0.1:0", "--admin-token-file",
                directory.path + "/admin.token", "--max-long-polls", "500",
            ])
        defer { capped.kill() }
        #expect(try await capped.waitForLog("event=open-files").contains("max_long_polls=500"))
    }

    @Test("an admin token shorter than 32 characters is taken, with a warning that names the file and never the token")
    func shortAdminToken() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokenFile = directory.path + "/short.token"
        #expect(
            FileManager.default.createFile(
                atPath: tokenFile, contents: Data("fsa_short-but-16+\n".utf8), attributes: [.posixPermissions: 0o600]))
        let server = try RunningProcess(
            CLIRunner.product("fleetset-server"),
            ["serve", "--database", directory.path + "/fleet.sqlite", "--listen", "127.0.0.1:0", "--admin-token-file", tokenFile])
        defer { server.kill() }
        let line = try await server.waitForLog("event=admin-token-weak")
        #expect(line.contains("file=\(tokenFile)") && line.contains("level=warning"), "\(line)")
        _ = try await server.waitForLog("event=listening")
        #expect(!server.log.contains("fsa_short-but-16+"))
        // A generated token is not weak.
        let fresh = try RunningProcess(
            CLIRunner.product("fleetset-server"),
            [
                "serve", "--database", directory.path + "/other.sqlite", "--listen", "127.0.0.1:0", "--admin-token-file",
                directory.path + "/fresh.token",
            ])
        defer { fresh.kill() }
        _ = try await fresh.waitForLog("event=listening")
        #expect(!fresh.log.contains("admin-token-weak"))
    }

    @Test("the admin CLI manages a real server; SIGTERM answers a waiting long-poll and exits 0")
    func adminAndShutdown() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let tokenFile = directory.appendingPathComponent("admin.token").path
        #expect(try Self.mode(tokenFile) == 0o600)
        #expect(try Self.mode(directory.appendingPathComponent("fleet.sqlite").path) & 0o077 == 0)
        let adminToken = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(adminToken.hasPrefix("fsa_"))

        let common = ["--server", "http://127.0.0.1:\(server.port)", "--token-file", tokenFile]
        let signage = Shared.repository.appendingPathComponent("Config/examples/signage.SettingsSchema.json").path
        let put = try await CLIRunner.run(["admin", "put-metadata", "--moki", signage, "--writable", "brightness"] + common)
        #expect(put.status == 0 && put.standardOutput == "signage: metadata version 4 stored (first version)\n", "\(put)")
        let again = try await CLIRunner.run(["admin", "put-metadata", "--moki", signage] + common)
        #expect(again.status == 1)
        #expect(again.standardError.contains("409 version-not-increased: version 4 is not greater than the stored version 4"))

        let enrollFile = directory.appendingPathComponent("enroll.token").path
        let token = try await CLIRunner.run(
            ["admin", "enrollment-token", "--out", enrollFile, "--app", "signage", "--group", "lobby"] + common)
        #expect(token.status == 0 && token.standardOutput.contains("written to \(enrollFile)"))
        #expect(try Self.mode(enrollFile) == 0o600)
        let enrollmentToken = try String(contentsOfFile: enrollFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(!token.standardOutput.contains(enrollmentToken))

        let set = try await CLIRunner.run(
            ["admin", "set", "--app", "signage", "--scope", "group:lobby", "welcomeText=Hi", #"servicePin="4711""#] + common)
        #expect(
            set.status == 0 && set.standardOutput.contains("welcomeText = \"Hi\"")
                && set.standardOutput.contains(#"servicePin = "********""#))
        let invalid = try await CLIRunner.run(["admin", "set", "--app", "signage", "brightness=55"] + common)
        #expect(invalid.status == 1)
        #expect(invalid.standardError.contains("/brightness: set at app: must be one of 40, 80, 100 (got 55)"))

        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let base = "http://127.0.0.1:\(server.port)"
            let identity = try await FleetClient(http: http, baseURL: base, token: nil).enroll(
                enrollmentToken: enrollmentToken, requestId: "cli-test-request-0001")
            let device = FleetClient(http: http, baseURL: base, token: identity.deviceToken)
            let settings = try #require(try await device.settings(app: "signage"))
            #expect(settings.values["welcomeText"] == "Hi" && settings.values["servicePin"] == "4711")

            let explain = try await CLIRunner.run(["admin", "explain", "--app", "signage", identity.deviceId] + common)
            #expect(explain.status == 0)
            #expect(explain.lines.contains { $0.hasPrefix("welcomeText") && $0.hasSuffix("\"Hi\"        group:lobby") })
            #expect(explain.lines.contains { $0.hasPrefix("servicePin") && $0.contains("\"********\"") })
            let devices = try await CLIRunner.run(["admin", "devices", "--app", "signage", "--json"] + common)
            let list = try DeviceList(json: try JSONParser.parse(Array(devices.standardOutput.utf8)))
            #expect(list.devices.map(\.id) == [identity.deviceId] && list.devices.first?.servedRevision == settings.revision)

            // A long-poll waits; SIGTERM makes the server answer it (304) and exit cleanly.
            let poll = Task { try await device.settings(app: "signage", knownRevision: settings.revision, wait: 120) }
            try await server.waitForLog("event=long-poll")
            let stopping = ContinuousClock.now
            server.signal(SIGTERM)
            #expect(try await poll.value == nil)
            // Answered by the shutdown, not by its 120 s wait (a bound, not a measure of speed).
            #expect(ContinuousClock.now - stopping < .seconds(60))
        }
        await #expect(server.waitForExit() == 0)
        let log = server.log
        #expect(log.contains("event=stopped"))
        for secret in [adminToken, enrollmentToken, "4711"] { #expect(!mentions(log, secret: secret)) }
    }

    @Test("a console left open does not hold up a stop: SIGTERM ends its event stream and the server exits 0")
    func consoleEventsEndOnShutdown() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let token = try String(contentsOfFile: directory.path + "/admin.token", encoding: .utf8)
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0)) { http in
            var signIn = HTTPClient.Request(method: .post, url: server.url + "/console/sign-in")
            signIn.headers["Content-Type"] = "application/x-www-form-urlencoded"
            signIn.body = Array("token=\(token.trimmingCharacters(in: .whitespacesAndNewlines))".utf8)
            let cookie = try #require(try await http.execute(signIn).headers["Set-Cookie"]?.split(separator: ";").first)
            var events = HTTPClient.Request(method: .get, url: server.url + "/console/events")
            events.headers["Cookie"] = String(cookie)
            events.limits = TransferLimits(timeout: .seconds(120), lowSpeedLimit: nil)
            let stream = Task { try await http.execute(events) }
            try await server.waitForLog("event=console-events")
            let stopping = ContinuousClock.now
            server.signal(SIGTERM)
            let answer = try await stream.value
            #expect(answer.status == 200 && answer.headers["Content-Type"] == "text/event-stream")
            #expect(String(decoding: answer.body, as: UTF8.self).hasPrefix("retry: 2000\n: connected\n\n"))
            // Ended by the shutdown, not by the client's 120-s limit (a bound, not a measure of speed).
            #expect(ContinuousClock.now - stopping < .seconds(60))
        }
        #expect(await server.waitForExit() == 0)
        #expect(server.log.contains("event=stopped"))
    }

    @Test("--no-console leaves only the API: /console/ is not served, and the log says so")
    func consoleOff() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path, extraArguments: ["--no-console"])
        defer { server.kill() }
        let listening = try await server.running.waitForLog("event=listening")
        #expect(listening.contains("console=off"))
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0)) { http in
            for path in ["/console/sign-in", "/console/apps", "/console/assets/console.js"] {
                let answer = try await http.execute(.init(method: .get, url: server.url + path))
                #expect(answer.status == 404, "\(path)")
            }
            let health = try await http.execute(.init(method: .get, url: server.url + "/healthz"))
            #expect(health.status == 200)
        }
    }

    static func mode(_ path: String) throws -> Int {
        let attributes = try FileManager.default.attributesOfItem(atPath: path)
        return (attributes[.posixPermissions] as? Int) ?? -1
    }
}
