import FleetJSON
import FleetMetadata
import FleetProtocol
import PosixThreads

/// What the hot path (a device's long-poll answered 304) needs, kept in memory so that it reads
/// no database: devices by token, each app's parsed metadata, the layers of values shared by
/// the devices of one set of groups, each device's own values, and the revision last served
/// to each device.
///
/// ``ChangeNotifier`` invalidates it in the same call that wakes long-polls, before it wakes
/// them: a write of values drops the layers it reached, a metadata upload the app's metadata
/// and layers, a change to a device (disabled, deleted, apps or groups changed, token rotated)
/// everything about that device. A woken long-poll therefore reads the store again.
///
/// An entry is filled from a read of the store only when no invalidation happened since that
/// read began (``epoch``): a read that raced a write never puts stale state back. The entries
/// many devices share (metadata, shared layers) are read once however many devices miss them
/// at the same moment (a fan-out after an app-wide write): the first starts the read, the
/// others wait for it. An invalidation forgets reads under way too, so a device woken by a
/// write never joins a read that began before it.
///
/// One server instance's view: instances sharing a database must invalidate each other's
/// caches from the same place they wake each other's long-polls.
public final class ServingCache: Sendable {
    /// An app's values at app scope and at the device's groups, over the metadata's defaults:
    /// everything of a device's effective settings but its own values, shared by every device
    /// of the app in the same groups — in two variants while a rollout reaching these groups is
    /// active: the stored layers, and the layers with its patch for the devices it admitted.
    public struct SharedLayers: Sendable {
        public let metadata: Metadata
        /// The app's active rollout, when it reaches devices in these groups.
        public let rollout: Rollout?
        /// What devices get from the stored values.
        public let stored: Variant
        /// What the devices the rollout admitted get.
        public let staged: Variant?

        /// One set of layers and what devices without values of their own get from it.
        public struct Variant: Sendable {
            /// The values set at app scope.
            public let app: JSONObject
            /// By group name; groups without values are absent.
            public let groups: [String: JSONObject]
            /// The effective settings of a device with no values of its own.
            public let effective: EffectiveSettings
            /// ``EffectiveSettings/fingerprint(schemaVersion:)`` of ``effective``.
            public let fingerprint: UInt64
            /// The JSON text of ``effective``'s values, written once for every device that gets them.
            public let valuesText: String

            init(metadata: Metadata, app: JSONObject, groups: [String: JSONObject]) {
                self.app = app
                self.groups = groups
                effective = EffectiveSettings(metadata: metadata, app: app, groups: groups, device: [:], deviceID: "")
                fingerprint = effective.fingerprint(schemaVersion: metadata.version)
                valuesText = JSONValue.object(effective.values).serialized()
            }
        }

        /// What shared layers are made of, as read from the store.
        public struct Parts: Sendable {
            public var metadata: Metadata
            public var app: JSONObject
            public var groups: [String: JSONObject]
            /// The app's active rollout, if any.
            public var rollout: Rollout?

            public init(metadata: Metadata, app: JSONObject, groups: [String: JSONObject], rollout: Rollout? = nil) {
                self.metadata = metadata
                self.app = app
                self.groups = groups
                self.rollout = rollout
            }
        }

        init(_ parts: Parts, groups names: [String]) {
            metadata = parts.metadata
            stored = Variant(metadata: parts.metadata, app: parts.app, groups: parts.groups)
            if let rollout = parts.rollout, rollout.phase.isActive, rollout.reaches(groups: names) {
                self.rollout = rollout
                let layers = rollout.staged(ValueLayers(app: parts.app, groups: parts.groups))
                staged = Variant(metadata: parts.metadata, app: layers.app, groups: layers.groups)
            } else {
                rollout = nil
                staged = nil
            }
        }

        /// The variant `device` gets.
        public func variant(for device: Device) -> Variant {
            if let staged, let rollout, rollout.admits(device) { return staged }
            return stored
        }
    }

    /// What a lookup found: the value, a read under way to join, or a read it started.
    private enum Lookup<Value: Sendable> {
        case known(Value)
        case joined(Task<Value, any Error>)
        case started(Task<Value, any Error>, epoch: UInt64)
    }

