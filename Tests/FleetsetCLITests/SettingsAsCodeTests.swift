import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `fleetset admin export`, `plan` and `apply` against a real `fleetset-server`: the round
/// trip, idempotence, all-or-nothing writes, metadata versions, secrets and drift.
@Suite("settings as code")
struct SettingsAsCodeTests {
    static let metadata = #"""
        {"app": "kiosk", "version": VERSION, "schema": {"type": "object", "properties": {
          "volume": {"type": "integer", "minimum": 0, "maximum": 10, "default": 3},
          "title": {"type": "string", "default": "Welcome"},
          "display": {"type": "object", "properties": {"brightness": {"type": "integer"}, "mode": {"type": "string"}}},
          "pin": {"type": "string", "x-secret": true}}}}
        """#
    static let storedPin = "pin-4711-stored"
    static let newPin = "pin-0815-from-file"

    /// A server with app kiosk (metadata version 1), values at the app and group lobby, a
    /// secret, and one device in group lobby.
    struct Fleet {
        let directory: URL
        let server: ServerProcess
        let admin: [String]
        let device: String

        var tree: String { directory.appendingPathComponent("tree").path }

        func run(_ arguments: [String]) async throws -> CLIRunner.Output {
            try await CLIRunner.run(["admin"] + arguments + admin)
        }

        func putMetadata(version: Int) async throws {
            let file = directory.appendingPathComponent("kiosk-\(version).json")
            try CLIRunner.write(SettingsAsCodeTests.metadata.replacingOccurrences(of: "VERSION", with: "\(version)"), to: file)
            let put = try await run(["put-metadata", file.path])
            #expect(put.status == 0, "\(put)")
        }

        /// The number of entries in the app's history.
        func historyCount() async throws -> Int {
            let history = try await run(["history", "--app", "kiosk", "--json"])
            let json = try JSONParser.parse(Array(history.standardOutput.utf8))
            return json["entries"]?.arrayValue?.count ?? -1
        }

        func file(_ path: String) throws -> String { try String(contentsOfFile: tree + "/" + path, encoding: .utf8) }

        /// Exports the tree, then edits it: the app's volume 3 → `volume`, group lobby's file → `lobby`.
        func exportEdited(volume: Int, lobby: String) async throws {
            let export = try await run(["export", tree])
            #expect(export.status == 0, "\(export)")
            let app = try file("apps/kiosk/values/app.yaml")
            try write("apps/kiosk/values/app.yaml", app.replacingOccurrences(of: "volume: 3", with: "volume: \(volume)"))
            try write("apps/kiosk/values/group/lobby.yaml", lobby)
        }

        func write(_ path: String, _ text: String) throws {
            let url = URL(fileURLWithPath: tree + "/" + path)
            try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
            try CLIRunner.write(text, to: url)
        }
    }

    static func withFleet(_ body: (Fleet) async throws -> Void) async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let server = try await ServerProcess.start(in: directory.path)
        defer { server.kill() }
        let admin = ["--server", server.url, "--token-file", directory.appendingPathComponent("admin.token").path]
        var fleet = Fleet(directory: directory, server: server, admin: admin, device: "")
        try await fleet.putMetadata(version: 1)
        let app = try await fleet.run([
            "set", "--app", "kiosk", "volume=3", "title=Lobby", "display={\"brightness\": 5}", "pin=\(storedPin)",
        ])
        #expect(app.status == 0, "\(app)")
        let group = try await fleet.run(["set", "--app", "kiosk", "--scope", "group:lobby", "volume=4"])
        #expect(group.status == 0, "\(group)")
        let tokenFile = directory.appendingPathComponent("enroll.token").path
        let token = try await fleet.run(["enrollment-token", "--out", tokenFile, "--app", "kiosk", "--group", "lobby"])
        #expect(token.status == 0, "\(token)")
        let enrollmentToken = try String(contentsOfFile: tokenFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let identity = try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            try await FleetClient(http: http, baseURL: server.url, token: nil).enroll(
                enrollmentToken: enrollmentToken, requestId: "tree-test-request-0001")
        }
        fleet = Fleet(directory: directory, server: server, admin: admin, device: identity.deviceId)
        try await body(fleet)
        #expect(!server.log.contains(storedPin) && !server.log.contains(newPin), "a secret reached the server's log")
    }

    /// Every file under `folder`, by its relative path.
    static func files(_ folder: String) throws -> [String: String] {
        let enumerator = FileManager.default.enumerator(atPath: folder)
        var files: [String: String] = [:]
        while let path = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: folder + "/" + path, isDirectory: &isDirectory), !isDirectory.boolValue {
                files[path] = try String(contentsOfFile: folder + "/" + path, encoding: .utf8)
            }
        }
        return files
    }

    @Test(
        "export → edit a value and add a group's values → plan shows exactly that, exit 2 → apply → plan exit 0 → export equals the edited tree"
    )
    func roundTrip() async throws {
        try await Self.withFleet { fleet in
            let export = try await fleet.run(["export", fleet.tree])
            #expect(export.status == 0, "\(export)")
            let app = try fleet.file("apps/kiosk/values/app.yaml")
            #expect(app == "display:\n  brightness: 5\npin: !secret kiosk/pin\ntitle: Lobby\nvolume: 3\n", "\(app)")
            #expect(try fleet.file("apps/kiosk/values/group/lobby.yaml") == "volume: 4\n")
            #expect(try fleet.file("apps/kiosk/metadata.json").contains("\"version\": 1"))
            let unchanged = try await fleet.run(["plan", fleet.tree])
            #expect(unchanged.status == 0 && unchanged.standardOutput.contains("No changes"), "\(unchanged)")

            // The edit: a value changed, a new group's values (a text that reads as a boolean in YAML 1.1).
            try fleet.write("apps/kiosk/values/app.yaml", app.replacingOccurrences(of: "volume: 3", with: "volume: 5"))
            try fleet.write("apps/kiosk/values/group/canary.yaml", "title: \"no\"\n")
            // And a group defined by a query on the devices' facts.
            try fleet.write("groups/arm.yaml", "where:\n  - machine.arch=aarch64\n  - os.version!=11\n")
            let edited = try Self.files(fleet.tree)
            let plan = try await fleet.run(["plan", fleet.tree])
            #expect(plan.status == 2, "\(plan)")
            let changeLines = plan.lines.filter { $0.hasPrefix("    ") }
            #expect(changeLines == ["    ~ /volume: 3 → 5", "    + /title: \"no\""], "\(plan.standardOutput)")
            #expect(plan.standardOutput.contains("  app: reaches 1 device(s): \(fleet.device)"), "\(plan.standardOutput)")
            #expect(plan.standardOutput.contains("  group:canary (new): reaches 0 device(s)"), "\(plan.standardOutput)")
            #expect(!plan.standardOutput.contains("group:lobby"), "\(plan.standardOutput)")
            #expect(plan.lines.contains("  + arm: where machine.arch=aarch64, os.version!=11 (0 device(s) now)"), "\(plan.standardOutput)")

            let before = try await fleet.historyCount()
            let apply = try await fleet.run(["apply", fleet.tree, "--message", "from git"])
            #expect(apply.status == 0 && apply.standardOutput.contains("entry \(before + 1) written: app, group:canary"), "\(apply)")
            #expect(apply.standardOutput.contains("group arm: created"), "\(apply)")
            #expect(try await fleet.historyCount() == before + 1, "one history entry for both scopes")
            let groups = try await fleet.run(["groups"])
            #expect(groups.standardOutput.contains("arm"), "\(groups)")
            let history = try await fleet.run(["history", "--app", "kiosk", "--limit", "1"])
            #expect(history.standardOutput.contains("from git"), "\(history)")

            let after = try await fleet.run(["plan", fleet.tree])
            #expect(after.status == 0, "\(after)")
            // Idempotent: a second apply writes nothing.
            let again = try await fleet.run(["apply", fleet.tree])
            #expect(again.status == 0 && again.standardOutput.contains("Nothing to apply"), "\(again)")
            #expect(try await fleet.historyCount() == before + 1)

            let second = fleet.directory.appendingPathComponent("second").path
            let reexport = try await fleet.run(["export", second])
            #expect(reexport.status == 0, "\(reexport)")
            #expect(try Self.files(second) == edited)
            // Exporting over the tree itself rewrites nothing.
            let over = try await fleet.run(["export", fleet.tree])
            #expect(over.standardOutput.contains("0 written, 0 removed"), "\(over)")
        }
    }

    @Test("a change that makes one of two scopes invalid is refused with 422 and writes neither")
    func allOrNothing() async throws {
        try await Self.withFleet { fleet in
            try await fleet.exportEdited(volume: 5, lobby: "volume: 99\n")
            let before = try await fleet.historyCount()
            let plan = try await fleet.run(["plan", fleet.tree])
            #expect(plan.status == 1 && plan.standardOutput.contains("422 invalid-values"), "\(plan)")
            #expect(plan.standardOutput.contains("/volume"), "\(plan)")
            let apply = try await fleet.run(["apply", fleet.tree])
            #expect(apply.status == 1 && apply.standardError.contains("nothing written"), "\(apply)")
            #expect(try await fleet.historyCount() == before)
            let values = try await fleet.run(["values", "--app", "kiosk", "--json"])
            #expect(try JSONParser.parse(Array(values.standardOutput.utf8))["values"]?["volume"] == 3, "\(values)")
        }
    }

    @Test("a tree whose metadata version is lower than the stored one is refused, naming the file and both versions")
    func lowerMetadataVersion() async throws {
        try await Self.withFleet { fleet in
            _ = try await fleet.run(["export", fleet.tree])
            try await fleet.putMetadata(version: 2)
            for command in ["plan", "apply"] {
                let output = try await fleet.run([command, fleet.tree])
                let text = output.standardOutput + output.standardError
                #expect(output.status == 1, "\(output)")
                #expect(text.contains("apps/kiosk/metadata.json: version 1 is lower than the stored version 2"), "\(text)")
            }
            // A higher version in the tree is stored by apply, then the values are written.
            let document = try fleet.file("apps/kiosk/metadata.json").replacingOccurrences(of: "\"version\": 1", with: "\"version\": 3")
            try fleet.write("apps/kiosk/metadata.json", document)
            try fleet.write("apps/kiosk/values/group/lobby.yaml", "volume: 7\n")
            let plan = try await fleet.run(["plan", fleet.tree])
            #expect(plan.status == 2 && plan.standardOutput.contains("metadata: version 2 → 3"), "\(plan)")
            #expect(plan.standardOutput.contains("~ /volume: 4 → 7"), "\(plan)")
            let apply = try await fleet.run(["apply", fleet.tree])
            #expect(apply.status == 0 && apply.standardOutput.contains("metadata version 3 stored"), "\(apply)")
            #expect(apply.standardOutput.contains("written: group:lobby"), "\(apply)")
            #expect(try await fleet.run(["plan", fleet.tree]).status == 0)
        }
    }

    @Test("secrets are references in the files, resolved from --secrets or the environment, compared by the server, never printed")
    func secrets() async throws {
        try await Self.withFleet { fleet in
            _ = try await fleet.run(["export", fleet.tree])
            let secrets = fleet.directory.appendingPathComponent("secrets")
            try FileManager.default.createDirectory(at: secrets.appendingPathComponent("kiosk"), withIntermediateDirectories: true)
            try CLIRunner.write(Self.newPin + "\n", to: secrets.appendingPathComponent("kiosk/pin"))
            var outputs: [CLIRunner.Output] = []
            // Without the secret: the reference keeps the stored value.
            let unresolved = try await fleet.run(["plan", fleet.tree])
            outputs.append(unresolved)
            #expect(unresolved.status == 0, "\(unresolved)")
            let plan = try await fleet.run(["plan", fleet.tree, "--secrets", secrets.path])
            outputs.append(plan)
            #expect(plan.status == 2 && plan.standardOutput.contains("~ /pin: (secret: will be set, write-only)"), "\(plan)")
            let json = try await fleet.run(["plan", fleet.tree, "--secrets", secrets.path, "--json"])
            outputs.append(json)
            let apply = try await fleet.run(["apply", fleet.tree, "--secrets", secrets.path])
            outputs.append(apply)
            #expect(apply.status == 0, "\(apply)")
            // The server compares the secret it has with the one sent: nothing to do.
            let same = try await fleet.run(["plan", fleet.tree, "--secrets", secrets.path])
            outputs.append(same)
            #expect(same.status == 0, "\(same)")
            // The environment, when the folder does not have it.
            let environment = try await CLIRunner.run(
                ["FLEETSET_SECRET_KIOSK_PIN=\(Self.storedPin)", CLIRunner.binary, "admin", "plan", fleet.tree] + fleet.admin,
                executable: "/usr/bin/env")
            outputs.append(environment)
            #expect(environment.status == 2 && environment.standardOutput.contains("~ /pin: (secret"), "\(environment)")
            for output in outputs {
                for secret in [Self.storedPin, Self.newPin] {
                    #expect(!output.standardOutput.contains(secret) && !output.standardError.contains(secret), "\(output)")
                }
            }
            for (path, text) in try Self.files(fleet.tree) {
                #expect(!text.contains(Self.storedPin) && !text.contains(Self.newPin), "\(path)")
            }
            let values = try await fleet.run(["values", "--app", "kiosk"])
            #expect(values.standardOutput.contains("********"))
        }
    }

    @Test(
        "a stored secret the tree does not mention stays as it is; a reference to another place, or to a place that is not x-secret, is refused"
    )
    func secretsTheTreeLacks() async throws {
        try await Self.withFleet { fleet in
            _ = try await fleet.run(["export", fleet.tree])
            let app = try fleet.file("apps/kiosk/values/app.yaml")
            try fleet.write(
                "apps/kiosk/values/app.yaml",
                app.replacingOccurrences(of: "pin: !secret kiosk/pin\n", with: "").replacingOccurrences(of: "volume: 3", with: "volume: 4"))
            let plan = try await fleet.run(["plan", fleet.tree])
            #expect(plan.status == 2 && !plan.standardOutput.contains("/pin"), "\(plan)")
            #expect(try await fleet.run(["apply", fleet.tree]).status == 0)
            // The server still holds the stored pin: a reference resolving to it changes nothing.
            try fleet.write("apps/kiosk/values/app.yaml", app.replacingOccurrences(of: "volume: 3", with: "volume: 4"))
            let same = try await CLIRunner.run(
                ["FLEETSET_SECRET_KIOSK_PIN=\(Self.storedPin)", CLIRunner.binary, "admin", "plan", fleet.tree] + fleet.admin,
                executable: "/usr/bin/env")
            #expect(same.status == 0, "\(same)")

            // A reference names its own place, and only an x-secret one.
            for (line, message) in [
                ("pin: !secret signage/pin\n", "a reference names its own place, !secret kiosk/pin"),
                ("title: !secret kiosk/title\n", "the metadata does not mark /title x-secret"),
            ] {
                let edited =
                    app.replacingOccurrences(of: "pin: !secret kiosk/pin\n", with: "")
                    .replacingOccurrences(of: "title: Lobby\n", with: "") + line
                try fleet.write("apps/kiosk/values/app.yaml", edited)
                let refused = try await CLIRunner.run(
                    [
                        "FLEETSET_SECRET_SIGNAGE_PIN=leaked-1", "FLEETSET_SECRET_KIOSK_TITLE=leaked-2", CLIRunner.binary, "admin", "apply",
                        fleet.tree,
                    ]
                        + fleet.admin, executable: "/usr/bin/env")
                #expect(refused.status == 1 && refused.standardError.contains(message), "\(refused)")
                #expect(!refused.standardOutput.contains("leaked") && !refused.standardError.contains("leaked"))
            }
            let values = try await fleet.run(["values", "--app", "kiosk"])
            #expect(!values.standardOutput.contains("leaked"), "\(values)")
        }
    }

    @Test("an editor limited to a group applies that group's scope; a change at the app's scope is refused with 403, nothing written")
    func scopedEditor() async throws {
        try await Self.withFleet { fleet in
            let added = try await fleet.run(["users", "add", "lena", "--role", "editor", "--app", "kiosk", "--group", "lobby"])
            #expect(added.status == 0, "\(added)")
            let tokenFile = fleet.directory.appendingPathComponent("lena.token").path
            let token = try await fleet.run(["tokens", "create", "--name", "lena-ci", "--account", "lena", "--out", tokenFile])
            #expect(token.status == 0, "\(token)")
            let lena = ["--server", fleet.server.url, "--token-file", tokenFile]
            _ = try await fleet.run(["export", fleet.tree])
            try fleet.write("apps/kiosk/values/group/lobby.yaml", "volume: 8\n")
            let apply = try await CLIRunner.run(["admin", "apply", fleet.tree] + lena)
            #expect(apply.status == 0 && apply.standardOutput.contains("written: group:lobby"), "\(apply)")
            let app = try fleet.file("apps/kiosk/values/app.yaml")
            try fleet.write("apps/kiosk/values/app.yaml", app.replacingOccurrences(of: "volume: 3", with: "volume: 9"))
            try fleet.write("apps/kiosk/values/group/lobby.yaml", "volume: 2\n")
            let before = try await fleet.historyCount()
            let refused = try await CLIRunner.run(["admin", "apply", fleet.tree] + lena)
            #expect(refused.status == 1 && refused.standardError.contains("403 needs-write-values"), "\(refused)")
            #expect(try await fleet.historyCount() == before)
        }
    }

    @Test("apply --rollout stages a change of one scope; a change of two scopes is refused and nothing is written")
    func staged() async throws {
        try await Self.withFleet { fleet in
            try await fleet.exportEdited(volume: 5, lobby: "volume: 6\n")
            let two = try await fleet.run(["apply", fleet.tree, "--rollout", "50%,100%"])
            #expect(two.status == 1 && two.standardError.contains("a rollout stages one scope"), "\(two)")
            try fleet.write("apps/kiosk/values/group/lobby.yaml", "volume: 4\n")
            let one = try await fleet.run(["apply", fleet.tree, "--rollout", "50%,100%", "--message", "staged"])
            #expect(one.status == 0 && one.standardOutput.contains("rollout r-") && one.standardOutput.contains("started at app"), "\(one)")
            let status = try await fleet.run(["rollout", "status", "kiosk"])
            #expect(status.standardOutput.contains("volume"), "\(status)")
        }
    }

    @Test("--app names an app of the tree; another is an error")
    func unknownApp() async throws {
        try await Self.withFleet { fleet in
            _ = try await fleet.run(["export", fleet.tree])
            let plan = try await fleet.run(["plan", fleet.tree, "--app", "signage"])
            #expect(plan.status == 1 && plan.standardError.contains("the tree has no app signage"), "\(plan)")
            #expect(try await fleet.run(["plan", fleet.tree, "--app", "kiosk"]).status == 0)
            let broken = fleet.tree + "/apps/kiosk/values/app.yaml"
            try CLIRunner.write("volume: [1,\n", to: URL(fileURLWithPath: broken))
            let unreadable = try await fleet.run(["plan", fleet.tree])
            #expect(
                unreadable.status == 1 && unreadable.standardError.contains("apps/kiosk/values/app.yaml:2:1: not YAML"), "\(unreadable)")
        }
    }

    @Test("policies are planned and applied key by key; without --prune what the tree lacks stays, with it it goes")
    func policiesAndPrune() async throws {
        try await Self.withFleet { fleet in
            let policy = try await fleet.run(["policy", "set", "--group", "lobby", "logLevel=debug"])
            #expect(policy.status == 0, "\(policy)")
            _ = try await fleet.run(["export", fleet.tree])
            #expect(try fleet.file("policies/group/lobby.yaml") == "logLevel: debug\n")
            try fleet.write("policies/group/lobby.yaml", "logLevel: debug\npollInterval: 300\n")
            try FileManager.default.removeItem(atPath: fleet.tree + "/apps/kiosk/values/group/lobby.yaml")
            let plan = try await fleet.run(["plan", fleet.tree])
            #expect(plan.status == 2, "\(plan)")
            #expect(plan.lines.filter { $0.hasPrefix("    ") } == ["    + /pollInterval: 300"], "\(plan.standardOutput)")
            #expect(plan.lines.contains("  group:lobby: reaches 1 device(s): \(fleet.device)"), "\(plan.standardOutput)")
            let pruning = try await fleet.run(["plan", fleet.tree, "--prune"])
            #expect(pruning.standardOutput.contains("group:lobby (removed): reaches 1 device(s)"), "\(pruning)")
            #expect(pruning.standardOutput.contains("    - /volume"), "\(pruning)")
            let apply = try await fleet.run(["apply", fleet.tree, "--prune"])
            #expect(apply.status == 0 && apply.standardOutput.contains("policy group:lobby: pollInterval"), "\(apply)")
            #expect(try await fleet.run(["plan", fleet.tree, "--prune"]).status == 0)
            let values = try await fleet.run(["values", "--app", "kiosk", "--scope", "group:lobby", "--json"])
            #expect(try JSONParser.parse(Array(values.standardOutput.utf8))["values"] == .object([:]), "\(values)")
            let policies = try await fleet.run(["policy", "--json"])
            #expect(
                policies.standardOutput.contains("\"pollInterval\":300") || policies.standardOutput.contains("\"pollInterval\": 300"),
                "\(policies)")
        }
    }

    @Test("a plan in a CI-like script detects a change made with fleetset admin set (drift): exit 2")
    func drift() async throws {
        try await Self.withFleet { fleet in
            _ = try await fleet.run(["export", fleet.tree])
            let script = fleet.directory.appendingPathComponent("check-drift.sh")
            try CLIRunner.write(
                """
                #!/bin/sh
                # What a CI job runs: exit 0 in sync, 2 drift, 1 error.
                "$FLEETSET" admin plan "$1" --server "$2" --token-file "$3" > "$4"
                status=$?
                echo "plan exit $status" >> "$4"
                exit $status
                """, to: script)
            let report = fleet.directory.appendingPathComponent("report.txt").path
            let arguments = ["FLEETSET=\(CLIRunner.binary)", "/bin/sh", script.path, fleet.tree, fleet.admin[1], fleet.admin[3], report]
            let clean = try await CLIRunner.run(arguments, executable: "/usr/bin/env")
            #expect(clean.status == 0, "\(clean) \((try? String(contentsOfFile: report, encoding: .utf8)) ?? "")")
            let set = try await fleet.run(["set", "--app", "kiosk", "--scope", "group:lobby", "volume=6"])
            #expect(set.status == 0, "\(set)")
            let drifted = try await CLIRunner.run(arguments, executable: "/usr/bin/env")
            let text = try String(contentsOfFile: report, encoding: .utf8)
            #expect(drifted.status == 2, "\(drifted) \(text)")
            #expect(text.contains("~ /volume: 6 → 4") && text.contains("plan exit 2"), "\(text)")
            // A usage error is an error, not drift.
            let usage = try await fleet.run(["plan"])
            #expect(usage.status == 1, "\(usage)")
        }
    }
}
