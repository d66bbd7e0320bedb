import FleetTestSupport
import Foundation
import Testing

@Suite("fleetset schema test")
struct SchemaTestCLITests {
    @Test(
        "reproduces the official suite's count from the shell",
        .enabled(if: Shared.hasSuite, "the JSON Schema Test Suite is not at ../shared/data/json-schema-test-suite"))
    func officialSuite() async throws {
        let folder = Shared.suite.appendingPathComponent("tests/draft2020-12")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).filter { $0.hasSuffix(".json") }.sorted()
            .map { folder.appendingPathComponent($0).path }
        let output = try await CLIRunner.run(
            ["schema", "test"] + files + ["--remotes", Shared.suite.appendingPathComponent("remotes").path])
        #expect(output.lines == ["1299 passed, 0 failed, 0 skipped"])
        #expect(output.status == 0)
    }

    @Test("prints one line per failing test, skips unsupported schemas, exits with 1")
    func failures() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let file = folder.appendingPathComponent("mine.json")
        try CLIRunner.write(
            """
            [
              {"description": "duration", "schema": {"enum": ["1", "2"]},
               "tests": [{"description": "one", "data": "1", "valid": true},
                         {"description": "five is wrongly expected valid", "data": "5", "valid": true}]},
              {"description": "old draft", "schema": {"$schema": "http://json-schema.org/draft-07/schema#"},
               "tests": [{"description": "anything", "data": 1, "valid": true}]}
            ]
            """, to: file)
        let output = try await CLIRunner.run(["schema", "test", file.path])
        #expect(
            output.lines == [
                #"FAIL \#(file.path): duration: five is wrongly expected valid: expected valid, got: /: must be one of "1", "2" (got "5")"#,
                "1 passed, 1 failed, 1 skipped",
            ])
        #expect(output.status == 1)
    }

    @Test("usage errors and unreadable files exit with 2")
    func usageAndIO() async throws {
        let noFiles = try await CLIRunner.run(["schema", "test"])
        #expect(noFiles.status == 2)
        #expect(noFiles.standardError.contains("Missing expected argument"))
        let missing = try await CLIRunner.run(["schema", "test", "/nonexistent/tests.json"])
        #expect(missing.status == 2)
        #expect(missing.standardError == "fleetset: cannot open /nonexistent/tests.json: No such file or directory\n")
        let help = try await CLIRunner.run(["schema", "test", "--help"])
        #expect(help.status == 0)
        #expect(help.standardOutput.contains("N passed, M failed, K skipped"))
    }

    @Test("a file that is not JSON is invalid input: exit 1 with line and column")
    func notJSON() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let file = folder.appendingPathComponent("broken.json")
        try CLIRunner.write("[\n  {\"description\": 1,,}\n]", to: file)
        let output = try await CLIRunner.run(["schema", "test", file.path])
        #expect(output.status == 1)
        #expect(output.lines.first?.hasPrefix("\(file.path): line 2, column ") == true)
    }
}

@Suite("fleetset metadata and settings")
struct MetadataCLITests {
    @Test(
        "import-moki prints metadata that validates; settings validate reports pointers and hides secrets",
        .enabled(if: Shared.hasKiosk, "../shared/examples/kiosk.SettingsSchema.json is not present"))
    func kioskRoundTrip() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let imported = try await CLIRunner.run(["metadata", "import-moki", Shared.kiosk.path, "--writable", "duration"])
        #expect(imported.status == 0)
        let metadataFile = folder.appendingPathComponent("kiosk.metadata.json")
        try CLIRunner.write(imported.standardOutput, to: metadataFile)

        let validated = try await CLIRunner.run(["metadata", "validate", metadataFile.path])
        #expect(validated.lines == ["\(metadataFile.path): valid metadata for kiosk, version 1, 6 settings (1 writable, 1 secret)"])
        #expect(validated.status == 0)

