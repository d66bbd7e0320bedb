import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// People and roles with real processes: `fleetset-server serve`, `fleetset admin` as the owner,
/// an editor and a viewer, `fleetset-server audit verify`, and `sqlite3` changing one audit row.
@Suite("People and roles, as an organization runs them")
struct PeopleAndRolesTests {
    static func metadata(_ app: String) -> String {
        """
        {"app": "\(app)", "version": 1, "schema": {"type": "object", "properties": {
          "title": {"type": "string", "default": "Welcome"}, "volume": {"type": "integer", "default": 5}}}}
        """
    }

    @Test(
        "an owner makes an editor of kiosk and a viewer; the editor changes kiosk and is refused payments; the viewer is refused every write; the audit trail verifies until one row is changed"
    )
    func scenario() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let folder = directory.path
        let server = try await ServerProcess.start(in: folder)
        defer { server.kill() }
        let url = ["--server", "http://127.0.0.1:\(server.port)"]
        let owner = url + ["--token-file", folder + "/admin.token"]
        for app in ["kiosk", "payments"] {
            try Self.metadata(app).write(toFile: "\(folder)/\(app).json", atomically: true, encoding: .utf8)
            #expect(try await CLIRunner.run(["admin", "put-metadata", "\(folder)/\(app).json"] + owner).status == 0)
        }

