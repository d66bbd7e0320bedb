import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

/// What every service reads and tells the same way: the stored metadata parsed once, a
/// device as stored, a device's settings as served, agent policies, and the change notices.
extension FleetService {
    /// Tells the notifier of a write of `app` at `scope` (it invalidates what the hot path keeps
    /// and wakes the long-polls the write reaches).
    func notifyChanged(_ app: String, scope: Scope) async {
        lastNotified.withLock { $0 = clock.now }
        await notifier.changed(app, scope: scope)
        events.publish(.settingsChanged(app: app, scope: scope))
    }

    /// Tells the notifier that a device itself changed.
    func notifyDeviceChanged(_ id: String) async {
        lastNotified.withLock { $0 = clock.now }
        await notifier.deviceChanged(id)
        events.publish(.deviceChanged(device: id))
    }

    /// The device with `id`: from memory, or read once from the store.
    func device(id: String) async throws -> Device? {
        if let known = cache.device(id: id) { return known }
        let epoch = cache.epoch
        guard let stored = try await store.device(id: id) else { return nil }
        cache.fill(stored, readAt: epoch)
        return stored
    }

    /// The device as stored now, checked again: after a long-poll wakes, the device may have been
    /// deleted or disabled (401), its token rotated and the old one retired (401), or `app`
    /// taken from it (404 as for any unknown app).
    func recheck(_ device: Device, app: String) async throws -> Device {
        guard let current = try await self.device(id: device.id),
            current.tokenHash == device.tokenHash || current.pendingTokenHash == device.tokenHash
        else {
            throw ServiceError(401, .unauthenticated, "the bearer token is not one this server issued")
        }
        guard !current.disabled else { throw ServiceError.deviceDisabled }
        guard current.has(app: app) else { throw ServiceError.unknownApp(app) }
        return current
    }

    func storedMetadata(app: String) async throws -> StoredMetadata {
        try await cachedMetadata(app: app).stored
    }

    func metadata(app: String) async throws -> Metadata {
        try await cachedMetadata(app: app).metadata
    }

    /// The stored metadata of `app` and the metadata parsed from it: from memory, or read and
    /// parsed once after each upload.
    private func cachedMetadata(app: String) async throws -> (stored: StoredMetadata, metadata: Metadata) {
        guard Metadata.isValidAppID(app) else { throw ServiceError.unknownApp(app) }
        return try await cache.metadata(app: app) { [store] in
            guard let stored = try await store.metadata(app: app) else { throw ServiceError.unknownApp(app) }
            do {
                return (stored, try Metadata(json: Array(stored.document.utf8)))
            } catch {
                throw ServiceError(500, .internalError, "the stored metadata of \(app) cannot be read: \(error)")
            }
        }
    }

    /// The device's settings as it gets them, from memory when nothing changed: the layers of
    /// its groups are read and written as text once for every device in the same groups, its
    /// own values once, and its revision moves (in the store) only when its values changed.
    func served(app: String, device: Device) async throws -> ServedSettings {
        let shared = try await cache.sharedLayers(app: app, groups: device.groups) {
            let epoch = self.cache.epoch
            let metadata = try await self.metadata(app: app)
            let layers = try await self.store.valueLayers(app: app, groups: device.groups, deviceID: device.id)
            // The same read has this device's own values: kept, so they are not read again below.
            self.cache.fill(deviceValues: layers.device, app: app, deviceID: device.id, readAt: epoch)
            return ServingCache.SharedLayers.Parts(metadata: metadata, app: layers.app, groups: layers.groups, rollout: layers.rollout)
        }
        let variant = shared.variant(for: device)
        let own: JSONObject
        if let known = cache.deviceValues(app: app, deviceID: device.id) {
            own = known
        } else {
            let epoch = cache.epoch
            own = try await store.values(app: app, scope: .device(device.id))
            cache.fill(deviceValues: own, app: app, deviceID: device.id, readAt: epoch)
        }
        let values: JSONObject
        let fingerprint: UInt64
        let sharedText: String?
        if own.isEmpty {
            (values, fingerprint, sharedText) = (variant.effective.values, variant.fingerprint, variant.valuesText)
        } else {
            let effective = EffectiveSettings(
                metadata: shared.metadata, app: variant.app, groups: variant.groups, device: own, deviceID: device.id)
            values = effective.values
            fingerprint = effective.fingerprint(schemaVersion: shared.metadata.version)
            sharedText = nil
        }
        let schemaVersion = Int64(shared.metadata.version)
        let state = try await revision(app: app, deviceID: device.id, fingerprint: fingerprint)
        return ServedSettings(
            document: SettingsDocument(app: app, schemaVersion: schemaVersion, revision: state.revision, values: values),
            sharedValuesText: sharedText)
    }

