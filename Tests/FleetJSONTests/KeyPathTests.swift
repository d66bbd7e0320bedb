import FleetJSON
import Testing

@Suite("Key paths: reading and writing inside a value")
struct KeyPathTests {
    static let settings: JSONValue = [
        "playlist": [["content": "a.mp4", "seconds": 10], ["content": "b.mp4"]], "display": ["size/inch": 55, "brightness": 80],
        "title": "Lobby",
    ]

    @Test("a key path is a JSON pointer without its leading slash; ~1 and ~0 escape; an empty or badly escaped one is refused")
    func parsing() throws {
        #expect(JSONPointer(keyPath: "playlist/0/content")?.tokens == ["playlist", "0", "content"])
        #expect(JSONPointer(keyPath: "/playlist/0/content") == JSONPointer(keyPath: "playlist/0/content"))
        #expect(JSONPointer(keyPath: "display/size~1inch")?.tokens == ["display", "size/inch"])
        #expect(JSONPointer(keyPath: "kiosk.greeting")?.tokens == ["kiosk.greeting"])
        #expect(JSONPointer(keyPath: "a~0b")?.keyPath == "a~0b")
        for bad in ["", "/", "a~2", "a/~"] { #expect(JSONPointer(keyPath: bad) == nil, "\(bad)") }
        #expect(JSONPointer(segments: ["display", "size/inch"])?.tokens == ["display", "size/inch"])
        #expect(JSONPointer(segments: ["display", "size~1inch"])?.tokens == ["display", "size/inch"])
        #expect(JSONPointer(segments: []) == nil)
        let path = try #require(JSONPointer(keyPath: "display/size~1inch"))
        #expect(Self.settings[pointer: path] == 55)
    }

    @Test("setting replaces, makes missing objects, appends at the length or -, and removes (later elements move up)")
    func setting() throws {
        func set(_ path: String, _ value: JSONValue?) throws -> JSONValue {
            try Self.settings.setting(value, at: #require(JSONPointer(keyPath: path)))
        }
        #expect(try set("playlist/1/content", "c.mp4")["playlist"]?[pointer: JSONPointer(keyPath: "1/content")!] == "c.mp4")
        #expect(try set("display/night/brightness", 20)["display"]?["night"] == ["brightness": 20])
        #expect(try set("playlist/2", ["content": "d.mp4"])["playlist"]?.arrayValue?.count == 3)
        #expect(try set("playlist/-", "e")["playlist"]?.arrayValue?.last == "e")
        #expect(try set("playlist/0", nil)["playlist"] == [["content": "b.mp4"]])
        #expect(try set("display/brightness", nil)["display"] == ["size/inch": 55])
        #expect(try set("title", "Hall")["title"] == "Hall")
    }

    @Test("the merge patch from an old value to a new one gives the new value applied to the old one, and applied to nothing")
    func mergePatchBetween() {
        let old: JSONValue = ["a": 1, "b": ["c": 2, "d": 3], "e": [1, 2]]
        let new: JSONValue = ["a": 1, "b": ["c": 4], "e": [1]]
        let patch = JSONValue.wholeValueMergePatch(from: old, to: new)
        #expect(old.applyingMergePatch(patch) == new)
        #expect(JSONValue.null.applyingMergePatch(patch) == new)
        #expect(JSONValue.wholeValueMergePatch(from: nil, to: new) == new)
        #expect(JSONValue.wholeValueMergePatch(from: "text", to: new) == new)
    }

    @Test("what cannot be done says where: an index past the end, a path through text, removing what is not there")
    func refusals() {
        let cases: [(String, JSONValue?, String)] = [
            ("playlist/3/content", "x", "playlist/3"),
            ("playlist/2/content", "x", "playlist/2"),
            ("playlist/x", "x", "playlist/x"),
            ("playlist/01", "x", "playlist/01"),
            ("title/first", "x", "title"),
            ("display/contrast", nil, "display/contrast"),
            ("playlist/2", nil, "playlist/2"),
        ]
        for (path, value, location) in cases {
            do {
                _ = try Self.settings.setting(value, at: JSONPointer(keyPath: path)!)
                Issue.record("\(path) was accepted")
            } catch {
                #expect(error.location.keyPath == location, "\(path): \(error)")
                #expect(!error.message.contains("Lobby"), "a value is never quoted (it may be a secret): \(error)")
            }
        }
        #expect(throws: KeyPathError(at: JSONPointer(keyPath: "title")!, .mismatch, "holds a string, not an object or an array")) {
            try Self.settings.setting("x", at: JSONPointer(keyPath: "title/first")!)
        }
    }
}
