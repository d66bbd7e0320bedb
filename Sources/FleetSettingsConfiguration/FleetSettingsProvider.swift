import Configuration
import FleetJSON
import FleetSettings
import PosixThreads

/// An app's fleet settings as a provider for swift-configuration, so an app reads them through a
/// `ConfigReader` beside its other sources:
///
/// ```swift
/// let fleet = try FleetSettingsProvider(app: FleetApp("kiosk"))
/// let config = ConfigReader(providers: [EnvironmentVariablesProvider(), fleet])
/// let volume = config.int(forKey: "volume", default: 5)
/// let city = config.string(forKey: "location.city")      // inside the object setting "location"
/// ```
///
/// A key is the setting's key; its components (split at dots) first name a top-level setting
/// with that whole name, else a path into object settings. Values are returned only as their
/// own type (a string setting is never read as an integer): `string`, `int` (numbers with no
/// fraction), `double`, `bool`, and arrays of those. Settings marked `x-secret` are returned as
/// secret, so access logs redact them.
///
/// The provider reads `settings.json` when created. To follow new revisions (and have
/// `ConfigReader.watch…` report them), run ``run()`` in a task, for example in a
/// swift-service-lifecycle `ServiceGroup`.
public final class FleetSettingsProvider: ConfigProvider, Sendable {
    /// The app.
    public let app: FleetApp
    public let providerName: String

    private struct State {
        var snapshot: Snapshot
        var valueWatchers:
            [Int: (key: AbsoluteConfigKey, type: ConfigType, continuation: AsyncStream<Result<LookupResult, any Error>>.Continuation)] = [:]
        var snapshotWatchers: [Int: AsyncStream<any ConfigSnapshot>.Continuation] = [:]
        var nextWatcher = 0
    }

    private let state: Locked<State>

    /// Reads the app's settings now.
    ///
    /// - Throws: ``FleetSettingsError`` when there are no settings on disk yet.
    public init(app: FleetApp) throws(FleetSettingsError) {
        self.app = app
        providerName = "FleetSettingsProvider(\(app.id))"
        let settings = try app.settings()
        state = Locked(State(snapshot: Snapshot(providerName: providerName, settings: settings, secretKeys: app.secretKeys(of: settings))))
    }

    /// The revision the provider serves.
    public var revision: Int64 { state.withLock { $0.snapshot.settings.revision } }

    /// Follows new revisions of `settings.json` until the task is cancelled, telling watchers.
    public func run() async {
        for await change in app.changes(after: revision) {
            let snapshot = Snapshot(providerName: providerName, settings: change.settings, secretKeys: app.secretKeys(of: change.settings))
            let (values, snapshots) = state.withLock { state in
                state.snapshot = snapshot
                return (Array(state.valueWatchers.values), Array(state.snapshotWatchers.values))
            }
            for watcher in values { watcher.continuation.yield(Result { try snapshot.value(forKey: watcher.key, type: watcher.type) }) }
            for continuation in snapshots { continuation.yield(snapshot) }
        }
    }

    public func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
        try state.withLock { $0.snapshot }.value(forKey: key, type: type)
    }

    public func fetchValue(forKey key: AbsoluteConfigKey, type: ConfigType) async throws -> LookupResult {
        try value(forKey: key, type: type)
    }

    public func watchValue<Return: ~Copyable>(
        forKey key: AbsoluteConfigKey, type: ConfigType,
        updatesHandler:
            nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<Result<LookupResult, any Error>, Never>) async throws
            -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<Result<LookupResult, any Error>>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            defer { state.nextWatcher += 1 }
            state.valueWatchers[state.nextWatcher] = (key, type, continuation)
            continuation.yield(Result { try state.snapshot.value(forKey: key, type: type) })
            return state.nextWatcher
        }
        defer {
            _ = state.withLock { $0.valueWatchers.removeValue(forKey: id) }
            continuation.finish()
        }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
    }

    public func snapshot() -> any ConfigSnapshot {
        state.withLock { $0.snapshot }
    }

    public func watchSnapshot<Return: ~Copyable>(
        updatesHandler: nonisolated(nonsending) (_ updates: ConfigUpdatesAsyncSequence<any ConfigSnapshot, Never>) async throws -> Return
    ) async throws -> Return {
        let (stream, continuation) = AsyncStream<any ConfigSnapshot>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let id = state.withLock { state in
            defer { state.nextWatcher += 1 }
            state.snapshotWatchers[state.nextWatcher] = continuation
            continuation.yield(state.snapshot)
            return state.nextWatcher
        }
        defer {
            _ = state.withLock { $0.snapshotWatchers.removeValue(forKey: id) }
            continuation.finish()
        }
        return try await updatesHandler(ConfigUpdatesAsyncSequence(stream))
    }

    /// One revision of the settings, as swift-configuration values.
    struct Snapshot: ConfigSnapshot {
        let providerName: String
        let settings: AppSettings
        let secretKeys: Set<String>

        func value(forKey key: AbsoluteConfigKey, type: ConfigType) throws -> LookupResult {
            let encodedKey = key.components.joined(separator: ".")
            guard let (topLevel, found) = Self.find(key.components, in: settings.values) else {
                return LookupResult(encodedKey: encodedKey, value: nil)
            }
            guard let content = Self.content(found, as: type) else {
                throw FleetSettingsProviderError(key: encodedKey, type: type, found: found.typeName, app: settings.app)
            }
            return LookupResult(encodedKey: encodedKey, value: ConfigValue(content, isSecret: secretKeys.contains(topLevel)))
        }

        /// The value at `components`: a top-level key with the whole dotted name, else a path into
        /// objects. Returns the top-level key it is in and the value; `nil` when absent or null.
        static func find(_ components: [String], in values: JSONObject) -> (String, JSONValue)? {
            guard let first = components.first else { return nil }
            let whole = components.joined(separator: ".")
            if let value = values[whole], value != .null { return (whole, value) }
            var current: JSONValue? = values[first]
            for component in components.dropFirst() { current = current?.objectValue?[component] }
            guard let current, current != .null else { return nil }
            return (first, current)
        }

        /// `value` as content of `type`, or `nil` when it is of another type.
        static func content(_ value: JSONValue, as type: ConfigType) -> ConfigContent? {
            func integer(_ value: JSONValue) -> Int? { value.numberValue?.int64Value.flatMap { Int(exactly: $0) } }
            func all<T>(_ convert: (JSONValue) -> T?) -> [T]? {
                guard let items = value.arrayValue else { return nil }
                let converted = items.compactMap(convert)
                return converted.count == items.count ? converted : nil
            }
            switch type {
            case .string: return value.stringValue.map(ConfigContent.string)
            case .int: return integer(value).map(ConfigContent.int)
            case .double: return value.numberValue.map { .double($0.doubleValue) }
            case .bool: return value.boolValue.map(ConfigContent.bool)
            case .stringArray: return all(\.stringValue).map(ConfigContent.stringArray)
            case .intArray: return all(integer).map(ConfigContent.intArray)
            case .doubleArray: return all { $0.numberValue?.doubleValue }.map(ConfigContent.doubleArray)
            case .boolArray: return all(\.boolValue).map(ConfigContent.boolArray)
            case .bytes, .byteChunkArray: return nil
            }
        }
    }
}

/// A fleet setting read as a type it does not have.
public struct FleetSettingsProviderError: Error, Sendable, CustomStringConvertible {
    public let key: String
    public let type: ConfigType
    public let found: String
    public let app: String

    public var description: String { "\(app): setting \"\(key)\" is \(found), not readable as \(type.rawValue)" }
}
