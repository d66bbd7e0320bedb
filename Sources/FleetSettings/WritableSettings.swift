import FleetJSON
import FleetMetadata

/// A mutable copy of the settings the device may change, from ``FleetApp/writableSettings()``.
/// Change values with the subscript (or ``set(_:_:)``); ``FleetApp/update(_:)`` sends only the
/// keys whose values changed.
///
/// ```swift
/// var writable = try kiosk.writableSettings()
/// writable["volume"] = 7
/// let request = try kiosk.update(writable)
/// let outcome = await request.outcome(waitingUpTo: .seconds(10))
/// ```
public struct WritableSettings: Sendable, Hashable {
    /// The revision the copy was taken from.
    public let revision: Int64
    /// The values as taken (`null` for a writable setting that has no value).
    public let original: JSONObject
    /// The values as changed.
    public private(set) var values: JSONObject

    init(revision: Int64, original: JSONObject) {
        self.revision = revision
        self.original = original
        values = original
    }

    /// The writable settings' keys.
    public var keys: [String] { original.keys }

    /// The value of a writable setting; setting `nil` or `.null` removes the device's own value.
    public subscript(key: String) -> JSONValue? {
        get { values[key] }
        set { values[key] = newValue ?? .null }
    }

    /// Sets a writable setting from a Swift value.
    public mutating func set(_ key: String, _ value: JSONValue) {
        values[key] = value
    }

    /// The change to send: for each setting whose value changed, only the places inside it that
    /// changed (``KeyPathValues/changes(from:to:setting:)``: the rest keeps following the fleet),
    /// or `null` for one whose own value is removed.
    public var changes: JSONObject {
        var patch = JSONObject()
        for (key, value) in values where original[key] != value {
            let old = original[key] == .null ? nil : original[key]
            for (name, change) in KeyPathValues.changes(from: old, to: value == .null ? nil : value, setting: key) { patch[name] = change }
            if value == .null { patch[key] = .null }
        }
        return patch
    }
}
