import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol
import Foundation
import Testing

@Suite("The agent's files on the device")
struct DeviceFilesTests {
    func folder() throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-files-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url.path
    }

    static func settings(_ revision: Int64, _ values: JSONObject = ["a": 1]) -> DeviceSettings {
        DeviceSettings(app: "kiosk", schemaVersion: 1, revision: revision, syncedAt: 1_795_000_000, values: values)
    }

    @Test("each write keeps the generation before it; the file form reads back")
    func generations() throws {
        let directory = try folder()
        let file = GenerationFile(path: directory + "/settings.json", previousPath: directory + "/settings.previous.json")
        try file.write(Self.settings(1).fileBytes, mode: 0o640, group: nil)
        #expect(try file.readPrevious() == nil)
        try file.write(Self.settings(2).fileBytes, mode: 0o640, group: nil)
        try file.write(Self.settings(3).fileBytes, mode: 0o640, group: nil)
        let loaded = SettingsOnDisk.load(file, app: "kiosk")
        #expect(loaded.source == .current && loaded.settings == Self.settings(3) && loaded.problems.isEmpty)
        #expect(try DeviceSettings(json: try JSONParser.parse(try #require(try file.readPrevious()))) == Self.settings(2))
        let text = String(decoding: try #require(try file.readCurrent()), as: UTF8.self)
        #expect(text.contains("\"syncedAt\": \"2026-11-18T") && text.hasSuffix("}\n"))
        #expect(try FileSystem.entryNames(of: directory).sorted() == ["settings.json", "settings.previous.json"])
        let attributes = try FileManager.default.attributesOfItem(atPath: file.path)
        #expect(attributes[.posixPermissions] as? Int == 0o640)
    }

    @Test(
        "a torn, foreign or invalid settings.json falls back to the previous generation, saying why",
        arguments: [
            ("{\"app\": \"kiosk\", \"schemaVer", "line 1, column"),
            (
                "{\"app\": \"till\", \"schemaVersion\": 1, \"revision\": 9, \"syncedAt\": \"2026-11-18T00:00:00Z\", \"values\": {}}",
                "the settings are for \"till\""
            ),
            (
                "{\"app\": \"kiosk\", \"schemaVersion\": 1, \"revision\": 9, \"syncedAt\": \"2026-11-18T00:00:00Z\", \"values\": {\"a\": \"bad\"}}",
                "/a: rejected"
            ),
            ("", "line 1, column"),
        ])
    func fallback(current: String, reason: String) throws {
        let directory = try folder()
        let file = GenerationFile(path: directory + "/settings.json", previousPath: directory + "/settings.previous.json")
        try file.write(Self.settings(1).fileBytes, mode: 0o640, group: nil)
        try file.write(Array(current.utf8), mode: 0o640, group: nil)
        let loaded = SettingsOnDisk.load(file, app: "kiosk") { settings in settings.values["a"] == "bad" ? ["/a: rejected"] : [] }
        #expect(loaded.source == .previous && loaded.settings == Self.settings(1))
        #expect(
            loaded.problems.count == 1 && loaded.problems[0].hasPrefix(file.path + ": ") && loaded.problems[0].contains(reason),
            "\(loaded.problems)")
        try file.restorePrevious(mode: 0o640, group: nil)
        #expect(SettingsOnDisk.load(file, app: "kiosk").source == .current)
    }

    @Test("nothing on disk is a first start, not a problem; both generations bad is")
    func nothing() throws {
        let directory = try folder()
        let file = GenerationFile(path: directory + "/settings.json", previousPath: directory + "/settings.previous.json")
        let empty = SettingsOnDisk.load(file, app: "kiosk")
        #expect(empty.source == .none && empty.settings == nil && empty.problems.isEmpty)
        try FileSystem.writeAtomically(Array("x".utf8), to: file.path)
        let bad = SettingsOnDisk.load(file, app: "kiosk")
        #expect(bad.source == .none && bad.problems.count == 2)
    }

    @Test("the identity is saved 0600; an unreadable one is an error, never a reason to enroll again")
    func identity() throws {
        let directory = try folder()
        let path = directory + "/identity.json"
        #expect(try DeviceIdentity.load(path) == nil)
        let identity = DeviceIdentity(deviceId: "d-1", deviceToken: "fsd_secret", server: "https://x", enrolledAt: 1_795_000_000)
        try identity.save(to: path)
        #expect(try DeviceIdentity.load(path) == identity)
        #expect(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int == 0o600)
        try FileSystem.writeAtomically(Array("{\"deviceId\": 1}".utf8), to: path)
        #expect(throws: IdentityFileError.self) { try DeviceIdentity.load(path) }
    }

    @Test("queued reports survive a restart, keep their order, drop exact repeats and the oldest past the cap")
    func reports() throws {
        let directory = try folder()
        let path = directory + "/reports.json"
        var queue = PendingReports()
        for revision in 1...3 {
            queue.append(StatusReport(revision: Int64(revision), schemaVersion: 1, state: .applied, source: .agent))
        }
        queue.append(StatusReport(revision: 3, schemaVersion: 1, state: .applied, source: .agent))
        try queue.save(to: path)
        let loaded = PendingReports.load(path)
        #expect(loaded.reports.map(\.revision) == [1, 2, 3])
        var full = loaded
        for revision in 4...150 {
            full.append(StatusReport(revision: Int64(revision), schemaVersion: 1, state: .error, message: "m", source: .agent))
        }
        #expect(full.reports.count == PendingReports.capacity && full.reports.first?.revision == 51)
        full.removeFirst(PendingReports.capacity)
        try full.save(to: path)
        #expect(!FileManager.default.fileExists(atPath: path))
        try FileSystem.writeAtomically(Array("nonsense".utf8), to: path)
        let problems = ProblemLog()
        #expect(PendingReports.load(path) { problems.lines.append($0) }.isEmpty && problems.lines.count == 1)
    }

    @Test("status.json reads back what was written")
    func status() throws {
        let directory = try folder()
        let status = AppStatus(
            app: "kiosk", revision: 4, schemaVersion: 2, state: .error, latestRevision: 5, lastSync: 1_795_000_000,
            lastError: "revision 5: …",
            pendingReports: 1, pendingChanges: 2, awaitingAck: 5, ackDeadline: 1_795_000_060, updatedAt: 1_795_000_001)
        try status.write(to: directory + "/status.json", group: getegid())
        #expect(AppStatus.load(directory + "/status.json") == status)
        // It can carry a hook's output: never world-readable.
        #expect(try FileSystem.status(of: directory + "/status.json").map { $0.st_mode & 0o777 } == 0o640)
        #expect(AppStatus.load(directory + "/missing.json") == nil)
    }

    @Test("a sync request lands in the inbox under a complete name only")
    func inboxRequests() throws {
        let directory = try folder()
        let id = try InboxRequest.sync.submit(to: directory)
        let name = id + ".json"
        let path = directory + "/" + name
        #expect(InboxRequest.id(ofFileNamed: name) == id)
        #expect(
            InboxRequest.isRequestName(name) && !InboxRequest.isRequestName(".\(name)") && !InboxRequest.isRequestName(name + ".tmp-1-2"))
        #expect(try InboxRequest(json: try JSONParser.parse(try FileSystem.readFile(path))) == .sync)
        #expect(throws: DocumentError.self) { try InboxRequest(json: ["request": "reboot"]) }
    }
}

final class ProblemLog {
    var lines: [String] = []
}
