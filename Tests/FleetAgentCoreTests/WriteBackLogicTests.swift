import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("The change journal: coalescing, order, outcomes")
struct ChangeJournalTests {
    @Test("changes keep their order; a later change of a key takes over the older unsent change, values asked for together stay together")
    func coalescing() {
        var journal = ChangeJournal()
        journal.enqueue(.init(id: "1", values: ["minimum": 10, "maximum": 20], madeAt: 10), at: 10)
        journal.enqueue(.init(id: "2", values: ["greeting": "b"], madeAt: 11), at: 11)
        journal.enqueue(.init(id: "3", values: ["maximum": 30], madeAt: 12), at: 12)
        #expect(journal.queued.map(\.id) == ["2", "3"])
        #expect(journal.queued.map(\.values) == [["greeting": "b"], ["minimum": 10, "maximum": 30]])
        #expect(journal.ended == [.init(id: "1", state: .superseded, keys: ["maximum", "minimum"], supersededBy: "3", endedAt: 12)])
        #expect(journal.nextToSend?.id == "2")
        journal.enqueue(.init(id: "4", values: ["greeting": "c", "minimum": 5], madeAt: 13), at: 13)
        #expect(journal.queued.map(\.id) == ["4"])
        #expect(journal.queued[0].values == ["greeting": "c", "maximum": 30, "minimum": 5])
        #expect(journal.ended.map(\.supersededBy) == ["3", "4", "4"])
    }

    @Test("key-path values coalesce by their setting: into the older change's value, or one after the other when they cannot")
    func coalescingKeyPaths() {
        var journal = ChangeJournal()
        journal.enqueue(.init(id: "1", values: ["/player/volume": 9], madeAt: 10), at: 10)
        journal.enqueue(.init(id: "2", values: ["/player/stream/url": "u", "/player/volume": 3], madeAt: 11), at: 11)
        #expect(journal.queued.map(\.values) == [["/player/stream/url": "u", "/player/volume": 3]])
        #expect(journal.ended.map(\.id) == ["1"])
        // A whole setting takes over its key-path values.
        journal.enqueue(.init(id: "3", values: ["player": ["volume": 1]], madeAt: 12), at: 12)
        #expect(journal.queued.map(\.values) == [["player": ["volume": 1]]])
        // Two appends are two changes, in order.
        journal.enqueue(.init(id: "4", values: ["/tags/-": "a"], madeAt: 13), at: 13)
        journal.enqueue(.init(id: "5", values: ["/tags/-": "b"], madeAt: 14), at: 14)
        #expect(journal.queued.map(\.id) == ["3", "4", "5"])
    }

    @Test("long messages are cut so the file stays readable")
    func longMessage() throws {
        var journal = ChangeJournal()
        journal.refuseUnqueued(id: "r", keys: ["volume"], message: String(repeating: "x", count: 70_000), at: 1)
        #expect(journal.ended[0].message.unicodeScalars.count == ChangeJournal.maximumMessageLength)
        #expect(try ChangeJournal(json: try JSONParser.parse(Array(journal.json.serialized().utf8))) == journal)
    }

    @Test("a confirmed change is not touched by later changes, is not sent again, and is applied once settings.json holds its revision")
    func confirmAndSettle() {
        var journal = ChangeJournal()
        journal.enqueue(.init(id: "1", values: ["greeting": "a"], madeAt: 10), at: 10)
        journal.confirm("1", revision: 8)
        journal.enqueue(.init(id: "2", values: ["greeting": "b"], madeAt: 11), at: 11)
        #expect(journal.queued.map(\.id) == ["1", "2"] && journal.nextToSend?.id == "2")
        #expect(journal.settle(upTo: 7, at: 12).isEmpty)
        let outcomes = journal.settle(upTo: 9, at: 13)
        #expect(outcomes == [.init(id: "1", state: .applied, keys: ["greeting"], revision: 9, endedAt: 13)])
        #expect(journal.lookup("1") == .ended(outcomes[0]))
        #expect(journal.lookup("2") == .queued(.init(id: "2", values: ["greeting": "b"], madeAt: 11)))
        #expect(journal.lookup("3") == .unknown)
    }

