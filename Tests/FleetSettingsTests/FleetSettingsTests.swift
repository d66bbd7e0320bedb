import Configuration
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetSettingsConfiguration
import FoundationEssentials
import Testing

@testable import FleetSettings

#if canImport(Glibc)
import Glibc
#endif

/// A device's state folder with settings and metadata written as the agent writes them.
final class DeviceFolder {
    let root: String
    let app: FleetApp

    static let metadata: JSONValue = [
        "app": "kiosk", "version": 2,
        "schema": [
            "type": "object",
            "properties": [
                "greeting": ["type": "string", "x-writable": true],
                "volume": ["type": "integer", "minimum": 0, "maximum": 10, "x-writable": true],
                "ratio": ["type": "number"],
                "enabled": ["type": "boolean"],
                "homepage": ["type": "string", "format": "uri"],
                "playlist": ["type": "array", "items": ["type": "string"]],
                "location": ["type": "object", "properties": ["city": ["type": "string"]]],
                "pin": ["type": "string", "minLength": 4, "x-secret": true, "x-writable": true],
            ],
        ],
    ]

    static let values: JSONObject = [
        "greeting": "hello", "volume": 5, "ratio": 1.5, "enabled": true, "homepage": "https://example.com/start",
        "playlist": ["a", "b"], "location": ["city": "Oslo"], "pin": "1234",
    ]

    init() throws {
        var template = Array("/tmp/fleetsettings-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw FileError(path: "/tmp", operation: "mkdtemp") }
        root = String(cString: made)
        app = FleetApp("kiosk", stateDirectory: root + "/state", inboxDirectory: root + "/inbox")
        try FileSystem.makeDirectories(app.layout.appDirectory("kiosk"))
        try FileSystem.makeDirectories(app.layout.inboxDirectory("kiosk"))
        try app.layout.metadataFile("kiosk").write(Array(Self.metadata.serialized().utf8), mode: 0o640, group: nil)
        try write(revision: 7, values: Self.values)
    }

    func write(revision: Int64, values: JSONObject) throws {
        let settings = DeviceSettings(app: "kiosk", schemaVersion: 2, revision: revision, syncedAt: 1_800_000_000, values: values)
        try app.layout.settingsFile("kiosk").write(settings.fileBytes, mode: 0o640, group: nil)
    }

    func requests() throws -> [JSONValue] {
        let directory = app.layout.inboxDirectory("kiosk")
        return try FileSystem.entryNames(of: directory).sorted().filter(InboxRequest.isRequestName).map {
            try JSONParser.parse(try FileSystem.readFile(directory + "/" + $0))
        }
    }

    deinit { _ = try? ChildRemoval.remove(root) }
}

enum ChildRemoval {
    static func remove(_ path: String) throws {
        for name in (try? FileSystem.entryNames(of: path)) ?? [] {
            let child = path + "/" + name
            if let status = try FileSystem.status(of: child), (status.st_mode & S_IFMT) == S_IFDIR {
                try remove(child)
            } else {
                try FileSystem.removeFile(child)
            }
        }
        rmdir(path)
    }
}

@Suite("FleetSettings: reading")
struct ReadingTests {
    @Test("typed accessors read each type; revision and schema version come along")
    func typed() throws {
        let folder = try DeviceFolder()
        let settings = try folder.app.settings()
        #expect(settings.revision == 7 && settings.schemaVersion == 2)
        #expect(try settings.string("greeting") == "hello")
        #expect(try settings.integer("volume") == 5)
        #expect(try settings.double("ratio") == 1.5)
        #expect(try settings.double("volume") == 5)
        #expect(try settings.bool("enabled"))
        #expect(try settings.url("homepage") == URL(string: "https://example.com/start"))
        #expect(try settings.stringArray("playlist") == ["a", "b"])
        #expect(try settings.array("playlist") == ["a", "b"])
        #expect(try settings.dictionary("location") == ["city": "Oslo"])
    }

    @Test("a missing or mistyped setting fails naming the key, or falls back to the default")
    func failures() throws {
        let folder = try DeviceFolder()
        let settings = try folder.app.settings()
        #expect(throws: FleetSettingsError.missingSetting(app: "kiosk", key: "absent", revision: 7)) { try settings.string("absent") }
        #expect(throws: FleetSettingsError.wrongType(app: "kiosk", key: "greeting", expected: "an integer", found: "string")) {
            try settings.integer("greeting")
        }
        #expect(throws: FleetSettingsError.wrongType(app: "kiosk", key: "ratio", expected: "an integer", found: "number")) {
            try settings.integer("ratio")
        }
        #expect(settings.integer("greeting", default: 3) == 3)
        #expect(settings.string("absent", default: "x") == "x")
        #expect(settings.url("greeting", default: URL(string: "https://fallback.example")!) == URL(string: "https://fallback.example"))
        #expect(
            String(describing: FleetSettingsError.missingSetting(app: "kiosk", key: "absent", revision: 7))
                == "kiosk: no setting \"absent\" in revision 7")
    }

    @Test("no settings yet is a clear error naming the file")
    func noSettings() throws {
        let folder = try DeviceFolder()
        let other = FleetApp("signage", stateDirectory: folder.app.stateDirectory, inboxDirectory: folder.app.inboxDirectory)
        #expect {
            try other.settings()
        } throws: { error in
            "\(error)".contains(
                "signage: no settings at \(folder.app.stateDirectory)/apps/signage/settings.json: the device has not received them yet")
        }
    }
}

