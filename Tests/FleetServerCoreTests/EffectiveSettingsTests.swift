import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import Testing

@Suite("Effective settings and revisions")
struct EffectiveSettingsTests {
    static func metadata() throws -> Metadata {
        try Metadata([
            "app": "kiosk", "version": 2,
            "schema": [
                "type": "object",
                "properties": [
                    "duration": ["type": "string", "default": "2"],
                    "volume": ["type": "integer", "default": 5],
                    "theme": ["type": "object", "default": ["colour": "blue", "font": "sans"]],
                    "url": ["type": "string"],
                ],
            ],
        ])
    }

    @Test("defaults, then app, then groups in name order, then the device; explain names each source")
    func layering() throws {
        let effective = EffectiveSettings(
            metadata: try Self.metadata(), app: ["volume": 7, "url": "https://a"],
            groups: ["lobby": ["volume": 3, "duration": "1"], "airport": ["volume": 9]],
            device: ["duration": "2"], deviceID: "d-1")
        #expect(effective.values == ["duration": "2", "volume": 3, "theme": ["colour": "blue", "font": "sans"], "url": "https://a"])
        #expect(effective.sources == ["duration": .device("d-1"), "volume": .group("lobby"), "theme": .defaults, "url": .app])
    }

    @Test("an object-valued setting is replaced, not deep-merged")
    func noDeepMerge() throws {
        let effective = EffectiveSettings(
            metadata: try Self.metadata(), app: ["theme": ["colour": "red"]], groups: [:], device: [:], deviceID: "d")
        #expect(effective.values["theme"] == ["colour": "red"])
    }

    @Test("a device's key-path value is laid over the setting from wider scopes; its place's source is the device")
    func keyPathValues() throws {
        let effective = EffectiveSettings(
            metadata: try Self.metadata(), app: ["theme": ["colour": "red", "font": "serif"]], groups: [:],
            device: ["/theme/font": "mono", "/theme/size/0": 3], deviceID: "d")
        #expect(effective.values["theme"] == ["colour": "red", "font": "mono", "size": ["0": 3]])
        #expect(effective.sources["theme"] == .app && effective.sources["/theme/font"] == .device("d"))
        #expect(effective.source(of: JSONPointer("/theme/font")!) == .device("d"))
        #expect(effective.source(of: JSONPointer("/theme/colour")!) == .app)
        #expect(effective.unapplied.isEmpty)
    }

    @Test("the revision moves exactly when the values or the schema version change")
    func revisions() throws {
        let metadata = try Self.metadata()
        let first = EffectiveSettings(metadata: metadata, app: ["volume": 7], groups: [:], device: [:], deviceID: "d")
        let reordered = EffectiveSettings(metadata: metadata, app: ["volume": 7.0], groups: [:], device: [:], deviceID: "d")
        let changed = EffectiveSettings(metadata: metadata, app: ["volume": 8], groups: [:], device: [:], deviceID: "d")

        let r1 = RevisionState.next(after: nil, fingerprint: first.fingerprint(schemaVersion: 2))
        #expect(r1.revision == 1)
        #expect(RevisionState.next(after: r1, fingerprint: reordered.fingerprint(schemaVersion: 2)) == r1)
        let r2 = RevisionState.next(after: r1, fingerprint: changed.fingerprint(schemaVersion: 2))
        #expect(r2.revision == 2)
        let r3 = RevisionState.next(after: r2, fingerprint: changed.fingerprint(schemaVersion: 3))
        #expect(r3.revision == 3)
    }

    @Test("the fingerprint is stable across processes (no random seed)")
    func stableFingerprint() throws {
        let effective = EffectiveSettings(metadata: try Self.metadata(), app: [:], groups: [:], device: [:], deviceID: "d")
        // FNV-1a 64 of `2\n{"duration":"2","theme":{"colour":"blue","font":"sans"},"volume":5}`,
        // computed independently (Python, 3 lines) — a random-seeded hash could never match it.
        #expect(effective.fingerprint(schemaVersion: 2) == 0xB7BB_8696_325E_3F37)
    }

    @Test("scope parameters parse; malformed ones are refused")
    func scopes() {
        #expect(Scope(parameter: "app") == .app)
        #expect(Scope(parameter: "group:lobby") == .group("lobby"))
        #expect(Scope(parameter: "device:d-42") == .device("d-42"))
        for bad in ["", "apps", "group:", "device:", "site:x", "group:a\nb"] {
            #expect(Scope(parameter: bad) == nil, "\(bad)")
        }
        #expect(Scope.group("lobby").description == "group:lobby")
    }
}
