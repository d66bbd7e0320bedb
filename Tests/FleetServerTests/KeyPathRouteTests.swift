import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

@Suite("Key paths over HTTP")
struct KeyPathRouteTests {
    /// `signage`: a writable `playlist` of {content, seconds}, a `display` object with a `size/inch`.
    static let metadata = """
        {"app": "signage", "version": 1, "schema": {"type": "object", "additionalProperties": false, "properties": {
          "playlist": {"type": "array", "x-writable": true, "default": [{"content": "intro.mp4", "seconds": 5}],
            "items": {"type": "object", "required": ["content"], "additionalProperties": false,
              "properties": {"content": {"type": "string"}, "seconds": {"type": "integer", "minimum": 1}}}},
          "display": {"type": "object", "default": {"size/inch": 55, "brightness": 80},
            "properties": {"size/inch": {"type": "integer"}, "brightness": {"type": "integer", "maximum": 100}}}}}}
        """

    static func path(_ text: String) -> JSONPointer { JSONPointer(keyPath: text)! }

    @Test(
        "a device reads one value by key path with the revision's ETag, 304 and wait; a missing one is 404", arguments: StoreKind.allCases)
    func deviceReads(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            _ = try await server.admin.putMetadata(app: "signage", document: Array(Self.metadata.utf8))
            let device = try await server.enrollDevice(apps: ["signage"])
            let first = try #require(try await device.client.settingValue(app: "signage", keyPath: Self.path("playlist/0/content")))
            #expect(first.value == "intro.mp4")
            #expect(try await device.client.settingValue(app: "signage", keyPath: Self.path("display/size~1inch"))?.value == 55)
            #expect(
                try await device.client.settingValue(app: "signage", keyPath: Self.path("playlist"), knownRevision: first.revision) == nil)
            let waiting = Task {
                try await device.client.settingValue(
                    app: "signage", keyPath: Self.path("playlist/0/content"), knownRevision: first.revision, wait: 30)
            }
            try await server.waitForWaiters(app: "signage")
            _ = try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("playlist/0/content"), to: "news.mp4")
            let changed = try #require(try await waiting.value)
            #expect(changed.value == "news.mp4" && changed.revision > first.revision)
            let missing = await refusal { try await device.client.settingValue(app: "signage", keyPath: Self.path("playlist/5")) }
            #expect(missing?.status == 404 && missing?.code == .unknownKey)
            let raw = try await server.raw(.get, "/v1/apps/signage/settings/display/size%2Finch", token: device.token)
            #expect(raw.status == 200 && String(decoding: raw.body, as: UTF8.self) == "55", "a %2F is part of the name")
            let otherApp = try await server.raw(.get, "/v1/apps/kiosk/settings/volume", token: device.token)
            #expect(otherApp.status == 404)
        }
    }

    @Test(
        "an admin sets and removes a value inside a setting: at the app or a group the whole setting is written, from what the scope holds or inherits; at a device only the value at the path",
        arguments: StoreKind.allCases)
    func adminWrites(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            _ = try await server.admin.putMetadata(app: "signage", document: Array(Self.metadata.utf8))
            let device = try await server.enrollDevice(apps: ["signage"], groups: ["lobby"])
            // The app scope holds no playlist: the default is the base.
            let app = try await server.admin.setValue(
                app: "signage", scope: "app", keyPath: Self.path("playlist/-"), to: ["content": "ad.mp4", "seconds": 8], message: "add")
            #expect(app.values["playlist"] == [["content": "intro.mp4", "seconds": 5], ["content": "ad.mp4", "seconds": 8]])
            // The group holds none either: it starts from the app's.
            let group = try await server.admin.setValue(
                app: "signage", scope: "group:lobby", keyPath: Self.path("playlist/0/seconds"), to: 3)
            #expect(group.values["playlist"] == [["content": "intro.mp4", "seconds": 3], ["content": "ad.mp4", "seconds": 8]])
            // At a device, only the value at the path becomes its own: the rest keeps following the fleet.
            let own = try await server.admin.setValue(
                app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display/brightness"), to: 40)
            #expect(own.values == ["/display/brightness": 40])
            _ = try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("display/size~1inch"), to: 65)
            #expect(try await device.client.settings(app: "signage")?.values["display"] == ["size/inch": 65, "brightness": 40])
            // Removing it gives the fleet's value again; removing what the device does not set is 404.
            let back = try await server.admin.setValue(
                app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display/brightness"), to: nil)
            #expect(back.values == [:])
            let notOwn = await refusal {
                try await server.admin.setValue(
                    app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display/size~1inch"), to: nil)
            }
            #expect(notOwn?.status == 404 && notOwn?.code == .unknownKey)
            // The setting itself, unset at the device, takes its key-path values with it.
            _ = try await server.admin.setValue(
                app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display/brightness"), to: 40)
            #expect(
                try await server.admin.setValue(app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display"), to: nil).values
                    == [:])
            _ = try await server.admin.setValue(
                app: "signage", scope: "device:\(device.id)", keyPath: Self.path("display/brightness"), to: 40)
            // Only a device's values hold key paths.
            let atApp = await refusal {
                try await server.admin.patchValues(app: "signage", scope: "app", patch: ["/display/brightness": 1])
            }
            #expect(atApp?.status == 400 && atApp?.code == .badKeyPath)
            let removed = try await server.admin.setValue(app: "signage", scope: "group:lobby", keyPath: Self.path("playlist/1"), to: nil)
            #expect(removed.values["playlist"] == [["content": "intro.mp4", "seconds": 3]])
            let settings = try #require(try await device.client.settings(app: "signage"))
            #expect(settings.values["playlist"] == [["content": "intro.mp4", "seconds": 3]])
            #expect(settings.values["display"] == ["size/inch": 65, "brightness": 40])
            // Recorded as any write.
            let history = try await server.admin.history(app: "signage")
            #expect(history.entries.contains { $0.message == "add" })

            // Refusals: checked as any write (422), a path that does not fit (400), nothing to remove (404).
            let invalid = await refusal {
                try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("display/brightness"), to: 101)
            }
            #expect(invalid?.status == 422)
            let through = await refusal {
                try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("playlist/0/content/x"), to: 1)
            }
            #expect(through?.status == 400 && through?.code == .badKeyPath)
            let nothing = await refusal {
                try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("display/contrast"), to: nil)
            }
            #expect(nothing?.status == 404 && nothing?.code == .unknownKey)
            let topLevel = try await server.admin.setValue(app: "signage", scope: "group:lobby", keyPath: Self.path("playlist"), to: nil)
            #expect(topLevel.values["playlist"] == nil, "a setting's own name clears it, as clear does")
            let byDevice = try await server.raw(.delete, "/v1/admin/apps/signage/values/playlist?scope=app", token: device.token)
            #expect(byDevice.status == 403)
        }
    }

    @Test(
        "a device writes a value at a key path: only it is stored; the whole setting (as agents of 0.7.0 send it) still works; a path into a setting it may not change is 403, one that does not fit 400 naming it",
        arguments: StoreKind.allCases)
    func deviceWrites(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            _ = try await server.admin.putMetadata(app: "signage", document: Array(Self.metadata.utf8))
            let device = try await server.enrollDevice(apps: ["signage"])
            let scope = "device:\(device.id)"
            var revision = try #require(try await device.client.settings(app: "signage")).revision
            let leaf = try await device.client.patchSettings(app: "signage", patch: ["/playlist/0/seconds": 9], basedOn: revision)
            #expect(leaf.values["playlist"] == [["content": "intro.mp4", "seconds": 9]])
            #expect(try await server.admin.values(app: "signage", scope: scope).values == ["/playlist/0/seconds": 9])
            // The fleet's later change of the rest reaches the device.
            _ = try await server.admin.setValue(app: "signage", scope: "app", keyPath: Self.path("playlist/0/content"), to: "news.mp4")
            let following = try #require(try await device.client.settings(app: "signage"))
            #expect(following.values["playlist"] == [["content": "news.mp4", "seconds": 9]])
            revision = following.revision
            // The console shows the setting as the device gets it, marked as held at key paths.
            let view = try await server.service.admin.scopeValues(app: "signage", scope: Scope.named(scope))
            #expect(view.values["playlist"] == [["content": "news.mp4", "seconds": 9]] && view.heldAtKeyPaths == ["playlist"])
            let explained = try await server.admin.explain(app: "signage", deviceID: device.id)
            #expect(
                explained.rows.map(\.key) == ["playlist", "playlist/0/seconds", "display"]
                    || explained.rows.map(\.key) == ["display", "playlist", "playlist/0/seconds"])

            let notWritable = await refusal {
                try await device.client.patchSettings(app: "signage", patch: ["/display/brightness": 1], basedOn: revision)
            }
            #expect(notWritable?.status == 403 && notWritable?.code == .notWritable)
            let notFitting = await refusal {
                try await device.client.patchSettings(app: "signage", patch: ["/playlist/4/seconds": 1], basedOn: revision)
            }
            #expect(notFitting?.status == 400 && notFitting?.code == .badKeyPath)
            if case .refused(_, let body, _)? = notFitting {
                #expect(body?.details.map(\.pointer) == ["/playlist/4"], "\(String(describing: body))")
            }
            let invalid = await refusal {
                try await device.client.patchSettings(app: "signage", patch: ["/playlist/0/seconds": 0], basedOn: revision)
            }
            #expect(invalid?.status == 422 && invalid?.code == .invalidValues)
            // A path deeper than the cap is refused at once (its cost bounded by the cap, not its length).
            let deep = "/playlist/0" + String(repeating: "/a", count: 20_000)
            let tooDeep = await refusal { try await device.client.patchSettings(app: "signage", patch: [deep: 1], basedOn: revision) }
            #expect(tooDeep?.status == 400 && tooDeep?.code == .badKeyPath, "\(String(describing: tooDeep))")
            // A rollout stages whole settings of the app or a group: no key paths.
            let staged = await refusal {
                try await server.admin.startRollout(
                    app: "signage", RolloutRequest(scope: "app", patch: ["/playlist/0/seconds": 2], waves: [.everyone]))
            }
            #expect(staged?.status == 400 && staged?.code == .badKeyPath)

            // An agent of the last release sends the whole setting: stored whole, as before, its key-path values replaced.
            let whole = try await device.client.patchSettings(
                app: "signage", patch: ["playlist": [["content": "mine.mp4", "seconds": 2]]], basedOn: revision)
            #expect(whole.values["playlist"] == [["content": "mine.mp4", "seconds": 2]])
            #expect(
                try await server.admin.values(app: "signage", scope: scope).values == ["playlist": [["content": "mine.mp4", "seconds": 2]]])
            // Inside a setting the device holds whole, a key path changes that value; null gives the fleet's value there.
            let inside = try await device.client.patchSettings(
                app: "signage", patch: ["/playlist/0/content": .null], basedOn: whole.revision)
            #expect(inside.values["playlist"] == [["content": "news.mp4", "seconds": 2]])

            // A key-path value the fleet's own change leaves no place for is left out, and explain says why.
            let fleetAgain = try await device.client.patchSettings(app: "signage", patch: ["playlist": .null], basedOn: inside.revision)
            let leafAgain = try await device.client.patchSettings(
                app: "signage", patch: ["/playlist/0/seconds": 4], basedOn: fleetAgain.revision)
            #expect(leafAgain.values["playlist"] == [["content": "news.mp4", "seconds": 4]])
            _ = try await server.admin.patchValues(app: "signage", scope: "app", patch: ["playlist": []])
            #expect(try await device.client.settings(app: "signage")?.values["playlist"] == [])
            let leftOut = try await server.admin.explain(app: "signage", deviceID: device.id).sources["/playlist/0/seconds"] ?? ""
            #expect(leftOut.contains("left out: playlist/0: there is no element 0"), "\(leftOut)")
        }
    }
}
