import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import PosixThreads
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
        cache.fill(deviceValues: ["volume": 3], app: "kiosk", deviceID: "d-1", readAt: before)
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == nil)
    }

    @Test(
        "policy tags are kept per apps and groups (in any order) until a policy changes; one resolved before a change is neither kept nor found"
    )
    func policyTags() {
        let cache = ServingCache()
        let key = ServingCache.PolicyTagKey(apps: ["kiosk", "panel"], groups: ["lobby", "east", "lobby"])
        let epoch = cache.policyEpoch
        cache.record(policyTag: "aaaa", for: key, readAt: epoch)
        #expect(cache.policyTag(key, at: epoch) == nil, "no tag without the policies it was resolved from")
        cache.record(policies: [.app("kiosk"): AgentPolicy(jitter: 5)], readAt: epoch)
        cache.record(policyTag: "aaaa", for: key, readAt: epoch)
        #expect(cache.policyTag(ServingCache.PolicyTagKey(apps: ["panel", "kiosk"], groups: ["east", "lobby"]), at: epoch) == "aaaa")
        #expect(cache.policyTag(ServingCache.PolicyTagKey(apps: ["kiosk", "panel"], groups: ["east"]), at: epoch) == nil)
        #expect(cache.policyTag(ServingCache.PolicyTagKey(apps: ["kiosk"], groups: ["east", "lobby"]), at: epoch) == nil)

        cache.invalidatePolicies()
        let changed = cache.policyEpoch
        #expect(cache.policyTag(key, at: changed) == nil)
        cache.record(policies: [:], readAt: changed)
        cache.record(policyTag: "bbbb", for: key, readAt: epoch)
        #expect(cache.policyTag(key, at: changed) == nil, "resolved from the policies before the change")
        cache.record(policyTag: "cccc", for: key, readAt: changed)
        #expect(cache.policyTag(key, at: changed) == "cccc")
        #expect(cache.policyTag(key, at: epoch) == nil, "a request that read the policies before the change does not take it")
        cache.invalidateAll()
        #expect(cache.policyTag(key, at: cache.policyEpoch) == nil)
    }

    @Test("past the most policy tags kept, they are all forgotten and the newest is kept")
    func policyTagBound() {
        let cache = ServingCache()
        let epoch = cache.policyEpoch
        cache.record(policies: [.app("kiosk"): AgentPolicy(jitter: 5)], readAt: epoch)
        for index in 0..<ServingCache.maximumPolicyTags {
            cache.record(policyTag: "t\(index)", for: ServingCache.PolicyTagKey(apps: ["kiosk"], groups: ["g\(index)"]), readAt: epoch)
        }
        let first = ServingCache.PolicyTagKey(apps: ["kiosk"], groups: ["g0"])
        #expect(cache.policyTag(first, at: epoch) == "t0")
        let newest = ServingCache.PolicyTagKey(apps: ["kiosk"], groups: ["new"])
        cache.record(policyTag: "n", for: newest, readAt: epoch)
        #expect(cache.policyTag(first, at: epoch) == nil)
        #expect(cache.policyTag(newest, at: epoch) == "n")
    }

    func parts(_ app: JSONObject = [:]) -> ServingCache.SharedLayers.Parts {
        ServingCache.SharedLayers.Parts(metadata: metadata, app: app, groups: [:])
    }

    @Test("devices missing the same shared layers at once share one read of the store")
    func oneReadForMany() async throws {
        let cache = ServingCache()
        let reads = Locked(0)
        let arrived = Locked(0)
        let (gate, open) = AsyncStream<Void>.makeStream()
        let (allArrived, arrival) = AsyncStream<Void>.makeStream()
        let parts = parts(["volume": 7])
        let layers = await withTaskGroup(of: UInt64?.self) { group in
            for _ in 0..<50 {
                group.addTask {
                    if arrived.withLock({
                        $0 += 1; return $0
                    }) == 50 {
                        arrival.finish()
                    }
                    return try? await cache.sharedLayers(app: "kiosk", groups: ["lobby"]) {
                        reads.withLock { $0 += 1 }
                        for await _ in gate { break }
                        return parts
                    }.stored.fingerprint
                }
            }
            // Every caller has started; give them a moment to reach the cache (waiting, not
            // spinning: a loop of Task.yield starves the other tests' servers), then let the read
            // finish. Whether a caller joined the read or came after it, it makes no read of its own.
            for await _ in allArrived {}
            try? await Task.sleep(for: .milliseconds(50))
            open.yield()
            return await group.reduce(into: [UInt64?]()) { $0.append($1) }
        }
        #expect(reads.withLock { $0 } == 1)
        #expect(Set(layers).count == 1 && layers.first! != nil)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["lobby"])?.stored.valuesText == #"{"volume":7}"#)
    }

    @Test("a write while a read is under way: the read's result is not kept, and later callers read again")
    func invalidationDuringRead() async throws {
        let cache = ServingCache()
        let reads = Locked(0)
        let (gate, open) = AsyncStream<Void>.makeStream()
        let (started, start) = AsyncStream<Void>.makeStream()
        let stale = parts(["volume": 1])
        let first = Task {
            try await cache.sharedLayers(app: "kiosk", groups: []) {
                reads.withLock { $0 += 1 }
                start.finish()
                for await _ in gate { break }
                return stale
            }
        }
        for await _ in started {}
        cache.invalidate(app: "kiosk", scope: .app)
        // A caller after the write does not join the read that began before it.
        let fresh = try await cache.sharedLayers(app: "kiosk", groups: []) {
            reads.withLock { $0 += 1 }
            return self.parts(["volume": 2])
        }
        #expect(fresh.stored.valuesText == #"{"volume":2}"#)
        open.yield()
        #expect(try await first.value.stored.valuesText == #"{"volume":1}"#)
        #expect(reads.withLock { $0 } == 2)
        #expect(cache.sharedLayers(app: "kiosk", groups: [])?.stored.valuesText == #"{"volume":2}"#)
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

    @Test("a write of values forgets exactly the layers it reaches; only a metadata upload forgets the metadata")
    func valueInvalidation() async throws {
        let cache = ServingCache()
        let stored = StoredMetadata(app: "kiosk", version: 1, document: "{}")
        _ = try await cache.metadata(app: "kiosk") { (stored, self.metadata) }
        for groups in [["lobby"], ["hall"], []] { _ = try await cache.sharedLayers(app: "kiosk", groups: groups) { self.parts() } }
        _ = try await cache.sharedLayers(app: "other", groups: ["lobby"]) { self.parts() }
        cache.fill(deviceValues: ["volume": 3], app: "kiosk", deviceID: "d-1", readAt: cache.epoch)
        cache.invalidate(app: "kiosk", scope: .group("lobby"))
        #expect(cache.sharedLayers(app: "kiosk", groups: ["lobby"]) == nil)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["hall"]) != nil && cache.sharedLayers(app: "kiosk", groups: []) != nil)
        #expect(cache.sharedLayers(app: "other", groups: ["lobby"]) != nil)
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == ["volume": 3])
        cache.invalidate(app: "kiosk", scope: .device("d-1"))
        #expect(cache.deviceValues(app: "kiosk", deviceID: "d-1") == nil)
        cache.invalidate(app: "kiosk", scope: .app)
        #expect(cache.metadata(app: "kiosk") != nil)
        #expect(cache.sharedLayers(app: "kiosk", groups: ["hall"]) == nil && cache.sharedLayers(app: "kiosk", groups: []) == nil)
        #expect(cache.sharedLayers(app: "other", groups: ["lobby"]) != nil)
        cache.invalidate(app: "kiosk", scope: .defaults)
        #expect(cache.metadata(app: "kiosk") == nil)
    }

    @Test("shared layers are the same for the same groups in any order, and their text is the values' text")
    func sharedLayers() async throws {
        let cache = ServingCache()
        let layers = try await cache.sharedLayers(app: "kiosk", groups: ["b", "a", "b"]) { self.parts(["volume": 7]) }
        #expect(cache.sharedLayers(app: "kiosk", groups: ["a", "b"])?.stored.fingerprint == layers.stored.fingerprint)
        #expect(layers.stored.valuesText == #"{"volume":7}"#)
        #expect(layers.stored.fingerprint == layers.stored.effective.fingerprint(schemaVersion: 1))
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
