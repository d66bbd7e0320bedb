import FleetJSON
import FleetMetadata
import FleetProtocol

/// A device's effective values for one app, and which scope set each.
///
/// Layering is per top-level setting: a scope that sets a key replaces the whole value from the
/// scopes below it (an object-valued setting is not deep-merged — what `explain` shows is
/// always one scope per setting). Order, lowest first: metadata defaults, app, the device's
/// groups in name order (byte order; a later group wins a conflict), the device. Last, the
/// device's key-path values (``KeyPathValues``) each replace one place inside a setting,
/// whichever scope the rest of it comes from.
public struct EffectiveSettings: Sendable, Hashable {
    /// The values the device gets.
    public let values: JSONObject
    /// For each key in ``values``, the scope its value comes from; for each key-path value laid
    /// over it (`/playlist/0/content`), the device.
    public let sources: [String: Scope]
    /// The device's key-path values that no longer fit the setting they are in (the fleet's
    /// array is shorter now, a place holds text), with why: left out of ``values``.
    public let unapplied: [String: KeyPathError]

    /// Layers the scopes over the metadata's defaults.
    ///
    /// - Parameters:
    ///   - groups: the values of each group the device belongs to, by group name.
    public init(metadata: Metadata, app: JSONObject, groups: [String: JSONObject], device: JSONObject, deviceID: String) {
        var values = metadata.defaultValues
        var sources: [String: Scope] = [:]
        for key in values.keys { sources[key] = .defaults }
        func overlay(_ layer: JSONObject, _ scope: Scope) {
            for (key, value) in layer where !KeyPathValues.isKeyPath(key) {
                values[key] = value
                sources[key] = scope
            }
        }
        overlay(app, .app)
        for name in groups.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
            overlay(groups[name] ?? [:], .group(name))
        }
        overlay(device, .device(deviceID))
        let unapplied = KeyPathValues.overlay(device, onto: &values)
        for name in device.keys where KeyPathValues.isKeyPath(name) && unapplied[name] == nil {
            sources[name] = .device(deviceID)
            if let key = KeyPathValues.setting(of: name), sources[key] == nil { sources[key] = .device(deviceID) }
        }
        self.values = values
        self.sources = sources
        self.unapplied = unapplied
    }

    /// The scope that set the value at `location`: the device, when one of its key-path values
    /// holds that place (the deepest that does), else the scope of the setting.
    public func source(of location: JSONPointer) -> Scope? {
        var tokens = location.tokens
        while tokens.count > 1 {
            if let scope = sources[JSONPointer(tokens: tokens).description] { return scope }
            tokens.removeLast()
        }
        return location.tokens.first.flatMap { sources[$0] }
    }

    /// A stable 64-bit fingerprint of the schema version and the values (FNV-1a over the
    /// canonical JSON text with sorted keys): the server bumps a device's revision exactly when
    /// it changes, across restarts.
    public func fingerprint(schemaVersion: Int) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        let canonical = "\(schemaVersion)\n" + JSONValue.object(values).serialized(.sortedKeys)
        for byte in canonical.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        return hash
    }
}

/// A device's revision for one app as the server last served it.
public struct RevisionState: Sendable, Hashable {
    /// The revision number (starts at 1).
    public var revision: Int64
    /// The fingerprint of what that revision contained.
    public var fingerprint: UInt64

    public init(revision: Int64, fingerprint: UInt64) {
        self.revision = revision
        self.fingerprint = fingerprint
    }

    /// The state after the effective settings are computed anew: the same revision when the
    /// fingerprint is unchanged, the next one when it changed, revision 1 for the first time.
    public static func next(after current: RevisionState?, fingerprint: UInt64) -> RevisionState {
        guard let current else { return RevisionState(revision: 1, fingerprint: fingerprint) }
        if current.fingerprint == fingerprint { return current }
        return RevisionState(revision: current.revision + 1, fingerprint: fingerprint)
    }
}