    @Test("a confirmed revision the device refused ends the change refused, saying so")
    func settleRefused() {
        var journal = ChangeJournal()
        journal.enqueue(.init(id: "1", values: ["greeting": "a"], madeAt: 10), at: 10)
        journal.confirm("1", revision: 8)
        let outcome = journal.settle(upTo: 8, refusal: "/volume: must be <= 3", at: 11)
        #expect(outcome.first?.state == .refused)
        #expect(
            outcome.first?.message == "the server took the change in revision 8, but the device refused revision 8: /volume: must be <= 3")
    }

    @Test("the file form round-trips; ended outcomes are capped, oldest dropped")
    func fileForm() throws {
        var journal = ChangeJournal()
        for index in 0..<(ChangeJournal.endedCapacity + 5) {
            journal.refuseUnqueued(id: "r\(index)", keys: ["volume"], message: "no", at: 100)
        }
        journal.enqueue(.init(id: "q", values: ["greeting": "x", "pin": .null], madeAt: 1_800_000_000, confirmedRevision: 4), at: 100)
        #expect(journal.ended.count == ChangeJournal.endedCapacity && journal.ended.first?.id == "r5")
        let read = try ChangeJournal(json: try JSONParser.parse(Array(journal.json.serialized().utf8)))
        #expect(read == journal)
        #expect(throws: DocumentError.self) { try ChangeJournal(json: ["queued": [["id": "x"]], "ended": []]) }
    }
}