    /// The device's revision for values with `fingerprint`: the one last served when they are
    /// the same (no store access), otherwise advanced in the store (many devices' advances
    /// share a transaction, see ``GroupCommit``).
    func revision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState {
        if let known = cache.revision(app: app, deviceID: deviceID), known.fingerprint == fingerprint { return known }
        let epoch = cache.revisionEpoch
        let state = try await revisionWrites.submit(RevisionAdvance(app: app, deviceID: deviceID, fingerprint: fingerprint))
        cache.record(state, app: app, deviceID: deviceID, readAt: epoch)
        return state
    }

    /// Every scope's agent policy, from memory once read (a change invalidates it, here and,
    /// through the change feed, on the other instances).
    func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        if let known = cache.policies { return known }
        let epoch = cache.policyEpoch
        let policies = try await store.agentPolicies()
        cache.record(policies: policies, readAt: epoch)
        return policies
    }

    /// What the server asks of `device`'s agent, for each of its apps.
    func policy(of device: Device) async throws -> DevicePolicy {
        DevicePolicy.resolve(apps: device.apps, groups: device.groups, deviceID: device.id, policies: try await agentPolicies())
    }

    /// The tag of `device`'s policy (``DevicePolicy/tag``), which every settings answer
    /// carries: from memory for a device with no policy at its own scope (the tag then depends
    /// only on its apps and groups, which many devices share), resolved anew for the others.
    func devicePolicyTag(_ device: Device) async throws -> String {
        // The policies, the device's own-scope check and the kept tag all of one epoch: a
        // change meanwhile makes the lookup miss, and the tag is resolved from `policies`.
        let epoch = cache.policyEpoch
        let policies = try await agentPolicies()
        if policies.isEmpty { return "0" }
        let resolve = { DevicePolicy.resolve(apps: device.apps, groups: device.groups, deviceID: device.id, policies: policies).tag }
        if policies[.device(device.id)] != nil { return resolve() }
        let key = ServingCache.PolicyTagKey(apps: device.apps, groups: device.groups)
        if let known = cache.policyTag(key, at: epoch) { return known }
        let tag = resolve()
        cache.record(policyTag: tag, for: key, readAt: epoch)
        return tag
    }

    /// `scope` when values can be written there: a device scope's device must exist.
    ///
    /// - Throws: 404 `unknown-device`.
    func writableScope(_ scope: Scope) async throws -> Scope {
        if case .device(let id) = scope, try await store.device(id: id) == nil { throw ServiceError.unknownDevice(id) }
        return scope
    }

    /// Whose settings a change at `scope` reaches: the enrolled devices it applies to and the
    /// devices that will enroll later.
    func audiences(of scope: Scope, app: String) async throws -> [ValueAudit.Audience] {
        switch scope {
        case .defaults, .app:
            return try await store.devices().filter { $0.has(app: app) }.map(ValueAudit.Audience.device) + [.future(groups: [])]
        case .group(let name):
            return try await store.devices().filter { $0.has(app: app) && $0.groups.contains(name) }.map(ValueAudit.Audience.device)
                + [.future(groups: [name])]
        case .device(let id):
            guard let device = try await store.device(id: id) else { throw ServiceError.unknownDevice(id) }
            return [.device(device)]
        }
    }

    /// Who a device's own write is recorded as.
    static func deviceActor(_ device: Device) -> String { "device \(device.id)" }
}

/// A settings document and the text of its body.
public struct ServedSettings: Sendable {
    public let document: SettingsDocument
    /// The text of the values when every device that gets them shares it; `nil` for a
    /// device with values of its own.
    let sharedValuesText: String?

    /// `document.json.serialized()`, written from values whose text is shared by every
    /// device that gets the same values. Written when asked for: a 304 needs none.
    public var body: String {
        SettingsDocument.jsonText(
            app: document.app, schemaVersion: document.schemaVersion, revision: document.revision,
            valuesText: sharedValuesText ?? JSONValue.object(document.values).serialized())
    }
}