@Suite("FleetSettings: changing and acknowledging")
struct ChangingTests {
    @Test("writableSettings holds only x-writable keys; update leaves a set request of the changed keys only")
    func update() throws {
        let folder = try DeviceFolder()
        var writable = try folder.app.writableSettings()
        #expect(Set(writable.keys) == ["greeting", "volume", "pin"])
        writable["volume"] = 7
        writable["greeting"] = "hello"
        let request = try folder.app.update(writable)
        #expect(try folder.requests() == [["request": "set", "values": ["volume": 7]]])
        #expect(request.outcome == .pending)
    }

    @Test("a change inside an object setting is sent as the places that changed, not the whole setting")
    func updateInside() {
        let writable = WritableSettings(
            revision: 3, original: ["player": ["volume": 5, "stream": ["url": "a", "password": "fleet's"]], "tags": .null])
        var changed = writable
        changed["player"] = ["volume": 9, "stream": ["url": "a", "password": "fleet's"]]
        changed["tags"] = ["x"]
        #expect(changed.changes == ["/player/volume": 9, "/tags": ["x"]], "a new setting whole (/tags replaces)")
        var removed = writable
        removed["player"] = nil
        #expect(removed.changes == ["player": .null])
    }

    @Test("a change is checked before it is queued: not writable, not a setting, out of range, secret never quoted")
    func refusedLocally() throws {
        let folder = try DeviceFolder()
        #expect {
            try folder.app.submit(["ratio": 2])
        } throws: { error in
            "\(error)" == "kiosk: the change cannot be made: /ratio: is not x-writable: only the fleet's administrators may change it"
        }
        #expect {
            try folder.app.submit(["nope": 2])
        } throws: { error in
            "\(error)".contains("/nope: is not a setting of kiosk")
        }
        #expect {
            try folder.app.submit(["volume": 11])
        } throws: { error in
            "\(error)".contains("/volume: must be <= 10 (got 11)")
        }
        #expect {
            try folder.app.submit(["pin": "12"])
        } throws: { error in
            "\(error)".contains("/pin:") && !"\(error)".contains("12\"")
        }
        #expect(throws: FleetSettingsError.nothingChanged(app: "kiosk")) { try folder.app.update(try folder.app.writableSettings()) }
        #expect(try folder.requests().isEmpty)
    }

    @Test("acknowledge and requestSync leave their requests")
    func acknowledge() throws {
        let folder = try DeviceFolder()
        try folder.app.acknowledge(revision: 7, state: .error, message: "cannot reach the printer")
        try folder.app.requestSync()
        let requests = try folder.requests()
        #expect(requests.contains(["request": "ack", "revision": 7, "state": "error", "message": "cannot reach the printer"]))
        #expect(requests.contains(["request": "sync"]))
    }

    @Test("an outcome follows a superseded change to the change that carried its keys on, and says it was superseded")
    func outcomeChain() throws {
        let folder = try DeviceFolder()
        var journal = ChangeJournal()
        journal.enqueue(.init(id: "a", values: ["volume": 3], madeAt: 1), at: 1)
        journal.enqueue(.init(id: "b", values: ["volume": 4], madeAt: 2), at: 2)
        journal.enqueue(.init(id: "c", values: ["pin": "99"], madeAt: 2), at: 2)
        journal.confirm("b", revision: 8)
        journal.settle(upTo: 8, at: 3)
        try journal.save(to: folder.app.layout.changesFile("kiosk"), group: nil)
        #expect(folder.app.outcome(ofRequest: "a") == .superseded(by: "b", outcome: .applied(revision: 8)))
        #expect(folder.app.outcome(ofRequest: "a").isSettled)
        #expect(folder.app.outcome(ofRequest: "b") == .applied(revision: 8))
        #expect(folder.app.outcome(ofRequest: "c") == .pending)
        #expect(folder.app.outcome(ofRequest: "unknown") == .unknown)
        let waiting = try folder.app.submit(["volume": 2])
        #expect(folder.app.outcome(ofRequest: waiting.id) == .pending, "still in the inbox")
    }

    @Test("awaiting an outcome returns when changes.json records it, and pending at the timeout")
    func awaitOutcome() async throws {
        let folder = try DeviceFolder()
        let request = try folder.app.submit(["volume": 9])
        #expect(await request.outcome(waitingUpTo: .milliseconds(50)) == .pending)
        let waiting = Task { await request.outcome(waitingUpTo: .seconds(30)) }
        try await Task.sleep(for: .milliseconds(100))
        var journal = ChangeJournal()
        journal.refuseUnqueued(id: request.id, keys: ["volume"], message: "the server refused: 422", at: 1)
        try journal.save(to: folder.app.layout.changesFile("kiosk"), group: nil)
        #expect(await waiting.value == .refused("the server refused: 422"))
    }
}