@Suite("Request files in the inbox")
struct RequestFileTests {
    @Test("requests are read strictly, with the member that is wrong")
    func parsing() throws {
        #expect(try InboxRequest(json: ["request": "set", "values": ["volume": 3]]) == .set(["volume": 3]))
        #expect(
            try InboxRequest(json: ["request": "ack", "revision": 4, "state": "error"]) == .ack(revision: 4, state: .error, message: ""))
        #expect(try InboxRequest(json: ["request": "sync"]) == .sync)
        #expect(throws: DocumentError(at: JSONPointer.root.appending("values"), "must name 1 to 256 settings")) {
            try InboxRequest(json: ["request": "set", "values": [:]])
        }
        #expect(throws: DocumentError(at: JSONPointer.root.appending("values"), "is not a member of a sync request")) {
            try InboxRequest(json: ["request": "sync", "values": ["a": 1]])
        }
        #expect(throws: DocumentError.self) { try InboxRequest(json: ["request": "ack", "revision": -1, "state": "applied"]) }
        #expect(throws: DocumentError(at: JSONPointer.root.appending("values"), "setting keys have 1 to 1024 characters")) {
            try InboxRequest(json: ["request": "set", "values": ["": 1]])
        }
        for request in [InboxRequest.sync, .set(["a": 1]), .ack(revision: 3, state: .unsupported, message: "m")] {
            #expect(try InboxRequest(json: request.json) == request)
        }
        #expect(
            InboxRequest.isRequestName("1-2-3.json") && !InboxRequest.isRequestName(".x.json")
                && !InboxRequest.isRequestName("a.json.tmp-1"))
        #expect(InboxRequest.id(ofFileNamed: "1-2-3.json") == "1-2-3")
    }

    @Test("links, oversized files and writers not allowed are refused with the reason; root and the agent's user always may write")
    func fileChecks() {
        let writers = Writers(users: ["kiosk": 1001], groups: ["operators": 2001])
        func check(_ kind: RequestFileCheck.Kind = .regular, links: Int = 1, size: Int = 100, owner: uid_t = 1001, group: gid_t = 1001)
            -> String?
        {
            RequestFileCheck.refusal(kind: kind, links: links, size: size, owner: owner, group: group, writers: writers, agentUser: 999)
        }
        #expect(check() == nil)
        #expect(check(owner: 1500, group: 2001) == nil)
        #expect(check(owner: 0, group: 0) == nil)
        #expect(check(owner: 999, group: 999) == nil)
        #expect(check(.other)?.hasPrefix("not a regular file") == true)
        #expect(check(links: 2) == "has 2 hard links; a request must be a file of its own")
        #expect(check(size: 70_000) == "70000 bytes, more than the 65536 a request may have")
        #expect(
            check(owner: 1500, group: 1500)
                == "written by uid 1500 (gid 1500), who may not change this app's settings; allowed: root, the agent's user, users kiosk, groups operators"
        )
    }

    @Test("writers, expectAck and ackTimeout are read from the app's entry; unknown names are refused with their pointer")
    func configuration() throws {
        func configuration(_ app: JSONValue) -> JSONValue { ["server": "https://fleet.example", "apps": [app]] }
        let read = try AgentConfiguration(
            json: configuration(["id": "kiosk", "writers": ["users": ["root"], "groups": ["root"]], "expectAck": true, "ackTimeout": 5]))
        let app = try #require(read.apps.first)
        #expect(app.writerNames == WriterNames(users: ["root"], groups: ["root"]) && app.expectAck && app.ackTimeout == .seconds(5))
        #expect(app.writers == Writers(), "read, not looked up: root and the agent's user only until resolved")
        let resolved = try read.resolvingAccounts(in: .system)
        #expect(resolved.apps.first?.writers == Writers(users: ["root": 0], groups: ["root": 0]))
        #expect(try AppConfiguration(json: ["id": "kiosk"], at: .root).ackTimeout == AppConfiguration.Defaults.ackTimeout)
        // Reading never looks names up; the separate step does, and names the key of a missing one.
        let unknown = try AgentConfiguration(json: configuration(["id": "kiosk", "writers": ["users": ["no-such-user"]]]))
        #expect(
            throws: DocumentError(
                at: JSONPointer.root.appending("apps").appending(index: 0).appending("writers").appending("users").appending(index: 0),
                "there is no user named \"no-such-user\" on this system")
        ) {
            try unknown.resolvingAccounts(in: .system)
        }
        // Any directory will do: the lookup is injected.
        let table = AccountDirectory(userID: { $0 == "kiosk" ? 1001 : nil }, groupID: { $0 == "operators" ? 2001 : nil })
        let fromTable = try AgentConfiguration(
            json: configuration(["id": "kiosk", "readers": "operators", "writers": ["users": ["kiosk"], "groups": ["operators"]]])
        ).resolvingAccounts(in: table)
        #expect(fromTable.apps.first?.readersGroup == 2001)
        #expect(fromTable.apps.first?.writers == Writers(users: ["kiosk": 1001], groups: ["operators": 2001]))
        #expect(
            throws: DocumentError(at: JSONPointer.root.appending("writers").appending("people"), "is not a key here: use users, groups")
        ) {
            try AppConfiguration(json: ["id": "kiosk", "writers": ["people": []]], at: .root)
        }
        #expect(throws: DocumentError.self) { try AppConfiguration(json: ["id": "kiosk", "ackTimeout": 0], at: .root) }
    }
}

@Suite("Checking and reading a device-side change")
struct LocalChangeTests {
    static let metadata: JSONValue = [
        "app": "kiosk", "version": 3,
        "schema": [
            "type": "object",
            "properties": [
                "greeting": ["type": "string", "x-writable": true],
                "volume": ["type": "integer", "maximum": 10, "x-writable": true],
                "brightness": ["type": "integer"],
                "ratio": ["type": ["number", "null"], "x-writable": true],
                "enabled": ["type": "boolean", "x-writable": true],
                "tags": ["type": "array", "items": ["type": "string"], "x-writable": true],
                "pin": ["type": "string", "minLength": 4, "x-secret": true, "x-writable": true],
                "code": ["type": ["integer", "string"], "x-writable": true],
            ],
        ],
    ]

