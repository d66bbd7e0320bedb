import FleetJSON
import Testing

@Suite("A device's own values at a key path")
struct KeyPathValuesTests {
    /// What the fleet gives the device: a player with a stream whose password it rotates, a playlist.
    static let fleet: JSONObject = [
        "player": ["volume": 5, "stream": ["url": "rtsp://cam", "password": "first"]],
        "playlist": [["content": "intro.mp4"], ["content": "news.mp4"]],
    ]

    static func effective(_ own: JSONObject, over fleet: JSONObject = fleet) -> (JSONObject, [String: KeyPathError]) {
        var values = fleet
        for (name, value) in own where !KeyPathValues.isKeyPath(name) { values[name] = value }
        let unapplied = KeyPathValues.overlay(own, onto: &values)
        return (values, unapplied)
    }

    @Test("a value inside a setting is kept alone; the rest follows the fleet, a rotated secret included")
    func leafOnly() throws {
        let own = try KeyPathValues.applying(["/player/volume": 9], to: [:], inherited: Self.fleet)
        #expect(own == ["/player/volume": 9])
        var rotated = Self.fleet
        rotated["player"] = ["volume": 5, "stream": ["url": "rtsp://cam", "password": "second"]]
        #expect(Self.effective(own, over: rotated).0["player"] == ["volume": 9, "stream": ["url": "rtsp://cam", "password": "second"]])
        // A new member of an object is a key-path value too; one under an existing one replaces it.
        let deeper = try KeyPathValues.applying(["/player/stream/codec": "h264"], to: own, inherited: Self.fleet)
        #expect(deeper == ["/player/volume": 9, "/player/stream/codec": "h264"])
        let wider = try KeyPathValues.applying(["/player/stream": ["url": "rtsp://other"]], to: deeper, inherited: Self.fleet)
        #expect(wider == ["/player/volume": 9, "/player/stream": ["url": "rtsp://other"]])
        // Inside its own key-path value, a change goes into it.
        let inside = try KeyPathValues.applying(["/player/stream/url": "rtsp://third"], to: wider, inherited: Self.fleet)
        #expect(inside == ["/player/volume": 9, "/player/stream": ["url": "rtsp://third"]])
    }

    @Test("null is the fleet's value again: key-path values there and below go; inside a whole value the place takes the fleet's")
    func nullIsTheFleets() throws {
        let own: JSONObject = ["/player/volume": 9, "/player/stream/url": "rtsp://mine"]
        #expect(try KeyPathValues.applying(["/player/stream": .null], to: own, inherited: Self.fleet) == ["/player/volume": 9])
        // A whole setting replaces (and removes) its key-path values.
        #expect(try KeyPathValues.applying(["player": .null], to: own, inherited: Self.fleet) == [:])
        let whole: JSONObject = ["playlist": [["content": "mine.mp4"], ["content": "news.mp4"], ["content": "extra.mp4"]]]
        let reset = try KeyPathValues.applying(["/playlist/0/content": .null, "/playlist/2": .null], to: whole, inherited: Self.fleet)
        #expect(reset == ["playlist": [["content": "intro.mp4"], ["content": "news.mp4"]]])
        // Nothing of the device's there, and the fleet has nothing either: nothing changes.
        #expect(try KeyPathValues.applying(["/player/nothing": .null], to: own, inherited: Self.fleet) == own)
    }

    @Test("a change of an array's length makes the device hold the whole setting as it has it, its other key-path values included")
    func appendsHoldTheWhole() throws {
        let own: JSONObject = ["/playlist/0/content": "mine.mp4"]
        let appended = try KeyPathValues.applying(["/playlist/-": ["content": "ad.mp4"]], to: own, inherited: Self.fleet)
        #expect(appended == ["playlist": [["content": "mine.mp4"], ["content": "news.mp4"], ["content": "ad.mp4"]]])
        let byIndex = try KeyPathValues.applying(["/playlist/2": ["content": "ad.mp4"]], to: [:], inherited: Self.fleet)
        #expect(byIndex["playlist"]?[pointer: JSONPointer("/2")!] == ["content": "ad.mp4"])
        // Then a path inside goes into the whole value.
        let then = try KeyPathValues.applying(["/playlist/1/content": "x.mp4"], to: appended, inherited: Self.fleet)
        #expect(then["playlist"]?[pointer: JSONPointer("/1/content")!] == "x.mp4" && then.count == 1)
    }

    @Test("a path that does not fit says where; one that stops fitting after the fleet's change is left out, with why")
    func notFitting() throws {
        #expect(throws: KeyPathError.self) { try KeyPathValues.applying(["/playlist/5/content": "x"], to: [:], inherited: Self.fleet) }
        do {
            _ = try KeyPathValues.applying(["/player/volume/loud": 1], to: [:], inherited: Self.fleet)
            Issue.record("a path through a number was taken")
        } catch let error as KeyPathError {
            #expect(error.location == JSONPointer("/player/volume")!, "\(error)")
        }
        let own = try KeyPathValues.applying(["/playlist/1/content": "mine.mp4"], to: [:], inherited: Self.fleet)
        let shorter: JSONObject = ["playlist": [["content": "intro.mp4"]]]
        let (values, unapplied) = Self.effective(own, over: shorter)
        #expect(values["playlist"] == [["content": "intro.mp4"]])
        #expect(unapplied["/playlist/1/content"]?.location == JSONPointer("/playlist/1")!, "\(unapplied)")
    }