        let settingsFile = folder.appendingPathComponent("settings.json")
        try CLIRunner.write(
            #"{"app": "kiosk", "schemaVersion": 1, "revision": 7, "syncedAt": "2026-11-22T10:00:00Z", "values": {"duration": "5", "adminPassword": 4321}}"#,
            to: settingsFile)
        let invalid = try await CLIRunner.run(["settings", "validate", "--metadata", metadataFile.path, settingsFile.path])
        #expect(
            invalid.lines == [
                #"\#(settingsFile.path): /duration: must be one of "1", "2" (got "5")"#,
                "\(settingsFile.path): /adminPassword: must be string (got integer)",
            ])
        #expect(!invalid.standardOutput.contains("4321"))
        #expect(invalid.status == 1)

        try CLIRunner.write(#"{"duration": "1", "progressIndicator": false}"#, to: settingsFile)
        let valid = try await CLIRunner.run(["settings", "validate", "--metadata", metadataFile.path, settingsFile.path])
        #expect(valid.lines == ["\(settingsFile.path): valid for kiosk, version 1"])
        #expect(valid.status == 0)
    }

    @Test("metadata validate lists every problem with its pointer and exits with 1")
    func invalidMetadata() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let file = folder.appendingPathComponent("bad.json")
        try CLIRunner.write(
            #"{"app": "kiosk", "version": 2, "schema": {"type": "object", "properties": {"d": {"type": "integer", "maximum": 3, "default": 4}}}}"#,
            to: file)
        let output = try await CLIRunner.run(["metadata", "validate", file.path])
        #expect(output.lines == ["\(file.path): /schema/properties/d/default: the default is not valid: must be <= 3 (got 4)"])
        #expect(output.status == 1)
    }

    @Test("import-moki refuses an app id it cannot derive, with exit 2")
    func badAppID() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let file = folder.appendingPathComponent("Kiosk Schema.json")
        try CLIRunner.write(#"{"Version": 1, "Groups": []}"#, to: file)
        let output = try await CLIRunner.run(["metadata", "import-moki", file.path])
        #expect(output.status == 2)
        let fixed = try await CLIRunner.run(["metadata", "import-moki", file.path, "--app", "kiosk"])
        #expect(fixed.status == 0)
    }
}

@Suite("Config/examples stay true")
struct ExampleTests {
    static let examples = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Config/examples")

    @Test("the signage example imports; its good settings pass, its bad ones fail with every reason, its tests pass")
    func signage() async throws {
        let folder = try CLIRunner.temporaryDirectory()
        let imported = try await CLIRunner.run([
            "metadata", "import-moki", Self.examples.appendingPathComponent("signage.SettingsSchema.json").path, "--writable", "mute",
        ])
        #expect(imported.status == 0)
        let metadata = folder.appendingPathComponent("signage.metadata.json")
        try CLIRunner.write(imported.standardOutput, to: metadata)

        let good = Self.examples.appendingPathComponent("signage.good-settings.json").path
        #expect(try await CLIRunner.run(["settings", "validate", "--metadata", metadata.path, good]).status == 0)

        let bad = Self.examples.appendingPathComponent("signage.bad-settings.json").path
        let output = try await CLIRunner.run(["settings", "validate", "--metadata", metadata.path, bad])
        #expect(
            output.lines == [
                "\(bad): /brightness: must be one of 40, 80, 100 (got 90)",
                #"\#(bad): /showClock: must be boolean (got string "yes")"#,
                "\(bad): /servicePin: must be string (got integer)",
                #"\#(bad): /rotation/0/secs: unknown property "secs""#,
                #"\#(bad): /volume: unknown property "volume""#,
            ])
        #expect(!output.standardOutput.contains("7319"))
        #expect(output.status == 1)

        let tests = try await CLIRunner.run(["schema", "test", Self.examples.appendingPathComponent("signage.tests.json").path])
        #expect(tests.lines == ["6 passed, 0 failed, 0 skipped"])
        #expect(tests.status == 0)
    }
}
