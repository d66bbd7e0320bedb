import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FoundationEssentials

/// One revision of an app's settings, as the agent wrote it to `settings.json`: an immutable
/// snapshot with typed accessors.
///
/// Each accessor comes in two forms: one that throws ``FleetSettingsError`` when the setting is
/// missing or of another type (naming the key, the app and the revision), and one that returns
/// a given default instead.
///
/// ```swift
/// let settings = try FleetApp("kiosk").settings()
/// let volume = settings.integer("volume", default: 5)
/// let greeting = try settings.string("greeting")
/// ```
public struct AppSettings: Sendable, Hashable {
    /// The app's id.
    public let app: String
    /// The server's revision of these settings.
    public let revision: Int64
    /// The version of the metadata (schema) the settings were validated with.
    public let schemaVersion: Int64
    /// When the agent received them, in seconds since the epoch.
    public let syncedAt: Int64
    /// Every setting, by key.
    public let values: JSONObject

    init(_ settings: DeviceSettings) {
        app = settings.app
        revision = settings.revision
        schemaVersion = settings.schemaVersion
        syncedAt = settings.syncedAt
        values = settings.values
    }

    /// The keys of every setting, in the order of the file.
    public var keys: [String] { values.keys }

    /// The raw JSON value of `key`, `nil` when there is none.
    public subscript(key: String) -> JSONValue? { values[key] }

    /// The value at a key path: `settings[keyPath: "playlist/0/content"]`, slash-separated with
    /// JSON Pointer semantics (an array index, `~1` for a `/` inside a name, `~0` for a `~`; a
    /// leading `/` is allowed). `nil` when nothing is there or the path is malformed.
    public subscript(keyPath keyPath: String) -> JSONValue? {
        JSONPointer(keyPath: keyPath).flatMap { JSONValue.object(values)[pointer: $0] }
    }

    // MARK: - Typed accessors

    /// A string setting.
    public func string(_ key: String) throws(FleetSettingsError) -> String { try typed(key, "a string", \.stringValue) }
    /// A string setting, or `defaultValue` when it is missing or not a string.
    public func string(_ key: String, default defaultValue: String) -> String { (try? string(key)) ?? defaultValue }

    /// A boolean setting.
    public func bool(_ key: String) throws(FleetSettingsError) -> Bool { try typed(key, "true or false", \.boolValue) }
    /// A boolean setting, or `defaultValue` when it is missing or not a boolean.
    public func bool(_ key: String, default defaultValue: Bool) -> Bool { (try? bool(key)) ?? defaultValue }

    /// An integer setting (a number with no fraction that fits in `Int`).
    public func integer(_ key: String) throws(FleetSettingsError) -> Int {
        try typed(key, "an integer") { value in value.numberValue?.int64Value.flatMap { Int(exactly: $0) } }
    }
    /// An integer setting, or `defaultValue` when it is missing or not an integer.
    public func integer(_ key: String, default defaultValue: Int) -> Int { (try? integer(key)) ?? defaultValue }

    /// A number setting (integers are numbers too).
    public func double(_ key: String) throws(FleetSettingsError) -> Double { try typed(key, "a number") { $0.numberValue?.doubleValue } }
    /// A number setting, or `defaultValue` when it is missing or not a number.
    public func double(_ key: String, default defaultValue: Double) -> Double { (try? double(key)) ?? defaultValue }

    /// A URL setting: a string that parses as an absolute URL.
    public func url(_ key: String) throws(FleetSettingsError) -> URL {
        try typed(key, "an absolute URL") { value in value.stringValue.flatMap(URL.init(string:)).flatMap { $0.scheme == nil ? nil : $0 } }
    }
    /// A URL setting, or `defaultValue` when it is missing or not an absolute URL.
    public func url(_ key: String, default defaultValue: URL) -> URL { (try? url(key)) ?? defaultValue }

    /// An array setting.
    public func array(_ key: String) throws(FleetSettingsError) -> [JSONValue] { try typed(key, "an array", \.arrayValue) }
    /// An array setting, or `defaultValue` when it is missing or not an array.
    public func array(_ key: String, default defaultValue: [JSONValue]) -> [JSONValue] { (try? array(key)) ?? defaultValue }

    /// An array of strings.
    public func stringArray(_ key: String) throws(FleetSettingsError) -> [String] {
        try typed(key, "an array of strings") { value in
            guard let items = value.arrayValue else { return nil }
            let strings = items.compactMap(\.stringValue)
            return strings.count == items.count ? strings : nil
        }
    }
    /// An array of strings, or `defaultValue` when it is missing or not an array of strings.
    public func stringArray(_ key: String, default defaultValue: [String]) -> [String] { (try? stringArray(key)) ?? defaultValue }

    /// An object setting, as a dictionary.
    public func dictionary(_ key: String) throws(FleetSettingsError) -> [String: JSONValue] {
        try typed(key, "an object") { value in value.objectValue.map { Dictionary($0.map { ($0.key, $0.value) }, uniquingKeysWith: { $1 }) }
        }
    }
    /// An object setting, or `defaultValue` when it is missing or not an object.
    public func dictionary(_ key: String, default defaultValue: [String: JSONValue]) -> [String: JSONValue] {
        (try? dictionary(key)) ?? defaultValue
    }

    /// The value of `key` converted by `convert`, which returns `nil` for a value of another type.
    private func typed<Value>(_ key: String, _ expected: String, _ convert: (JSONValue) -> Value?) throws(FleetSettingsError) -> Value {
        guard let value = values[key], value != .null else {
            throw FleetSettingsError.missingSetting(app: app, key: key, revision: revision)
        }
        guard let converted = convert(value) else {
            throw FleetSettingsError.wrongType(app: app, key: key, expected: expected, found: value.typeName)
        }
        return converted
    }
}
