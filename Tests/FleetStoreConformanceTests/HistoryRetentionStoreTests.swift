import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

/// History read a page at a time, a revert's base read alone, and the retention: against SQLite
/// and PostgreSQL.
@Suite("Store conformance: history pages and retention")
struct HistoryRetentionStoreTests {
    /// A values write of `scope` at time `at` that sets `key` to `value`.
    static func write(_ scope: Scope, _ key: String, _ value: Int, at: Int64) -> AppWrite {
        let values: JSONObject = [key: JSONValue(integerLiteral: Int64(value))]
        return AppWrite(
            app: "kiosk", values: [scope: values],
            change: ChangeRecord(at: at, actor: "admin", kind: .values, scopes: [.init(scope: scope, patch: values, after: values)]))
    }

    @Test("the cut: either limit removes; the newest entry stays; a pass goes at most 10,000 entries past the floor")
    func cuts() {
        let keepOne = HistoryRetention(maximumCount: 1)
        #expect(keepOne.cut(newest: 25_000, newestOlderThanAge: nil)! == (10_000, false))
        #expect(keepOne.cut(newest: 25_000, newestOlderThanAge: nil, floor: 10_000)! == (20_000, false))
        #expect(keepOne.cut(newest: 25_000, newestOlderThanAge: nil, floor: 20_000)! == (24_999, true))
        #expect(keepOne.cut(newest: 25_000, newestOlderThanAge: nil, floor: 24_999) == nil)
        let both = HistoryRetention(maximumAge: 86_400, maximumCount: 100)
        #expect(both.cut(newest: 150, newestOlderThanAge: 120, floor: 0)! == (120, true), "age removes more than count here")
        #expect(both.cut(newest: 150, newestOlderThanAge: 10, floor: 0)! == (50, true), "count removes more than age here")
        #expect(HistoryRetention(maximumAge: 1).cut(newest: 7, newestOlderThanAge: 7)! == (6, true), "the newest stays")
        #expect(HistoryRetention.everything.cut(newest: 1_000_000, newestOlderThanAge: 999_999) == nil)
        #expect(HistoryRetention("365d,100000") == HistoryRetention(maximumAge: 365 * 86_400, maximumCount: 100_000))
        #expect(HistoryRetention("keep-all") == .everything)
        for bad in ["", "0", "-5", "d", "30x", "1d,2d", "5,6", "365d,"] {
            #expect(HistoryRetention(bad) == nil, "\(bad)")
        }
    }

    @Test("a page is the newest LIMIT entries below BEFORE, of one scope when asked, oldest first", arguments: ConformingStore.allCases)
    func pages(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            for index in 1...30 {
                _ = try await store.commit(Self.write(index % 3 == 0 ? .device("d-1") : .app, "v", index, at: Int64(index)))
            }
            #expect(try await store.history(app: "kiosk", page: .init(limit: 10)).map(\.number) == Array(21...30))
            #expect(try await store.history(app: "kiosk", page: .init(before: 21, limit: 10)).map(\.number) == Array(11...20))
            #expect(try await store.history(app: "kiosk", page: .init(before: 3)).map(\.number) == [1, 2])
            #expect(
                try await store.history(app: "kiosk", page: .init(scope: .device("d-1"), before: 28, limit: 3)).map(\.number)
                    == [21, 24, 27])
            #expect(try await store.history(app: "kiosk", page: .init(scope: .group("none"))).isEmpty)
            #expect(try await store.history(app: "kiosk").count == 30)
        }
    }

    @Test(
        "a revert's base is each scope's newest entry at or before it; the retention keeps those, the newest entry, and raises the floor",
        arguments: ConformingStore.allCases)
    func retention(kind: ConformingStore) async throws {
        try await withStore(kind) { (store: any SettingsStore) async throws in
            try await store.addDevice(Device(id: "d-live", tokenHash: "h-1", apps: ["kiosk"], groups: [], enrolledAt: 0))
            // 1: app, 2: device d-live, 3: device d-gone (deleted later), 4…10: app, 11: device d-live.
            _ = try await store.commit(Self.write(.app, "a", 1, at: 100))
            _ = try await store.commit(Self.write(.device("d-live"), "b", 2, at: 200))
            _ = try await store.commit(Self.write(.device("d-gone"), "c", 3, at: 300))
            for index in 4...10 { _ = try await store.commit(Self.write(.app, "a", index, at: Int64(index) * 100)) }
            _ = try await store.commit(Self.write(.device("d-live"), "b", 11, at: 1_100))

            var base = try await store.historyBase(app: "kiosk", through: 5)
            #expect(base.entries.map(\.number) == [2, 3, 5] && base.isKept && base.newest == 11 && base.floor == 1)
            #expect(base.values == [.app: ["a": 5], .device("d-live"): ["b": 2], .device("d-gone"): ["c": 3]])

            // Nothing to remove yet.
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumCount: 20), now: 2_000).removed == 0)
            // The newest 3 (9, 10, 11) stay; at or before the cut (8): each live scope's newest entry (app: 8, d-live: 2).
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumCount: 3), now: 2_000).removed == 6)
            #expect(try await store.history(app: "kiosk").map(\.number) == [2, 8, 9, 10, 11])
            base = try await store.historyBase(app: "kiosk", through: 8)
            #expect(base.floor == 8 && base.isKept && base.values == [.app: ["a": 8], .device("d-live"): ["b": 2]])
            #expect(try await store.historyBase(app: "kiosk", through: 5).isKept == false)
            // By age: everything written before 1 050 goes but the bases and the newest entry; the floor only rises.
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumAge: 1_000), now: 2_050).removed == 2)
            #expect(try await store.history(app: "kiosk").map(\.number) == [2, 10, 11])
            #expect(try await store.historyBase(app: "kiosk", through: 10).floor == 10)
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumCount: 50), now: 2_050).removed == 0)
            #expect(try await store.historyBase(app: "kiosk", through: 11).floor == 10)
            // Everything old: the newest entry always stays (its number is never given again), with each scope's base.
            #expect(try await store.commit(Self.write(.app, "a", 12, at: 1_200)) == 12)
            #expect(try await store.pruneHistory(app: "kiosk", keeping: .init(maximumAge: 1), now: 1_000_000).removed == 1)
            #expect(try await store.history(app: "kiosk").map(\.number) == [10, 11, 12])
            #expect(try await store.commit(Self.write(.app, "a", 13, at: 1_300)) == 13)
            // A copy of the store keeps the floor.
            #expect(try await store.snapshot().historyFloors == ["kiosk": 11])
        }
    }
}