    @Test("keys must exist and be x-writable; values must fit; problems earlier metadata caused do not count")
    func problems() throws {
        let metadata = try Metadata(Self.metadata)
        let current: JSONObject = ["greeting": "hi", "volume": 5, "brightness": 400]
        #expect(metadata.problems(ofChange: ["greeting": "hello", "volume": 10], to: current).isEmpty)
        #expect(
            metadata.problems(ofChange: ["brightness": 3, "nope": 1], to: current).map(\.description) == [
                "/brightness: is not x-writable: only the fleet's administrators may change it",
                "/nope: is not a setting of kiosk (schema version 3)",
            ])
        #expect(metadata.problems(ofChange: ["volume": 11], to: current).map(\.description) == ["/volume: must be <= 10 (got 11)"])
        let secret = metadata.problems(ofChange: ["pin": "12"], to: current).map(\.description)
        #expect(secret.count == 1 && secret[0].hasPrefix("/pin: ") && !secret[0].contains("12"))
        #expect(metadata.problems(ofChange: ["volume": .null], to: current).isEmpty)
    }

    @Test("a key-path value is checked by its setting (exists, x-writable) and by where it goes")
    func keyPathProblems() throws {
        let metadata = try Metadata(Self.metadata)
        let current: JSONObject = ["tags": ["a", "b"], "brightness": 3]
        #expect(metadata.problems(ofChange: ["/tags/1": "c", "/tags/-": "d"], to: current).isEmpty)
        #expect(
            metadata.problems(ofChange: ["/brightness/x": 1], to: current).map(\.description) == [
                "/brightness: is not x-writable: only the fleet's administrators may change it"
            ])
        #expect(
            metadata.problems(ofChange: ["/tags/5": "e"], to: current).map(\.description) == [
                "/tags/5: is not an index of the array (0 to 2, or - to append)"
            ])
        #expect(metadata.problems(ofChange: ["/tags/0": 7], to: current).map(\.description) == ["/tags/0: must be string (got integer 7)"])
        #expect(metadata.problems(ofChange: ["/tags/0": .null], to: current).isEmpty, "the fleet's value again: the server checks it")
    }

    @Test("values are read by the setting's schema type")
    func parsing() throws {
        let metadata = try Metadata(Self.metadata)
        #expect(try metadata.parseValue("7", forKey: "volume") == 7)
        #expect(try metadata.parseValue("7", forKey: "greeting") == "7")
        #expect(try metadata.parseValue("null", forKey: "ratio") == .null)
        #expect(try metadata.parseValue("0.5", forKey: "ratio") == 0.5)
        #expect(try metadata.parseValue("yes", forKey: "enabled") == true)
        #expect(try metadata.parseValue("Off", forKey: "enabled") == false)
        #expect(try metadata.parseValue("[\"a\"]", forKey: "tags") == ["a"])
        #expect(try metadata.parseValue("42", forKey: "code") == 42)
        #expect(try metadata.parseValue("A-42", forKey: "code") == "A-42")
        #expect(throws: ChangeProblem(JSONPointer.root.appending("volume"), "must be an integer (got \"loud\")")) {
            try metadata.parseValue("loud", forKey: "volume")
        }
        #expect(throws: ChangeProblem(JSONPointer.root.appending("enabled"), "must be true or false (got \"maybe\")")) {
            try metadata.parseValue("maybe", forKey: "enabled")
        }
        #expect(throws: ChangeProblem(JSONPointer.root.appending("nope"), "is not a setting of kiosk (schema version 3)")) {
            try metadata.parseValue("1", forKey: "nope")
        }
    }

    /// Settings of every shape the reading rule looks at: an enum of strings that look like
    /// numbers, an untyped enum, a `$ref`, lists and maps of typed values, a secret inside.
    static let shapes: JSONValue = [
        "app": "kiosk", "version": 1,
        "schema": [
            "type": "object",
            "$defs": ["seconds": ["type": "integer", "minimum": 1]],
            "properties": [
                "duration": ["type": "string", "enum": ["1", "5", "10"]],
                "mode": ["enum": ["2", "auto"]],
                "level": ["enum": [1, 2, "max"]],
                "title": ["type": "string"],
                "anything": [:],
                "delay": ["$ref": "#/$defs/seconds"],
                "playlist": [
                    "type": "array",
                    "items": [
                        "type": "object",
                        "properties": [
                            "content": ["type": "string"], "seconds": ["$ref": "#/$defs/seconds"], "muted": ["type": "boolean"],
                        ],
                    ],
                ],
                "pair": ["type": "array", "prefixItems": [["type": "string"], ["type": "integer"]]],
                "labels": ["type": "object", "additionalProperties": ["type": "string"]],
                "camera": ["type": "object", "properties": ["password": ["type": "integer", "x-secret": true]]],
                "database": ["type": "object", "properties": ["pin": ["$ref": "#/$defs/seconds", "x-secret": true]]],
                "answer": ["enum": [true, "yes"]],
                "tags": ["type": "object", "patternProperties": ["^n": ["type": "integer"]], "additionalProperties": ["type": "string"]],
            ],
        ],
    ]

    @Test("one reading for fleetset set and admin set: by the schema of the place, an enum's own values first; JSON quotes force text")
    func readingByPlace() throws {
        let metadata = try Metadata(Self.shapes)
        func read(_ text: String, _ keyPath: String) throws -> JSONValue {
            try metadata.readValue(text, at: try #require(JSONPointer(keyPath: keyPath)))
        }
        // The issue's case: an enum of strings that look like numbers takes the text.
        #expect(try read("1", "duration") == "1")
        #expect(try read("2", "mode") == "2" && (try read("auto", "mode")) == "auto")
        #expect(try read("2", "level") == 2 && (try read("max", "level")) == "max")
        // A JSON string in quotes is that string, whatever else it looks like.
        #expect(try read(#""7""#, "title") == "7")
        #expect(try read(#""true""#, "anything") == "true")
        #expect(try read(#""he said \"hi\"""#, "title") == #"he said "hi""#)
        // Text that only starts with a quote is text.
        #expect(try read(#""open"#, "title") == #""open"#)
        // No type: JSON when it is JSON, else text.
        #expect(try read("[1,2]", "anything") == [1, 2] && (try read("hello", "anything")) == "hello")
        // Inside settings, by key path: items, prefixItems, additionalProperties, $ref.
        #expect(try read("8", "delay") == 8)
        #expect(try read("8", "playlist/0/content") == "8")
        #expect(try read("8", "playlist/-/seconds") == 8)
        #expect(try read("on", "playlist/2/muted") == true)
        #expect(try read("3", "pair/0") == "3" && (try read("3", "pair/1")) == 3)
        #expect(try read("42", "labels/door") == "42")
        #expect(throws: ChangeProblem(JSONPointer("/playlist/0/seconds")!, "must be an integer (got \"soon\")")) {
            try read("soon", "playlist/0/seconds")
        }
        // A secret inside a setting is never quoted back.
        let secret = #expect(throws: ChangeProblem.self) { try read("hunter2", "camera/password") }
        #expect(secret?.description == "/camera/password: must be an integer")
        #expect(throws: ChangeProblem(JSONPointer("/nope/1")!, "is not a setting of kiosk (schema version 1)")) { try read("1", "nope/1") }
        // A secret through a $ref, x-secret beside it: the schema's own walk finds it.
        let referenced = #expect(throws: ChangeProblem.self) { try read("hunter2", "database/pin") }
        #expect(referenced?.description == "/database/pin: must be an integer")
        #expect(metadata.isSecret(at: JSONPointer("/database/pin")!) && !metadata.isSecret(at: JSONPointer("/playlist/0/seconds")!))
        // A value written as the enum lists it wins over an alias.
        #expect(try read("yes", "answer") == "yes" && (try read("true", "answer")) == true)
        // Quotes mean text: refused where the place takes none.
        #expect(
            throws: ChangeProblem(
                JSONPointer("/delay")!, "must be an integer; a value in double quotes is text (leave the quotes out)")
        ) { try read(#""8""#, "delay") }
        // No index: negative, signed or with a leading zero (never a crash); a pattern may cover a name.
        for index in ["-1", "+1", "01"] { #expect(try read("3", "pair/\(index)") == 3) }
        #expect(try read("7", "tags/name") == 7 && (try read("7", "tags/other")) == 7)
    }
}