        // The owner makes the people, and a token for each (written to a 0600 file, never printed).
        let alice = try await CLIRunner.run(
            ["admin", "users", "add", "alice", "--role", "editor", "--app", "kiosk", "--display-name", "Alice"] + owner)
        #expect(
            alice.status == 0 && alice.standardOutput.contains("role: editor") && alice.standardOutput.contains("scope: apps kiosk"),
            "\(alice)")
        #expect(try await CLIRunner.run(["admin", "users", "add", "victor", "--role", "viewer"] + owner).status == 0)
        for name in ["alice", "victor"] {
            let made = try await CLIRunner.run(
                [
                    "admin", "tokens", "create", "--name", "\(name)-laptop", "--account", name, "--expires", "30d", "--out",
                    "\(folder)/\(name).token",
                ]
                    + owner)
            let token = try String(contentsOfFile: "\(folder)/\(name).token", encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            #expect(made.status == 0 && token.hasPrefix("fsk_") && !made.standardOutput.contains(token), "\(made)")
            let attributes = try FileManager.default.attributesOfItem(atPath: "\(folder)/\(name).token")
            #expect((attributes[.posixPermissions] as? Int) == 0o600)
        }
        let users = try await CLIRunner.run(["admin", "users", "list"] + owner)
        #expect(users.lines.contains { $0.hasPrefix("alice") && $0.contains("editor") && $0.contains("apps kiosk") }, "\(users)")
        let asAlice = url + ["--token-file", folder + "/alice.token"]
        let asVictor = url + ["--token-file", folder + "/victor.token"]

        // The editor changes kiosk; payments is refused with the right that is missing (the CLI
        // reads the app's metadata first: read is the first right it lacks there).
        let changed = try await CLIRunner.run(["admin", "set", "--app", "kiosk", "title=Hello", "--message", "new greeting"] + asAlice)
        #expect(changed.status == 0, "\(changed)")
        let refused = try await CLIRunner.run(["admin", "set", "--app", "payments", "title=Hello"] + asAlice)
        #expect(
            refused.status == 1
                && refused.standardError.contains("403 needs-read: alice may use read only for apps kiosk, not for app payments"),
            "\(refused)")
        let direct = try await CLIRunner.run(["admin", "unset", "--app", "payments", "title"] + asAlice)
        #expect(direct.status == 1 && direct.standardError.contains("403 needs-"), "\(direct)")
        let whoami = try await CLIRunner.run(["admin", "whoami"] + asAlice)
        #expect(whoami.standardOutput.contains("alice (Alice)") && whoami.standardOutput.contains("write-values"), "\(whoami)")
        let history = try await CLIRunner.run(["admin", "history", "--app", "kiosk", "--json"] + owner)
        let entries = try HistoryList(json: try JSONParser.parse(Array(history.standardOutput.utf8))).entries
        #expect(entries.first { $0.message == "new greeting" }?.actor == "alice", "\(history)")

        // The viewer reads, and is refused every write.
        #expect(try await CLIRunner.run(["admin", "values", "--app", "kiosk"] + asVictor).status == 0)
        let viewerWrites: [[String]] = [
            ["admin", "set", "--app", "kiosk", "title=Nope"], ["admin", "put-metadata", "\(folder)/kiosk.json"],
            ["admin", "enrollment-token", "--out", "\(folder)/nope.token", "--app", "kiosk"],
            ["admin", "users", "add", "eve", "--role", "owner"],
        ]
        for write in viewerWrites {
            let result = try await CLIRunner.run(write + asVictor)
            #expect(result.status == 1 && result.standardError.contains("403 needs-"), "\(write): \(result)")
        }

        // Every write and refusal is in the trail, and in the log with its hash.
        let audit = try await CLIRunner.run(["admin", "audit", "--json"] + owner)
        let trail = try AuditPage(json: try JSONParser.parse(Array(audit.standardOutput.utf8))).entries
        #expect(
            trail.contains { $0.actor == "alice" && $0.action == "patchValues" && $0.outcome == "ok" && $0.target.contains("app=kiosk") })
        #expect(trail.contains { $0.actor == "alice" && $0.status == 403 && $0.target.contains("app=payments") })
        #expect(trail.filter { $0.actor == "victor" && $0.status == 403 }.count == viewerWrites.count)
        #expect(trail.contains { $0.actor == "owner" && $0.action == "createAccount" && $0.credential == "admin token file" })
        let lastHash = try #require(trail.last?.hash)
        try await server.waitForLog("hash=\(lastHash)")
        #expect(
            !server.log.contains(
                try String(contentsOfFile: "\(folder)/alice.token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))

        // The chain holds; then one row is changed in the database, and verify names it.
        let database = ["--database", folder + "/fleet.sqlite"]
        let verified = try await CLIRunner.run(
            ["audit", "verify"] + database + ["--head", lastHash], executable: CLIRunner.product("fleetset-server"))
        #expect(verified.status == 0 && verified.standardOutput.contains("the audit trail holds: \(trail.count) entries"), "\(verified)")
        let tampered = try #require(trail.first { $0.actor == "alice" && $0.status == 403 })
        let update = try await CLIRunner.run(
            [
                folder + "/fleet.sqlite",
                "UPDATE audit_log SET entry = replace(entry, '\"status\":403', '\"status\":200') WHERE sequence = \(tampered.sequence)",
            ],
            executable: "/usr/bin/sqlite3")
        #expect(update.status == 0, "\(update)")
        let broken = try await CLIRunner.run(["audit", "verify"] + database, executable: CLIRunner.product("fleetset-server"))
        #expect(broken.status == 1 && broken.standardOutput.contains("audit entry \(tampered.sequence): was changed"), "\(broken)")
    }

    @Test("fleetset admin login keeps a personal token in the config folder (0600), later commands use it, logout revokes it")
    func loginAndLogout() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let folder = directory.path
        let server = try await ServerProcess.start(in: folder, extraArguments: ["--password-cost", "10"])
        defer { server.kill() }
        let url = "http://127.0.0.1:\(server.port)"
        let owner = ["--server", url, "--token-file", folder + "/admin.token"]
        #expect(try await CLIRunner.run(["admin", "users", "add", "alice", "--role", "viewer"] + owner).status == 0)
        try "correct horse battery\n".write(toFile: folder + "/password", atomically: true, encoding: .utf8)
        let set = try await CLIRunner.run(["admin", "users", "set-password", "alice", "--password-file", folder + "/password"] + owner)
        #expect(set.status == 0, "\(set)")
        let config = folder + "/config"
        let fleetset = ["XDG_CONFIG_HOME=\(config)", CLIRunner.binary]
        // The password from standard input, as a script would give it.
        let login = try await CLIRunner.run(
            fleetset + ["admin", "login", "--server", url, "--name", "alice"], executable: "/usr/bin/env", input: "correct horse battery\n")
        #expect(login.status == 0 && login.standardOutput.contains("signed in to \(url) as alice"), "\(login)")
        let token = try String(contentsOfFile: config + "/fleetset/admin-token", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(token.hasPrefix("fsk_") && !login.standardOutput.contains(token) && !login.standardError.contains(token))
        #expect((try FileManager.default.attributesOfItem(atPath: config + "/fleetset/admin-token")[.posixPermissions] as? Int) == 0o600)
        #expect((try FileManager.default.attributesOfItem(atPath: config + "/fleetset")[.posixPermissions] as? Int) == 0o700)
        let whoami = try await CLIRunner.run(fleetset + ["admin", "whoami"], executable: "/usr/bin/env")
        #expect(
            whoami.status == 0 && whoami.standardOutput.contains("alice") && whoami.standardOutput.contains("sign-in: password"),
            "\(whoami)")
        // The login's token goes only to the server it was made for.
        let elsewhere = try await CLIRunner.run(
            fleetset + ["admin", "whoami", "--server", "http://127.0.0.1:9"], executable: "/usr/bin/env")
        #expect(elsewhere.status == 2 && elsewhere.standardError.contains("is for \(url)"), "\(elsewhere)")
        let wrong = try await CLIRunner.run(
            fleetset + ["admin", "login", "--server", url, "--name", "alice"], executable: "/usr/bin/env", input: "not the password\n")
        #expect(wrong.status == 1 && wrong.standardError.contains("401 unauthenticated"), "\(wrong)")
        let logout = try await CLIRunner.run(fleetset + ["admin", "logout"], executable: "/usr/bin/env")
        #expect(logout.status == 0 && logout.standardOutput.contains("signed out alice"), "\(logout)")
        #expect(!FileManager.default.fileExists(atPath: config + "/fleetset/admin-token"))
        let tokens = try await CLIRunner.run(["admin", "tokens", "list", "--account", "alice", "--json"] + owner)
        let listed = try APITokenList(json: try JSONParser.parse(Array(tokens.standardOutput.utf8))).tokens
        #expect(listed.count == 1 && listed[0].revoked && listed[0].name == "login", "\(tokens)")
        // Signed in again and the server gone: logout still removes the token, saying it could not revoke it.
        let again = try await CLIRunner.run(
            fleetset + ["admin", "login", "--server", url, "--name", "alice"], executable: "/usr/bin/env", input: "correct horse battery\n")
        #expect(again.status == 0, "\(again)")
        server.kill()
        let offline = try await CLIRunner.run(fleetset + ["admin", "logout"], executable: "/usr/bin/env")
        #expect(offline.status == 0 && offline.standardOutput.contains("could not be revoked"), "\(offline)")
        #expect(!FileManager.default.fileExists(atPath: config + "/fleetset/admin-token"))
        #expect(!FileManager.default.fileExists(atPath: config + "/fleetset/admin-server"))
    }
}
