import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

@Suite("fleetset-server migrate")
struct MigrateTests {
    @Test(
        "a fleet moves from SQLite to PostgreSQL whole: the counts match, the device's token and values work there; a second copy is refused"
    )
    func sqliteToPostgres() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let tokenFile = directory.appendingPathComponent("admin.token").path
        let server = try await ServerProcess.start(in: directory.path)
        let common = ["--server", "http://127.0.0.1:\(server.port)", "--token-file", tokenFile]
        let signage = Shared.repository.appendingPathComponent("Config/examples/signage.SettingsSchema.json").path
        #expect(try await CLIRunner.run(["admin", "put-metadata", "--moki", signage, "--writable", "brightness"] + common).status == 0)
        let enrollFile = directory.appendingPathComponent("enroll.token").path
        #expect(
            try await CLIRunner.run(["admin", "enrollment-token", "--out", enrollFile, "--app", "signage", "--uses", "3"] + common).status
                == 0)
        #expect(
            try await CLIRunner.run(["admin", "set", "--app", "signage", "welcomeText=Moved", #"servicePin="4711""#] + common).status == 0)
        let enrollmentToken = try String(contentsOfFile: enrollFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let (identity, revision) = try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let base = "http://127.0.0.1:\(server.port)"
            let identity = try await FleetClient(http: http, baseURL: base, token: nil).enroll(
                enrollmentToken: enrollmentToken, requestId: "migrate-test-request-1")
            let device = FleetClient(http: http, baseURL: base, token: identity.deviceToken)
            let settings = try #require(try await device.settings(app: "signage"))
            try await device.reportStatus(
                app: "signage",
                StatusReport(revision: settings.revision, schemaVersion: settings.schemaVersion, state: .applied, source: .agent))
            return (identity, settings.revision)
        }
        server.signal(SIGTERM)
        await #expect(server.waitForExit() == 0)

        let destination = try await PostgresCluster.shared().makeDatabase()
        let server_ = CLIRunner.product("fleetset-server")
        let migrated = try await CLIRunner.run(
            ["migrate", "--from", "sqlite:" + directory.appendingPathComponent("fleet.sqlite").path, "--to", destination],
            executable: server_)
        #expect(migrated.status == 0, "\(migrated)")
        for line in [
            "metadata: 1 → 1", "values: 1 → 1", "devices: 1 → 1", "enrollment tokens: 1 → 1", "revisions: 1 → 1", "status reports: 1 → 1",
        ] {
            #expect(migrated.standardOutput.contains(line), "\(migrated.standardOutput)")
        }
        #expect(migrated.standardOutput.contains("the destination holds exactly what the source holds"))
        // A second copy into the now non-empty database writes nothing and says why.
        let again = try await CLIRunner.run(
            ["migrate", "--from", "sqlite:" + directory.appendingPathComponent("fleet.sqlite").path, "--to", destination],
            executable: server_)
        #expect(again.status == 1 && again.standardOutput.contains("not empty (it holds 1 metadata)"), "\(again)")

        // The server on PostgreSQL serves the moved fleet: same token, same values, same revision.
        let moved = try await ServerProcess.start(in: directory.path, database: destination)
        defer { moved.kill() }
        #expect(moved.log.contains("postgres://fleetset@/test_"), "\(moved.log)")
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let device = FleetClient(http: http, baseURL: "http://127.0.0.1:\(moved.port)", token: identity.deviceToken)
            let settings = try #require(try await device.settings(app: "signage"))
            #expect(settings.revision == revision && settings.values["welcomeText"] == "Moved" && settings.values["servicePin"] == "4711")
        }
        let status = try await CLIRunner.run(
            ["admin", "devices", "--app", "signage"] + ["--server", "http://127.0.0.1:\(moved.port)", "--token-file", tokenFile])
        #expect(
            status.status == 0 && status.standardOutput.contains(identity.deviceId) && status.standardOutput.contains("applied"),
            "\(status)")
    }

    @Test("a SQLite destination is readable by its owner only, under a umask of 022 too (it holds every secret and token hash)")
    func sqliteDestinationIsPrivate() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        server.signal(SIGTERM)
        await #expect(server.waitForExit() == 0)
        let source = directory.appendingPathComponent("fleet.sqlite").path
        let destination = directory.appendingPathComponent("copy.sqlite").path
        // A shell sets the umask of the command alone: the test process's own is shared by every test.
        let migrated = try await CLIRunner.run(
            [
                "-c", #"umask 022 && exec "$0" migrate --from "sqlite:$1" --to "sqlite:$2""#, CLIRunner.product("fleetset-server"), source,
                destination,
            ],
            executable: "/bin/sh")
        #expect(migrated.status == 0, "\(migrated)")
        var modes: [String: mode_t] = [:]
        for suffix in ["", "-wal", "-shm"] {
            var status = stat()
            if stat(destination + suffix, &status) == 0 { modes["copy.sqlite" + suffix] = status.st_mode & 0o777 }
        }
        #expect(modes["copy.sqlite"] != nil)
        #expect(modes.values.allSatisfy { $0 == 0o600 }, "\(modes.mapValues { String($0, radix: 8) })")
    }

    @Test("a PostgreSQL password is refused on the command line, read from a file only the server may read, and never logged")
    func databasePassword() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cluster = try await PostgresCluster.shared()
        let url = try await cluster.makeDatabase()
        let database = PostgresCluster.databaseName(url)
        let withPassword = "postgres://fleetset:hunter2-secret@:\(cluster.port)/\(database)?host=\(cluster.folder)"
        let server = CLIRunner.product("fleetset-server")
        let token = ["--admin-token-file", directory.appendingPathComponent("admin.token").path]
        for arguments in [
            ["serve", "--database", withPassword, "--listen", "127.0.0.1:0"] + token,
            ["migrate", "--from", withPassword, "--to", "sqlite:/x"],
            ["check-database", "--database", withPassword],
        ] {
            let refused = try await CLIRunner.run(arguments, executable: server)
            #expect(refused.status == 64, "\(refused)")
            #expect(refused.standardError.contains("--database-password-file") && !refused.standardError.contains("hunter2"), "\(refused)")
        }
        let passwordFile = directory.appendingPathComponent("db.password").path
        #expect(
            FileManager.default.createFile(
                atPath: passwordFile, contents: Data("hunter2-secret\n".utf8), attributes: [.posixPermissions: 0o644]))
        let readable = try await CLIRunner.run(
            ["check-database", "--database", url, "--database-password-file", passwordFile], executable: server)
        #expect(readable.status != 0 && readable.standardError.contains("has mode 644"), "\(readable)")
        #expect(chmod(passwordFile, 0o600) == 0)
        // The test cluster trusts local connections: the password is read and sent, and the check runs.
        let checked = try await CLIRunner.run(
            ["check-database", "--database", url, "--database-password-file", passwordFile], executable: server)
        #expect(checked.status == 1 && checked.standardOutput.contains("finding: PUBLIC may CONNECT"), "\(checked)")
        #expect(checked.standardOutput.contains("fix (as the database's owner or a superuser): REVOKE CONNECT, TEMPORARY ON DATABASE"))
        #expect(!(checked.standardOutput + checked.standardError).contains("hunter2"))
    }

    @Test("a PostgreSQL database that does not exist, or a certificate its CA did not sign: the server exits 1 saying which")
    func unreachableDatabase() async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let cluster = try await PostgresCluster.shared()
        let cases = [
            (cluster.url(database: "no_such_database"), #"database \"no_such_database\" does not exist"#),
            (
                "postgres://fleetset@localhost:\(cluster.port)/postgres?sslmode=verify-full&sslrootcert=\(cluster.otherCertificate)",
                "CERTIFICATE_VERIFY_FAILED"
            ),
        ]
        for (url, reason) in cases {
            let run = try await CLIRunner.run(
                [
                    "serve", "--database", url, "--listen", "127.0.0.1:0", "--admin-token-file",
                    directory.appendingPathComponent("admin.token").path,
                ],
                executable: CLIRunner.product("fleetset-server"))
            #expect(run.status == 1, "\(run)")
            let fatal = run.standardError.split(separator: "\n").first { $0.contains("event=fatal") } ?? ""
            #expect(fatal.contains("PostgreSQL") && fatal.contains(reason), "\(run.standardError)")
        }
    }
}