    @Test("two queued changes combine as the server would apply them one after the other, or not at all")
    func combining() {
        #expect(KeyPathValues.combining(["/player/volume": 9], ["/player/volume": 3]) == ["/player/volume": 3])
        #expect(KeyPathValues.combining(["/player/volume": 9], ["player": ["volume": 1]]) == ["player": ["volume": 1]])
        #expect(
            KeyPathValues.combining(["player": ["volume": 1]], ["/player/stream/url": "u"]) == [
                "player": ["volume": 1, "stream": ["url": "u"]]
            ])
        #expect(KeyPathValues.combining(["player": .null], ["/player/volume": 2]) == ["player": .null, "/player/volume": 2])
        #expect(KeyPathValues.combining(["/playlist/-": ["content": "a"]], ["/playlist/-": ["content": "b"]]) == nil)
        #expect(KeyPathValues.combining(["player": ["volume": 1]], ["/player/volume": .null]) == nil)
    }

    @Test("a key path deeper than 32 parts is refused when written and left out when stored, at once")
    func depth() throws {
        let deep = "/player" + String(repeating: "/a", count: 10_000)
        let clock = ContinuousClock()
        let started = clock.now
        #expect(throws: KeyPathError.self) { try KeyPathValues.applying([deep: 1], to: [:], inherited: Self.fleet) }
        let (values, unapplied) = Self.effective([deep: 1])
        #expect(values == Self.fleet && unapplied[deep] != nil)
        #expect(clock.now - started < .seconds(5), "a walk bounded by the depth cap, not by the path's length")
        let atCap = "/player" + String(repeating: "/a", count: KeyPathValues.maximumDepth - 1)
        #expect(try KeyPathValues.applying([atCap: 1], to: [:], inherited: Self.fleet) == [atCap: 1])
    }

    @Test("paths of one depth go by index as numbers (9 before 10), appends after indices")
    func order() throws {
        let ten: JSONObject = ["tags": .array((0..<10).map { .string("t\($0)") })]
        let own = try KeyPathValues.applying(["/tags/10": "new", "/tags/9": "last"], to: [:], inherited: ten)
        #expect(own["tags"]?[pointer: JSONPointer("/9")!] == "last" && own["tags"]?[pointer: JSONPointer("/10")!] == "new")
        let appended = try KeyPathValues.applying(["/tags/-": "end", "/tags/0": "first"], to: [:], inherited: ten)
        #expect(appended["tags"]?[pointer: JSONPointer("/0")!] == "first" && appended["tags"]?[pointer: JSONPointer("/10")!] == "end")
    }

    @Test("a stored value never appends to the fleet's array, and needs the setting to have a value")
    func strictOverlay() throws {
        let (values, unapplied) = Self.effective(["/tags/2": "z"], over: ["tags": ["a", "b"]])
        #expect(values["tags"] == ["a", "b"] && unapplied["/tags/2"]?.location == JSONPointer("/tags/2")!, "\(unapplied)")
        let (none, why) = Self.effective(["/playlist/0/content": "x"], over: [:])
        #expect(none == [:] && why["/playlist/0/content"]?.location == JSONPointer("/playlist")!)
        // Written where the setting has no value, the device holds the setting whole.
        #expect(try KeyPathValues.applying(["/display/brightness": 40], to: [:], inherited: [:]) == ["display": ["brightness": 40]])
    }

    @Test("names: a key-path value begins with /; its setting is the first part; shown as a key path")
    func names() {
        #expect(KeyPathValues.isKeyPath("/player/volume") && !KeyPathValues.isKeyPath("player"))
        #expect(KeyPathValues.setting(of: "/a~1b/c") == "a/b" && KeyPathValues.setting(of: "volume") == "volume")
        #expect(KeyPathValues.shownName("/a~1b/c") == "a~1b/c")
        #expect(KeyPathValues.value(at: "/player/stream/url", in: Self.fleet) == "rtsp://cam")
    }
}

@Suite("What an edited setting sends")
struct KeyPathChangesTests {
    @Test("only the places that differ, as key-path values; a place whose members or length differ, whole; a removed setting, null")
    func changes() throws {
        let old: JSONValue = ["volume": 5, "stream": ["url": "a", "password": "p"], "tags": ["x", "y"]]
        #expect(
            KeyPathValues.changes(
                from: old, to: ["volume": 6, "stream": ["url": "b", "password": "p"], "tags": ["x", "y"]], setting: "player")
                == ["/player/volume": 6, "/player/stream/url": "b"])
        #expect(
            KeyPathValues.changes(from: old, to: ["volume": 5, "stream": ["url": "a"], "tags": ["x", "y", "z"]], setting: "player")
                == ["/player/stream": ["url": "a"], "/player/tags": ["x", "y", "z"]])
        #expect(KeyPathValues.changes(from: old, to: ["volume": 5], setting: "player") == ["/player": ["volume": 5]])
        // An added member is a place of its own: the rest (the password) is not copied.
        var added = old
        added = ["volume": 5, "stream": ["url": "a", "password": "p", "codec": "h264"], "tags": ["x", "y"]]
        #expect(KeyPathValues.changes(from: old, to: added, setting: "player") == ["/player/stream/codec": "h264"])
        #expect(KeyPathValues.changes(from: 3, to: 4, setting: "volume") == ["volume": 4])
        #expect(KeyPathValues.changes(from: old, to: nil, setting: "player") == ["player": .null])
        #expect(KeyPathValues.changes(from: old, to: old, setting: "player") == [:])
        // "/key" replaces the setting whole (a merge patch would keep members the device held).
        #expect(
            try KeyPathValues.applying(["/player": ["volume": 1]], to: ["player": ["volume": 5, "extra": 1]], inherited: [:]) == [
                "player": ["volume": 1]
            ])
    }
}