    struct LayerKey: Hashable {
        let app: String
        /// Sorted, without repeats.
        let groups: [String]
    }

    private struct State {
        var epoch: UInt64 = 0
        /// Counts the times revisions were forgotten for changes another instance made.
        var revisionEpoch: UInt64 = 0
        var deviceIDByTokenHash: [String: String] = [:]
        var devices: [String: Device] = [:]
        var metadata: [String: (stored: StoredMetadata, metadata: Metadata)] = [:]
        var shared: [LayerKey: SharedLayers] = [:]
        /// By device, then app.
        var deviceValues: [String: [String: JSONObject]] = [:]
        /// By device, then app.
        var revisions: [String: [String: RevisionState]] = [:]
        /// Reads of the store under way, which callers missing the same entry join.
        var metadataLoads: [String: Task<(stored: StoredMetadata, metadata: Metadata), any Error>] = [:]
        var sharedLoads: [LayerKey: Task<SharedLayers, any Error>] = [:]

        mutating func forget(device id: String) {
            if let device = devices.removeValue(forKey: id) {
                deviceIDByTokenHash[device.tokenHash] = nil
                if let pending = device.pendingTokenHash { deviceIDByTokenHash[pending] = nil }
            }
            deviceValues[id] = nil
            revisions[id] = nil
        }
    }

    private let state = Locked(State())

    public init() {}

    /// Counts invalidations: read it before reading the store, and pass it when filling an entry.
    public var epoch: UInt64 { state.withLock { $0.epoch } }

    // MARK: - Reading

    /// The device whose token (or pending token) hashes to `tokenHash`, if known.
    public func device(tokenHash: String) -> Device? {
        state.withLock { state in state.deviceIDByTokenHash[tokenHash].flatMap { state.devices[$0] } }
    }

    /// The device with `id`, if known.
    public func device(id: String) -> Device? {
        state.withLock { $0.devices[id] }
    }

    /// The stored and parsed metadata of `app`, if known.
    public func metadata(app: String) -> (stored: StoredMetadata, metadata: Metadata)? {
        state.withLock { $0.metadata[app] }
    }

    /// The shared layers of `app` for devices in `groups`, if known.
    public func sharedLayers(app: String, groups: [String]) -> SharedLayers? {
        let key = Self.key(app: app, groups: groups)
        return state.withLock { $0.shared[key] }
    }

    /// The device's own values for `app`, if known.
    public func deviceValues(app: String, deviceID: String) -> JSONObject? {
        state.withLock { $0.deviceValues[deviceID]?[app] }
    }

    /// The revision last served to the device for `app`, if known.
    public func revision(app: String, deviceID: String) -> RevisionState? {
        state.withLock { $0.revisions[deviceID]?[app] }
    }

    // MARK: - Filling (each only when nothing was invalidated since `epoch`)

