import FleetIO
import FleetJSON
import FleetProtocol
import FleetSettingsAsCode
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The tree's layout, read and written, and the diff between a tree and the server.
@Suite struct TreeTests {
    static let sample = SettingsTree(
        apps: [
            "kiosk": SettingsTree.App(
                metadata: Array(#"{"app":"kiosk","version":3}"#.utf8),
                values: [
                    .app: TreeDocument(values: ["volume": 3, "title": "Lobby"]),
                    .group("lobby/north"): TreeDocument(values: ["volume": 5]),
                    .device("d-1"): TreeDocument(values: ["pin": TreeYAML.secretPlaceholder], secrets: ["/pin": "kiosk/pin"]),
                ])
        ],
        policies: [.app("kiosk"): ["logLevel": "debug"], .group(".hidden"): ["pollInterval": 300]],
        groups: ["arm": ["machine.arch=aarch64", "os.version=12"]])

    @Test func layout() {
        let paths = Set(Self.sample.files.keys)
        #expect(
            paths == [
                "apps/kiosk/metadata.json", "apps/kiosk/values/app.yaml", "apps/kiosk/values/group/lobby%2Fnorth.yaml",
                "apps/kiosk/values/device/d-1.yaml", "policies/app/kiosk.yaml", "policies/group/%2Ehidden.yaml", "groups/arm.yaml",
            ])
        #expect(
            String(decoding: Self.sample.files["groups/arm.yaml"] ?? [], as: UTF8.self)
                == "where:\n  - machine.arch=aarch64\n  - os.version=12\n")
    }

    @Test func filesReadBack() throws {
        #expect(try SettingsTree.read(files: Self.sample.files.merging(["README.md": [0x41]]) { $1 }) == Self.sample)
    }

    @Test func folderRoundTrip() throws {
        let directory = try TemporaryFolder()
        try Self.sample.write(to: directory.path)
        #expect(try SettingsTree.read(directory: directory.path) == Self.sample)
        // Unchanged: nothing written; a scope gone: its file removed, other files left alone.
        FileSystem.writeIfAbsent(directory.path + "/README.md")
        #expect(try Self.sample.write(to: directory.path).written.isEmpty)
        var smaller = Self.sample
        smaller.apps["kiosk"]?.values[.group("lobby/north")] = nil
        let outcome = try smaller.write(to: directory.path)
        #expect(outcome.removed == ["apps/kiosk/values/group/lobby%2Fnorth.yaml"])
        #expect(try SettingsTree.read(directory: directory.path) == smaller)
        #expect(try FileSystem.readFileIfPresent(directory.path + "/README.md") != nil)
    }

    @Test(arguments: [
        ("apps/kiosk/values/other.yaml", "not a file of a settings tree"),
        ("policies/team/x.yaml", "not a file of a settings tree"),
        ("groups/arm.yaml", "a group file holds one key"),
    ])
    func strayFilesRefused(_ path: String, _ words: String) {
        #expect {
            try SettingsTree.read(files: [path: Array("a: 1\n".utf8)])
        } throws: { error in
            "\(error)".hasPrefix(path) && "\(error)".contains(words)
        }
    }

    @Test func changesPlaceByPlace() {
        let changes = TreeDiff.changes(
            from: ["volume": 3, "greeting": "hi", "display": ["brightness": 5, "mode": "day"], "pin": "********"],
            to: ["volume": 5, "title": "Lobby", "display": ["brightness": 7, "mode": "day"], "pin": "********"],
            secretPlaces: ["/pin"])
        #expect(changes.map(\.line) == ["~ /display/brightness: 5 → 7", "- /greeting", "+ /title: \"Lobby\"", "~ /volume: 3 → 5"])
        let secret = TreeDiff.changes(from: [:], to: ["pin": "********"], secretPlaces: ["/pin"])
        #expect(secret.map(\.line) == ["+ /pin: (secret)"])
    }

    @Test func desiredValues() {
        let tree = TreeDocument(
            values: ["volume": 5, "pin": TreeYAML.secretPlaceholder, "code": TreeYAML.secretPlaceholder],
            secrets: ["/pin": "kiosk/pin", "/code": "kiosk/code"])
        // Without --prune the stored settings the tree lacks stay; an unresolved reference keeps
        // the stored secret, or is left out when none is stored.
        let kept = TreeDiff.desired(stored: ["volume": 3, "title": "x", "pin": "********"], tree: tree, prune: false, resolved: [])
        #expect(kept.values == ["volume": 5, "title": "x", "pin": "********"])
        #expect(kept.keep == ["/pin"])
        let pruned = TreeDiff.desired(stored: ["volume": 3, "title": "x"], tree: tree, prune: true, resolved: ["/code"])
        #expect(pruned.values == ["volume": 5, "code": "********"])
        #expect(pruned.keep.isEmpty)
    }

    @Test func policyPatches() {
        #expect(
            TreeDiff.policyPatch(stored: ["logLevel": "info", "jitter": 5], tree: ["logLevel": "debug"], prune: false) == [
                "logLevel": "debug"
            ])
        #expect(
            TreeDiff.policyPatch(stored: ["logLevel": "info", "jitter": 5], tree: ["logLevel": "info"], prune: true) == ["jitter": .null])
    }

    @Test func metadataSteps() {
        let v3 = Array(#"{"app":"kiosk","version":3}"#.utf8)
        let v3Pretty = Array("{\n  \"version\": 3,\n  \"app\": \"kiosk\"\n}".utf8)
        let v4 = Array(#"{"app":"kiosk","version":4}"#.utf8)
        let v3Other = Array(#"{"app":"kiosk","version":3,"title":"x"}"#.utf8)
        #expect(MetadataStep.step(tree: v3Pretty, stored: v3, file: "m") == .unchanged)
        #expect(MetadataStep.step(tree: v4, stored: v3, file: "m") == .upload(from: 3, to: 4))
        #expect(MetadataStep.step(tree: v3, stored: nil, file: "m") == .upload(from: nil, to: 3))
        guard case .refused(let lower) = MetadataStep.step(tree: v3, stored: v4, file: "apps/kiosk/metadata.json") else {
            Issue.record("a lower version was not refused")
            return
        }
        #expect(lower.contains("apps/kiosk/metadata.json") && lower.contains("3") && lower.contains("4"))
        guard case .refused = MetadataStep.step(tree: v3Other, stored: v3, file: "m") else {
            Issue.record("a changed document with the same version was not refused")
            return
        }
    }
}

/// A folder under the temporary directory, removed with everything in it at the end of the test.
final class TemporaryFolder {
    let path: String

    init() throws {
        var template = Array("\(getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp")/fleetset-tree-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FileError(path: "mkdtemp", operation: "make directory") }
        path = String(cString: made)
    }

    deinit {
        var list = (try? FileSystem.regularFiles(under: path)) ?? []
        list.sort { $0.count > $1.count }
        for file in list { unlink(path + "/" + file) }
        // Folders, deepest first (rmdir of a non-empty one fails harmlessly).
        for _ in 0..<6 {
            for file in list {
                var directory = FileSystem.parentDirectory(of: path + "/" + file)
                while directory.count > path.count {
                    rmdir(directory)
                    directory = FileSystem.parentDirectory(of: directory)
                }
            }
        }
        rmdir(path)
    }
}

extension FileSystem {
    fileprivate static func writeIfAbsent(_ path: String) {
        try? writeAtomically(Array("hello\n".utf8), to: path, mode: 0o644, durable: false)
    }
}
