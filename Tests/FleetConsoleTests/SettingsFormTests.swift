import FleetConsole
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import Testing

/// Metadata read from test text (a mistake in the text stops the run with the reason).
func testMetadata(_ text: String) -> Metadata {
    do {
        return try Metadata(json: Array(text.utf8))
    } catch {
        fatalError("the test metadata does not load: \(error)")
    }
}

@Suite("The settings form drawn from metadata, and the merge patch it sends")
struct SettingsFormTests {
    static let metadata = testMetadata(
        #"""
        {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
          "greeting": {"type": "string", "title": "Greeting <b>", "default": "Welcome", "maxLength": 80, "x-writable": true},
          "idle": {"type": "string", "enum": ["1", "5"], "x-enumTitles": ["1 minute", "5 minutes"], "default": "1"},
          "spinner": {"type": "boolean", "default": true},
          "volume": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5},
          "ratio": {"type": "number", "multipleOf": 0.5},
          "pin": {"type": "string", "x-secret": true, "default": ""},
          "extra": {"type": "object", "default": {"a": 1}},
          "playlist": {"type": "array", "default": [{"url": "https://a", "seconds": "10"}],
            "items": {"type": "object", "properties": {"url": {"type": "string"}, "seconds": {"type": "string", "enum": ["10", "30"], "default": "10"}}}}}},
         "layout": [{"group": "Start", "items": [{"header": "First"}, {"setting": "greeting"}, {"pane": "Media", "items": [{"setting": "volume"}]}]},
                    {"group": "Saver", "items": [{"list": "playlist", "items": [{"setting": "url"}, {"setting": "seconds"}]}]}]}
        """#)

    /// The view at device scope: `volume` and `pin` set there, the rest inherited from the app or the defaults.
    static func view(values: JSONObject = ["volume": 7, "pin": "********"]) -> ScopeValuesView {
        var inherited = metadata.defaultValues
        inherited["greeting"] = "Hello"
        var sources: [String: Scope] = [:]
        for key in inherited.keys { sources[key] = .defaults }
        sources["greeting"] = .app
        return ScopeValuesView(metadata: metadata, scope: .device("d-1"), values: values, inherited: inherited, inheritedSources: sources)
    }

    static func patch(_ pairs: [(String, String)]) -> (patch: JSONObject, errors: [String: String]) {
        SettingsForm.patch(from: FormFields(pairs), view: view())
    }

    /// What the form shows, sent back unchanged.
    static let unchanged: [(String, String)] = [
        ("v:/greeting", "Hello"), ("v:/idle", "\"1\""), ("v:/spinner", "false"), ("v:/spinner", "true"), ("v:/volume", "7"),
        ("v:/ratio", ""), ("v:/pin", ""), ("v:/extra", #"{"a":1}"#), ("list:/playlist", "1"), ("row:/playlist/0", "0"),
        ("v:/playlist/0/url", "https://a"), ("v:/playlist/0/seconds", "\"10\""),
    ]

    @Test("a form sent back as shown asks for nothing")
    func unchangedForm() {
        let (patch, errors) = Self.patch(Self.unchanged)
        #expect(patch.isEmpty && errors.isEmpty, "\(patch.serializedForTest) \(errors)")
    }

    @Test("only changed settings are in the patch, typed by their schema; a reset is null only where set")
    func changes() {
        var fields = Self.unchanged.filter { !["v:/greeting", "v:/volume", "v:/spinner", "v:/idle"].contains($0.0) }
        fields += [
            ("v:/greeting", "Hi <there>"), ("v:/volume", "3"), ("v:/spinner", "false"), ("v:/idle", "\"5\""), ("v:/ratio", "1.5"),
            ("reset:/extra", "1"), ("v:/pin", "4321"),
        ]
        let (patch, errors) = Self.patch(fields)
        #expect(errors.isEmpty)
        #expect(patch == ["greeting": "Hi <there>", "volume": 3, "spinner": false, "idle": "5", "ratio": 1.5, "pin": "4321"])
        let (reset, _) = Self.patch(Self.unchanged + [("reset:/volume", "1"), ("reset:/pin", "1")])
        #expect(reset == ["volume": nil, "pin": nil] as JSONObject)
    }

    @Test("text that is not a value of its field is an error at its pointer, and asks for nothing")
    func unreadable() {
        let fields = Self.unchanged.filter { !["v:/volume", "v:/extra"].contains($0.0) } + [("v:/volume", "ten"), ("v:/extra", "{")]
        let (patch, errors) = Self.patch(fields)
        #expect(patch.isEmpty)
        #expect(errors["/volume"] == "\"ten\" is not a number")
        #expect(errors["/extra"]?.hasPrefix("is not JSON") == true)
        let (_, fraction) = Self.patch(Self.unchanged.filter { $0.0 != "v:/volume" } + [("v:/volume", "2.5")])
        #expect(fraction["/volume"] == "must be a whole number (got 2.5)")
        let (_, emptied) = Self.patch(Self.unchanged.filter { $0.0 != "v:/volume" } + [("v:/volume", " ")])
        #expect(emptied["/volume"] == "enter a number, or reset the setting to its inherited value")
    }

    @Test("list rows: removed, added and reordered rows make the new array; an unticked new row adds nothing")
    func lists() {
        let view = Self.view(values: [
            "playlist": [["url": "https://a", "seconds": "10", "kept": true], ["url": "https://b", "seconds": "30"]]
        ])
        let fields = FormFields([
            ("list:/playlist", "1"),
            ("row:/playlist/0", "1"), ("v:/playlist/0/url", "https://b2"), ("v:/playlist/0/seconds", "\"30\""),
            ("row:/playlist/1", "new"), ("v:/playlist/1/url", "https://c"), ("v:/playlist/1/seconds", "\"10\""),
            ("row:/playlist/2", "0"), ("v:/playlist/2/url", "https://a"), ("v:/playlist/2/seconds", "\"10\""), ("remove:/playlist/2", "1"),
            ("v:/playlist/3/url", "not added: its row box is not ticked"),
        ])
        let (patch, errors) = SettingsForm.patch(from: fields, view: view)
        #expect(errors.isEmpty)
        #expect(patch == ["playlist": [["url": "https://b2", "seconds": "30"], ["url": "https://c", "seconds": "10"]]])
        // Members the form does not show survive in the rows they belong to.
        let kept = FormFields([
            ("list:/playlist", "1"), ("row:/playlist/0", "0"), ("v:/playlist/0/url", "https://z"), ("row:/playlist/1", "1"),
        ])
        let (keptPatch, _) = SettingsForm.patch(from: kept, view: view)
        #expect(keptPatch == ["playlist": [["url": "https://z", "seconds": "10", "kept": true], ["url": "https://b", "seconds": "30"]]])
    }

    @Test("a setting the device holds only places of: shown as it gets it; unchanged asks for nothing; changed, it is set whole")
    func heldAtKeyPaths() {
        var inherited = Self.metadata.defaultValues
        inherited["greeting"] = "Hello"
        let view = ScopeValuesView(
            metadata: Self.metadata, scope: .device("d-1"), values: ["extra": ["a": 1, "b": 2]], inherited: inherited,
            inheritedSources: [:], heldAtKeyPaths: ["extra"])
        #expect(SettingsForm.patch(from: FormFields([("v:/extra", #"{"a":1,"b":2}"#)]), view: view).patch.isEmpty)
        let (patch, errors) = SettingsForm.patch(from: FormFields([("v:/extra", #"{"a":3}"#)]), view: view)
        #expect(errors.isEmpty && patch == ["/extra": ["a": 3]], "\(patch.serializedForTest)")
    }

    @Test("the form: the layout's groups, header and pane, controls from the schema, the origin of each value, no secret")
    func rendering() {
        let html = SettingsForm(view: Self.view(values: ["volume": 7, "pin": "hunter2"])).render(action: "/save", csrf: "token-1").text
        #expect(html.contains(#"<input type="hidden" name="csrf" value="token-1">"#))
        #expect(html.contains("<section class=\"group\"><h2>Start</h2><h3 class=\"header\">First</h3>"))
        #expect(html.contains("<fieldset class=\"pane\"><legend>Media</legend>"))
        #expect(html.contains("<label for=\"f-2f-greeting\">Greeting &lt;b&gt;</label>"))
        #expect(html.contains(#"maxlength="80""#) && html.contains(#"value="Hello""#))
        #expect(html.contains(#"<option value="&quot;5&quot;">5 minutes</option>"#))
        #expect(html.contains(#"type="number" id="f-2f-volume" name="v:/volume" inputmode="numeric" min="0" max="10" step="1" value="7""#))
        #expect(html.contains(#"step="0.5""#))
        #expect(html.contains(#"<input type="checkbox" class="switch" id="f-2f-spinner" name="v:/spinner" value="true" checked"#))
        #expect(html.contains("Inherited from the app scope"))
        #expect(html.contains("set at device:d-1") && html.contains(#"name="reset:/volume""#))
        #expect(!html.contains(#"name="reset:/greeting""#), "nothing to reset where nothing is set")
        #expect(html.contains(#"type="password" id="f-2f-pin""#) && !html.contains("hunter2"), "a secret is never shown")
        #expect(html.contains("<template class=\"list-new-row\">") && html.contains("row:/playlist/__N__"))
        #expect(html.contains(#"<label class="add"><input type="checkbox" name="row:/playlist/1" value="new"> Add this item</label>"#))
        #expect(html.contains("<h2>Other settings</h2>"), "settings the layout does not place are still editable")
        #expect(html.contains(#"<textarea id="f-2f-extra" name="v:/extra""#))
    }

    @Test("errors appear next to their field, marked for assistive technology, and in a summary")
    func errors() {
        let form = SettingsForm(view: Self.view(), errors: ["/volume": "must be <= 10 (got 12)"], submitted: ["volume": 12])
        let html = form.render(action: "/save", csrf: "t").text
        #expect(html.contains(#"<div class="field invalid" data-pointer="/volume">"#))
        #expect(html.contains(#"aria-describedby="f-2f-volume-error" aria-invalid="true" "#) || html.contains(#"aria-invalid="true""#))
        #expect(html.contains(#"<p class="field-error" id="f-2f-volume-error">must be &lt;= 10 (got 12)</p>"#))
        #expect(html.contains(#"value="12""#), "the refused value is shown as entered")
        #expect(html.contains(##"<li><a href="#f-2f-volume">/volume</a>: must be &lt;= 10 (got 12)</li>"##))
    }
}

@Suite("What the settings form never does: show or overwrite secrets, write what nobody entered, keep removed members")
struct SettingsFormSafetyTests {
    static let metadata = testMetadata(
        #"""
        {"app": "a", "version": 1, "schema": {"type": "object", "properties": {
          "pinLength": {"type": "integer", "x-secret": true, "default": 4},
          "mode": {"type": "string", "enum": ["x", "y"], "x-secret": true},
          "locked": {"type": "boolean", "x-secret": true},
          "cameras": {"type": "array", "items": {"type": "object", "properties": {
            "url": {"type": "string"}, "auth": {"type": "object", "properties": {"password": {"type": "string", "x-secret": true}}}}}},
          "note": {"type": "string"},
          "channel": {"type": "string", "enum": ["a", "b"]},
          "flag": {"type": "boolean"},
          "limits": {"type": "object"}}}}
        """#)

    static func view(_ values: JSONObject) -> ScopeValuesView {
        let masked = metadata.masked(values)
        return ScopeValuesView(
            metadata: metadata, scope: .app, values: masked, inherited: metadata.masked(metadata.defaultValues),
            inheritedSources: ["pinLength": .defaults])
    }

    @Test("secrets that are not plain strings, and settings with secrets inside, are never drawn and never patched")
    func protectedSettings() {
        let view = Self.view([
            "pinLength": 6, "mode": "y", "locked": true, "cameras": [["url": "rtsp://a", "auth": ["password": "hunter2"]]],
        ])
        let html = SettingsForm(view: view).render(action: "/save", csrf: "t").text
        for hidden in ["hunter2", "rtsp://a", "\"y\"", "v:/pinLength", "v:/mode", "v:/locked", "v:/cameras", "list:/cameras"] {
            #expect(!html.contains(hidden), "\(hidden) must not be in the form")
        }
        let protectedNotes =
            html.split(separator: "change it with <code>fleetset admin set</code>", omittingEmptySubsequences: false).count - 1
        #expect(protectedNotes == 4)
        // Whatever a forged or stale form sends for them, the patch leaves them alone.
        let fields = FormFields([
            ("v:/pinLength", ""), ("v:/mode", "\"x\""), ("v:/locked", "false"), ("list:/cameras", "1"), ("row:/cameras/0", "0"),
            ("v:/cameras/0/url", "rtsp://b"),
        ])
        let (patch, errors) = SettingsForm.patch(from: fields, view: view)
        #expect(patch.isEmpty && errors.isEmpty, "\(JSONValue.object(patch).serialized())")
        // Resetting one to inherited is still possible: it writes no value.
        #expect(SettingsForm.patch(from: FormFields([("reset:/cameras", "1")]), view: view).patch == ["cameras": nil] as JSONObject)
    }

    @Test("an empty field, an unticked box and \"not set\" where nothing was shown ask for nothing")
    func nothingEntered() {
        let view = Self.view([:])
        let html = SettingsForm(view: view).render(action: "/save", csrf: "t").text
        #expect(html.contains(#"<option value="" selected>not set</option>"#))
        let fields = FormFields([("v:/note", ""), ("v:/channel", ""), ("v:/flag", "false"), ("v:/limits", "")])
        let (patch, errors) = SettingsForm.patch(from: fields, view: view)
        #expect(patch.isEmpty && errors.isEmpty, "\(JSONValue.object(patch).serialized())")
        // What is entered is set.
        let entered = FormFields([("v:/note", "hi"), ("v:/channel", "\"b\""), ("v:/flag", "false"), ("v:/flag", "true")])
        #expect(SettingsForm.patch(from: entered, view: view).patch == ["note": "hi", "channel": "b", "flag": true])
    }

    @Test("an object edited as JSON loses the members removed from the text")
    func objectMembersRemoved() {
        let view = Self.view(["limits": ["cpu": 2, "memory": ["soft": 1, "hard": 2]]])
        let fields = FormFields([("v:/limits", #"{"memory": {"soft": 1}, "disk": 5}"#)])
        let (patch, _) = SettingsForm.patch(from: fields, view: view)
        #expect(patch == ["limits": ["cpu": nil, "memory": ["hard": nil], "disk": 5]])
        let after = SettingsValues.applyingMergePatch(.object(view.values), .object(patch))
        #expect(after["limits"] == ["memory": ["soft": 1], "disk": 5])
    }

    @Test("the digest of what a form showed changes with any value at its scope or below")
    func drawnDigest() {
        let before = SettingsForm.drawnDigest(of: Self.view(["note": "a"]))
        #expect(before == SettingsForm.drawnDigest(of: Self.view(["note": "a"])))
        #expect(before != SettingsForm.drawnDigest(of: Self.view(["note": "b"])))
        #expect(before != SettingsForm.drawnDigest(of: Self.view(["note": "a", "flag": true])))
    }
}

@Suite("The Devices list")
struct DevicesPageTests {
    @Test("a large fleet is shown 200 devices a page; the page links keep the filters; a page past the end shows the last")
    func pages() {
        let devices = (0..<450).map { index in
            Device(id: "d-\(1000 + index)", tokenHash: "h\(index)", apps: ["kiosk"], groups: ["lobby"], enrolledAt: 0, lastSeenAt: 100)
        }
        let overview = FleetOverview(apps: [], devices: devices, standings: [:], metadata: [:])
        func rows(_ page: String) -> Int { page.split(separator: "<tr data-device=", omittingEmptySubsequences: false).count - 1 }
        func page(_ number: Int) -> String {
            ConsolePages.devices(overview, filter: .init(group: "lobby", page: number), now: 100, csrf: "t").text
        }
        let first = page(1)
        #expect(rows(first) == 200)
        #expect(first.contains("450 of 450 devices, 1–200 shown.") && first.contains("d-1000") && !first.contains("d-1200"))
        #expect(first.contains(#"<a href="/console/devices?group=lobby&amp;page=2" rel="next">Next page</a>"#))
        #expect(!first.contains(#"rel="prev""#))
        let last = page(99)
        #expect(rows(last) == 50)
        #expect(last.contains("401–450 shown") && last.contains("page 3 of 3") && !last.contains(#"rel="next""#))
    }
}

@Suite("Metadata differences")
struct MetadataDifferenceTests {
    @Test("added, removed and changed settings, the layout and the title")
    func differences() throws {
        let old = try Metadata(
            json: Array(
                #"{"app":"a","version":1,"title":"A","schema":{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"string"}}},"layout":[{"setting":"x"}]}"#
                    .utf8))
        let new = try Metadata(
            json: Array(
                #"{"app":"a","version":2,"schema":{"type":"object","properties":{"x":{"type":"integer","maximum":3},"z":{"type":"boolean"}}}}"#
                    .utf8))
        let differences = MetadataDifference.between(old, new)
        #expect(
            differences == [
                .changed(key: "x", before: ["type": "integer"], after: ["type": "integer", "maximum": 3]),
                .added(key: "z", schema: ["type": "boolean"]),
                .removed(key: "y"), .layoutChanged, .titleChanged(before: "A", after: nil),
            ])
        #expect(MetadataDifference.between(nil, new).count == 2)
        #expect(MetadataDifference.between(new, new).isEmpty)
    }
}

extension JSONObject {
    var serializedForTest: String { JSONValue.object(self).serialized() }
}