    /// Keeps `device` as read from the store when the read began at `epoch`.
    public func fill(_ device: Device, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            state.devices[device.id] = device
            state.deviceIDByTokenHash[device.tokenHash] = device.id
            if let pending = device.pendingTokenHash { state.deviceIDByTokenHash[pending] = device.id }
        }
    }

    /// Records that the device was seen at `time` (a write the service made itself).
    public func touch(deviceID: String, at time: Int64) {
        state.withLock { $0.devices[deviceID]?.lastSeenAt = time }
    }

    /// The shared layers of `app` for devices in `groups`: known, or made by `load` (a read of
    /// the store) once for every caller that misses them meanwhile.
    public func sharedLayers(
        app: String, groups: [String], load: @escaping @Sendable () async throws -> SharedLayers.Parts
    ) async throws -> SharedLayers {
        let key = Self.key(app: app, groups: groups)
        return try await loadOnce(
            key, known: { $0.shared[key] }, loads: \.sharedLoads,
            make: SharedLayers(try await load(), groups: groups),
            keep: { $0.shared[key] = $1 })
    }

    /// The stored and parsed metadata of `app`: known, or read and parsed by `load` once for
    /// every caller that misses it meanwhile.
    public func metadata(
        app: String, load: @escaping @Sendable () async throws -> (stored: StoredMetadata, metadata: Metadata)
    ) async throws -> (stored: StoredMetadata, metadata: Metadata) {
        try await loadOnce(
            app, known: { $0.metadata[app] }, loads: \.metadataLoads, make: try await load(), keep: { $0.metadata[app] = $1 })
    }

    /// The known value, or the one read under way for `key`, or a new read (kept when nothing
    /// was invalidated while it ran).
    private func loadOnce<Key: Hashable, Value: Sendable>(
        _ key: Key, known: (State) -> Value?, loads: WritableKeyPath<State, [Key: Task<Value, any Error>]>,
        make: @autoclosure @escaping @Sendable () async throws -> Value, keep: @escaping (inout State, Value) -> Void
    ) async throws -> Value {
        let found = state.withLock { state -> Lookup<Value> in
            if let value = known(state) { return .known(value) }
            if let running = state[keyPath: loads][key] { return .joined(running) }
            let task = Task { try await make() }
            state[keyPath: loads][key] = task
            return .started(task, epoch: state.epoch)
        }
        switch found {
        case .known(let value):
            return value
        case .joined(let task):
            return try await task.value
        case .started(let task, let epoch):
            let result = await task.result
            state.withLock { state in
                // Gone: an invalidation forgot it, and its value must not be kept.
                guard state[keyPath: loads][key] != nil else { return }
                state[keyPath: loads][key] = nil
                if state.epoch == epoch, case .success(let value) = result { keep(&state, value) }
            }
            return try result.get()
        }
    }

    /// Keeps a device's own values as read from the store when the read began at `epoch`.
    public func fill(deviceValues: JSONObject, app: String, deviceID: String, readAt epoch: UInt64) {
        state.withLock { state in
            guard state.epoch == epoch else { return }
            state.deviceValues[deviceID, default: [:]][app] = deviceValues
        }
    }

    /// Counts the times revisions were forgotten because another instance changed what they
    /// depend on: read it before advancing a revision in the store, and pass it to
    /// ``record(_:app:deviceID:readAt:)``.
    public var revisionEpoch: UInt64 { state.withLock { $0.revisionEpoch } }

    /// Records the revision the store holds for the device now (never going back to an older
    /// one: of two requests racing, the later revision stays), unless revisions were forgotten
    /// since `epoch` (``revisionEpoch``): with several instances, a revision read before another
    /// instance's change may be older than one that instance has served since.
    public func record(_ revision: RevisionState, app: String, deviceID: String, readAt epoch: UInt64? = nil) {
        state.withLock { state in
            if let epoch, state.revisionEpoch != epoch { return }
            if let known = state.revisions[deviceID]?[app], known.revision > revision.revision { return }
            state.revisions[deviceID, default: [:]][app] = revision
        }
    }

    // MARK: - Invalidation (ChangeNotifier calls these before it wakes long-polls)

    /// Forgets what a write of `app`'s values at `scope` may have changed: `.defaults` (a
    /// metadata upload) the app's metadata and layers, `.app` its layers, a group the layers of
    /// devices in it, a device its own values.
    public func invalidate(app: String, scope: Scope) {
        state.withLock { state in
            state.epoch += 1
            state.metadataLoads = [:]
            state.sharedLoads = [:]
            switch scope {
            case .defaults:
                state.metadata[app] = nil
                state.shared = state.shared.filter { $0.key.app != app }
            case .app:
                state.shared = state.shared.filter { $0.key.app != app }
            case .group(let name):
                state.shared = state.shared.filter { $0.key.app != app || !$0.key.groups.contains(name) }
            case .device(let id):
                state.deviceValues[id]?[app] = nil
            }
        }
    }

    /// Forgets everything about the device (it changed, or is gone).
    public func invalidate(device id: String) {
        state.withLock { state in
            state.epoch += 1
            state.metadataLoads = [:]
            state.sharedLoads = [:]
            state.forget(device: id)
        }
    }

    /// Forgets, besides what ``invalidate(app:scope:)`` forgets, the revisions a change made by
    /// another instance may have made stale: that instance advances the revisions of the devices
    /// it serves, and a device that moves here must never be served an older one (values changed
    /// and changed back have the fingerprint of a revision kept here, but not its number).
    public func invalidateElsewhere(app: String, scope: Scope) {
        invalidate(app: app, scope: scope)
        state.withLock { state in
            state.revisionEpoch += 1
            switch scope {
            case .defaults, .app:
                for device in state.revisions.keys { state.revisions[device]?[app] = nil }
            case .group(let name):
                for device in state.revisions.keys where state.devices[device].map({ $0.groups.contains(name) }) ?? true {
                    state.revisions[device]?[app] = nil
                }
            case .device(let id):
                state.revisions[id]?[app] = nil
            }
        }
    }

    /// Forgets everything (changes made elsewhere may have been missed).
    public func invalidateAll() {
        invalidatePolicies()
        state.withLock { state in
            let epoch = state.epoch + 1
            let revisionEpoch = state.revisionEpoch + 1
            state = State()
            state.epoch = epoch
            state.revisionEpoch = revisionEpoch
        }
    }

    // MARK: - Agent policies

    /// What a device's policy tag depends on when no policy is set at the device's own scope:
    /// its apps and its groups (each sorted, without repeats: neither order counts).
    public struct PolicyTagKey: Hashable, Sendable {
        let apps: [String]
        let groups: [String]

        public init(apps: [String], groups: [String]) {
            self.apps = ServingCache.sortedNames(apps)
            self.groups = ServingCache.sortedNames(groups)
        }
    }

    /// The most policy tags kept: one per combination of apps and groups, which a fleet has
    /// far fewer of; past it (combinations left behind by regrouping) they are all forgotten.
    public static let maximumPolicyTags = 10_000

    private struct PolicyState {
        var policies: [PolicyScope: AgentPolicy]?
        var epoch: UInt64 = 0
        /// The tags resolved from ``policies`` (every settings answer carries one), forgotten
        /// with them: at most one per combination of apps and groups in the fleet.
        var tags: [PolicyTagKey: String] = [:]
    }

    /// Every scope's agent policy, as last read, and the invalidations so far.
    private let policyState = Locked(PolicyState())

    /// Every scope's agent policy, when read since the last change.
    public var policies: [PolicyScope: AgentPolicy]? { policyState.withLock { $0.policies } }

    /// The policy tag of devices with `key` and no policy of their own, resolved from the
    /// policies as they were at `epoch`, when that is still now.
    public func policyTag(_ key: PolicyTagKey, at epoch: UInt64) -> String? {
        policyState.withLock { $0.epoch == epoch ? $0.tags[key] : nil }
    }

    /// Keeps the `tag` resolved for `key` from the policies as they were at `epoch`, unless a
    /// change came since.
    public func record(policyTag tag: String, for key: PolicyTagKey, readAt epoch: UInt64) {
        policyState.withLock { state in
            guard state.epoch == epoch && state.policies != nil else { return }
            if state.tags.count >= Self.maximumPolicyTags { state.tags = [:] }
            state.tags[key] = tag
        }
    }

    /// Counts the changes of agent policies; read it before reading them from the store.
    public var policyEpoch: UInt64 { policyState.withLock { $0.epoch } }

    /// Keeps `policies`, read from the store when ``policyEpoch`` was `epoch`, unless a change
    /// came since.
    public func record(policies: [PolicyScope: AgentPolicy], readAt epoch: UInt64) {
        policyState.withLock { state in
            if state.epoch == epoch { state.policies = policies }
        }
    }

    /// Forgets the agent policies: one changed.
    public func invalidatePolicies() {
        policyState.withLock { state in
            state.policies = nil
            state.tags = [:]
            state.epoch += 1
        }
    }

    /// How many devices are known (for the metrics and tests).
    public var deviceCount: Int { state.withLock { $0.devices.count } }

    static func key(app: String, groups: [String]) -> LayerKey {
        LayerKey(app: app, groups: sortedNames(groups))
    }

    /// `names` sorted by their UTF-8 bytes, without repeats: the form of the keys above, where
    /// neither order nor repeats count.
    static func sortedNames(_ names: [String]) -> [String] {
        Array(Set(names)).sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    }
}
