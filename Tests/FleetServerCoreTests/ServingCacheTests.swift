import FleetJSON
import FleetMetadata
import FleetServerCore
import Testing

@Suite("What the hot path keeps in memory")
struct ServingCacheTests {
    let metadata: Metadata

    init() throws {
        metadata = try Metadata(
            json: Array(
                #"{"app":"kiosk","version":1,"schema":{"type":"object","properties":{"volume":{"type":"integer","default":5}}}}"#.utf8))
    }

    func device(_ id: String, token: String, pending: String? = nil) -> Device {
        Device(id: id, tokenHash: token, apps: ["kiosk"], groups: ["lobby"], enrolledAt: 0, pendingTokenHash: pending)
    }

    @Test("an entry read from the store before an invalidation is not kept: a read that raced a write never puts stale state back")
    func staleFillDropped() {
        let cache = ServingCache()
        let epoch = cache.epoch
        cache.invalidate(device: "d-1")
        cache.fill(device("d-1", token: "h1"), readAt: epoch)
        #expect(cache.device(tokenHash: "h1") == nil)
        cache.fill(device("d-1", token: "h1"), readAt: cache.epoch)
        #expect(cache.device(tokenHash: "h1")?.id == "d-1")
        let before = cache.epoch
        cache.invalidate(app: "kiosk", scope: .app)
        _ = cache.fillSharedLayers(app: "kiosk", groups: [], metadata: metadata, appValues: [:], groupValues: [:], readAt: before)
        #expect(cache.sharedLayers(app: "kiosk", groups: []) == nil)
    }

    @Test("a device change forgets its token, its pending token, its own values and its revisions, and no other device's")
    func deviceInvalidation() {
        let cache = ServingCache()
        cache.fill(device("d-1", token: "h1", pending: "p1"), readAt: cache.epoch)
        cache.fill(device("d-2", token: "h2"), readAt: cache.epoch)
        cache.fill(deviceValues: ["volume": 3], app: "kiosk", deviceID: "d-1", readAt: cache.epoch)
        cache.record(RevisionState(revision: 4, fingerprint: 9), app: "kiosk", deviceID: "d-1")
        #expect(cache.device(tokenHash: "p1")?.id == "d-1")
        cache.invalidate(device: "d-1")
        #expect(cache.device(tokenHash: "h1") == nil && cache.device(tokenHash: "p1") == nil && cache.device(id: "d-1") == nil)
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == nil)
        #expect(cache.revision(app: "kiosk", deviceID: "d-1") == nil)
        #expect(cache.device(tokenHash: "h2")?.id == "d-2")
    }

    @Test("a write of values forgets exactly the layers it reaches; a metadata upload (app scope) the app's metadata too")
    func valueInvalidation() throws {
        let cache = ServingCache()
        let stored = StoredMetadata(app: "kiosk", version: 1, document: "{}")
        cache.fill(stored, parsed: metadata, readAt: cache.epoch)
        for groups in [["lobby"], ["hall"], []] {
            _ = cache.fillSharedLayers(
                app: "kiosk", groups: groups, metadata: metadata, appValues: [:], groupValues: [:], readAt: cache.epoch)
        }
        _ = cache.fillSharedLayers(
            app: "other", groups: ["lobby"], metadata: metadata, appValues: [:], groupValues: [:], readAt: cache.epoch)
        cache.fill(deviceValues: ["volume": 3], app: "kiosk", deviceID: "d-1", readAt: cache.epoch)
        cache.invalidate(app: "kiosk", scope: .group("lobby"))
        #expect(cache.sharedLayers(app: "kiosk", groups: ["lobby"]) == nil)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["hall"]) != nil && cache.sharedLayers(app: "kiosk", groups: []) != nil)
        #expect(cache.sharedLayers(app: "other", groups: ["lobby"]) != nil)
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == ["volume": 3])
        cache.invalidate(app: "kiosk", scope: .device("d-1"))
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == nil)
        #expect(cache.metadata(app: "kiosk") != nil)
        cache.invalidate(app: "kiosk", scope: .app)
        #expect(cache.metadata(app: "kiosk") == nil)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["hall"]) == nil && cache.sharedLayers(app: "kiosk", groups: []) == nil)
        #expect(cache.sharedLayers(app: "other", groups: ["lobby"]) != nil)
    }

    @Test("shared layers are the same for the same groups in any order, and their text is the values' text")
    func sharedLayers() throws {
        let cache = ServingCache()
        let layers = cache.fillSharedLayers(
            app: "kiosk", groups: ["b", "a", "b"], metadata: metadata, appValues: ["volume": 7], groupValues: [:], readAt: cache.epoch)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["a", "b"])?.fingerprint == layers.fingerprint)
        #expect(layers.valuesText == #"{"volume":7}"#)
        #expect(layers.fingerprint == layers.effective.fingerprint(schemaVersion: 1))
    }

    @Test("a revision never goes back: of two racing requests the later revision stays")
    func revisionsMonotone() {
        let cache = ServingCache()
        cache.record(RevisionState(revision: 6, fingerprint: 2), app: "kiosk", deviceID: "d-1")
        cache.record(RevisionState(revision: 5, fingerprint: 1), app: "kiosk", deviceID: "d-1")
        #expect(cache.revision(app: "kiosk", deviceID: "d-1") == RevisionState(revision: 6, fingerprint: 2))
        cache.record(RevisionState(revision: 7, fingerprint: 1), app: "kiosk", deviceID: "d-1")
        #expect(cache.revision(app: "kiosk", deviceID: "d-1") == RevisionState(revision: 7, fingerprint: 1))
    }
}
