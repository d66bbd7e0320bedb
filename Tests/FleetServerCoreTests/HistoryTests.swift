import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import Testing

@Suite("History entries as values")
struct HistoryTests {
    static func metadata(pinIsSecret: Bool) throws -> Metadata {
        let pin: JSONValue = pinIsSecret ? ["type": "string", "x-secret": true] : ["type": "string"]
        return try Metadata(
            ["app": "kiosk", "version": 1, "schema": ["type": "object", "properties": ["pin": pin, "title": ["type": "string"]]]])
    }

    @Test("a secret at the time of the write stays masked after a metadata version stops marking it; the current version's secrets too")
    func maskedThenAndNow() throws {
        let then = try Self.metadata(pinIsSecret: true)
        let now = try Self.metadata(pinIsSecret: false)
        let change = ChangeRecord.ScopeChange(
            scope: .app, patch: ["pin": "4711", "title": "x"], after: ["pin": "4711", "title": "x"], masking: then)
        #expect(change.masked(by: now).patch == ["pin": "********", "title": "x"])
        // Stored and read back, the shown form goes with it; the raw values stay for a revert.
        let record = ChangeRecord(at: 1, actor: "a", kind: .values, scopes: [change])
        let read = try ChangeRecord.scopes(record.scopesText, what: "entry")
        #expect(read == [change] && read.first?.after["pin"] == "4711")
        #expect(read.first?.masked(by: now).after == ["pin": "********", "title": "x"])
        // Written without metadata at hand (an initial entry): the current version masks it.
        let bare = ChangeRecord.ScopeChange(scope: .app, patch: ["pin": "4711"], after: ["pin": "4711"])
        #expect(bare.masked(by: then).patch == ["pin": "********"])
        #expect(throws: StoreCorruption.self) { try ChangeRecord.scopes(#"[{"scope": "nowhere"}]"#, what: "entry") }
    }

    @Test("the values after a revision: each scope as its last entry up to it left it; scopes emptied are gone")
    func valuesAfter() {
        func entry(_ number: Int64, _ scopes: [(Scope, JSONObject)]) -> HistoryEntry {
            HistoryEntry(
                app: "kiosk", number: number,
                change: ChangeRecord(
                    at: number, actor: "a", kind: .values, scopes: scopes.map { .init(scope: $0.0, patch: $0.1, after: $0.1) }))
        }
        let history = [
            entry(1, [(.app, ["a": 1])]), entry(2, [(.group("g"), ["b": 2])]), entry(3, [(.app, ["a": 3]), (.device("d"), ["c": 1])]),
            entry(4, [(.group("g"), [:])]),
        ]
        #expect(AppHistory.values(after: 2, in: history) == [.app: ["a": 1], .group("g"): ["b": 2]])
        #expect(AppHistory.values(after: 4, in: history) == [.app: ["a": 3], .device("d"): ["c": 1]])
        #expect(AppHistory.values(after: 0, in: history).isEmpty)
    }
}