@Suite("FleetSettings: the change stream")
struct ChangeStreamTests {
    static func settings(_ revision: Int64, _ volume: Int64) -> AppSettings {
        AppSettings(
            DeviceSettings(
                app: "kiosk", schemaVersion: 2, revision: revision, syncedAt: 0,
                values: ["volume": .number(.integer(volume)), "greeting": "hi"]))
    }

    @Test("the sequencer reports each new revision once, recovers one missed generation from the previous file")
    func sequencer() {
        var sequencer = SettingsSequencer(start: .current, on: .init(current: Self.settings(1, 1), previous: nil))
        #expect(sequencer.advance(.init(current: Self.settings(1, 1), previous: nil)).isEmpty)
        let second = sequencer.advance(.init(current: Self.settings(2, 2), previous: Self.settings(1, 1)))
        #expect(second.map(\.settings.revision) == [2] && second[0].changedKeys == ["volume"] && second[0].previousRevision == 1)
        #expect(sequencer.advance(.init(current: Self.settings(2, 2), previous: Self.settings(1, 1))).isEmpty)
        // Fell one behind: revision 3 is only in settings.previous.json now.
        let caughtUp = sequencer.advance(.init(current: Self.settings(4, 4), previous: Self.settings(3, 3)))
        #expect(caughtUp.map(\.settings.revision) == [3, 4])
        #expect(caughtUp.map(\.previousRevision) == [2, 3])
        // A restored older generation is what the file holds: it is reported.
        #expect(sequencer.advance(.init(current: Self.settings(3, 3), previous: nil)).map(\.settings.revision) == [3])
    }

    @Test("the stream sees each revision written to settings.json, in order, with the changed keys")
    func stream() async throws {
        let folder = try DeviceFolder()
        let app = folder.app
        var changes = app.changes(after: 7).makeAsyncIterator()
        // The stream watches from the moment changes(after:) returns; write three generations.
        var values = DeviceFolder.values
        var seen: [(Int64, [String])] = []
        for revision in Int64(8)...10 {
            values["volume"] = .number(.integer(revision - 7))
            try folder.write(revision: revision, values: values)
            if let change = await changes.next() { seen.append((change.settings.revision, change.changedKeys)) }
        }
        #expect(seen.map(\.0) == [8, 9, 10])
        #expect(seen.allSatisfy { $0.1 == ["volume"] })
    }

    @Test("a stream started after a write it was told about reports it with exact keys, from the previous generation")
    func startedLate() async throws {
        let folder = try DeviceFolder()
        var values = DeviceFolder.values
        values["greeting"] = "later"
        try folder.write(revision: 8, values: values)
        var changes = folder.app.changes(after: 7).makeAsyncIterator()
        let change = await changes.next()
        #expect(change?.settings.revision == 8 && change?.changedKeys == ["greeting"] && change?.previousRevision == 7)
    }
}

@Suite("FleetSettings as a swift-configuration provider")
struct ProviderTests {
    @Test("a ConfigReader reads fleet settings by type, nested keys by dots, secrets marked secret")
    func reader() throws {
        let folder = try DeviceFolder()
        let provider = try FleetSettingsProvider(app: folder.app)
        let config = ConfigReader(providers: [InMemoryProvider(values: ["volume": 9]), provider])
        #expect(config.int(forKey: "volume", default: 0) == 9)
        #expect(config.string(forKey: "greeting") == "hello")
        #expect(config.string(forKey: "location.city") == "Oslo")
        #expect(config.bool(forKey: "enabled") == true)
        #expect(config.double(forKey: "ratio") == 1.5)
        #expect(config.stringArray(forKey: "playlist") == ["a", "b"])
        #expect(config.int(forKey: "greeting", default: 4) == 4)
        #expect(try provider.value(forKey: ["pin"], type: .string).value?.isSecret == true)
        #expect(try provider.value(forKey: ["greeting"], type: .string).value?.isSecret == false)
        #expect(throws: FleetSettingsProviderError.self) { try provider.value(forKey: ["greeting"], type: .int) }
        #expect(try provider.value(forKey: ["absent"], type: .string).value == nil)
    }

    @Test("run() follows new revisions and watchers see them")
    func follows() async throws {
        let folder = try DeviceFolder()
        let provider = try FleetSettingsProvider(app: folder.app)
        let running = Task { await provider.run() }
        defer { running.cancel() }
        let config = ConfigReader(provider: provider)
        let (values, forward) = AsyncStream.makeStream(of: Int?.self)
        let watched = Task {
            try await config.watchInt(forKey: "volume") { updates in
                for await value in updates {
                    forward.yield(value)
                    if value == 8 { break }
                }
            }
            forward.finish()
        }
        var seen = values.makeAsyncIterator()
        #expect(await seen.next() == 5)
        var changed = DeviceFolder.values
        changed["volume"] = 8
        try folder.write(revision: 8, values: changed)
        #expect(await seen.next() == 8)
        try await watched.value
        #expect(provider.revision == 8)
    }
}
