import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension SettingsAdmin {
    /// Every device with when it was last seen, the revision served and its latest report.
    ///
    /// - Parameter withDetails: keep each report's ``FleetProtocol/StatusReport/detail``; without
    ///   it the answer has no `detail` member, as a 0.7.0 CLI reads it.
    public func devices(app: String, visibleTo caller: Caller? = nil, withDetails: Bool = true) async throws -> DeviceList {
        _ = try await storedMetadata(app: app)
        async let devices = store.devices()
        async let revisions = store.revisions(app: app)
        async let statuses = store.latestStatuses(app: app)
        let (allDevices, served, reports) = try await (devices, revisions, statuses)
        return DeviceList(
            app: app,
            devices: allDevices.filter { $0.has(app: app) && caller.map($0.isSeen(by:)) ?? true }.map { device in
                DeviceSummary(
                    id: device.id, groups: device.groups, enrolledAt: device.enrolledAt, lastSeenAt: device.lastSeenAt,
                    servedRevision: served[device.id]?.revision,
                    status: reports[device.id].map { stored in
                        var report = stored.report
                        if !withDetails { report.detail = nil }
                        return DeviceStatus(report: report, receivedAt: stored.receivedAt)
                    })
            })
    }

    /// A device's effective values and the scope that set each, secrets masked.
    public func explain(app: String, deviceID: String) async throws -> Explanation {
        let metadata = try await metadata(app: app)
        guard let device = try await store.device(id: deviceID) else { throw ServiceError.unknownDevice(deviceID) }
        let layers = try await store.valueLayers(app: app, groups: device.groups, deviceID: device.id).served(to: device)
        let effective = EffectiveSettings(
            metadata: metadata, app: layers.app, groups: layers.groups, device: layers.device, deviceID: device.id)
        return Explanation(
            app: app, device: device.id, schemaVersion: Int64(metadata.version),
            servedRevision: try await store.revision(app: app, deviceID: device.id)?.revision, values: metadata.masked(effective.values),
            sources: effective.sources.mapValues(\.description).merging(
                effective.unapplied.mapValues { "device:\(device.id), left out: \($0)" }, uniquingKeysWith: { $1 }),
            deviceInfo: DeviceInfo.visible(try await store.deviceInfo(id: device.id)?.info ?? [:], apps: device.apps),
            policy: try await policy(of: device).apps[app] ?? DevicePolicy.AppPolicy())
    }

    /// The values set at one scope and what it inherits from the scopes below it.
    ///
    /// - Throws: 400 for a bad scope, 404 for an unknown app or device.
    public func scopeValues(app: String, scope named: Scope) async throws -> ScopeValuesView {
        let metadata = try await metadata(app: app)
        let scope = try await writableScope(named)
        let all = try await store.allValues(app: app)
        var deviceGroups: [String] = []
        if case .device(let id) = scope {
            guard let device = try await store.device(id: id) else { throw ServiceError.unknownDevice(id) }
            deviceGroups = device.groups
        }
        return Self.scopeValuesView(metadata: metadata, scope: scope, all: all, deviceGroups: deviceGroups)
    }

    /// The view of `scope` made from every scope's values (`all`) and, for a device, its groups.
    static func scopeValuesView(metadata: Metadata, scope: Scope, all: [Scope: JSONObject], deviceGroups: [String]) -> ScopeValuesView {
        let below: EffectiveSettings
        switch scope {
        case .defaults, .app:
            below = EffectiveSettings(metadata: metadata, app: [:], groups: [:], device: [:], deviceID: "")
        case .group:
            below = EffectiveSettings(metadata: metadata, app: all[.app] ?? [:], groups: [:], device: [:], deviceID: "")
        case .device(let id):
            var groups: [String: JSONObject] = [:]
            for group in deviceGroups { groups[group] = all[.group(group)] }
            below = EffectiveSettings(metadata: metadata, app: all[.app] ?? [:], groups: groups, device: [:], deviceID: id)
        }
        // A device's key-path values are shown inside their settings: the fleet's value with
        // the device's own places laid over it.
        let own = all[scope] ?? [:]
        var values = JSONObject()
        for (key, value) in own where !KeyPathValues.isKeyPath(key) { values[key] = value }
        let heldAtKeyPaths = Set(own.keys.filter(KeyPathValues.isKeyPath).compactMap(KeyPathValues.setting(of:)))
        if !heldAtKeyPaths.isEmpty {
            var effective = below.values
            for (key, value) in values { effective[key] = value }
            KeyPathValues.overlay(own, onto: &effective)
            for key in heldAtKeyPaths { values[key] = effective[key] }
        }
        return ScopeValuesView(
            metadata: metadata, scope: scope, values: metadata.masked(values), inherited: metadata.masked(below.values),
            inheritedSources: below.sources, heldAtKeyPaths: heldAtKeyPaths)
    }
}

/// What an admin sees when editing one scope: the values set there and what it inherits.
public struct ScopeValuesView: Sendable {
    public let metadata: Metadata
    public let scope: Scope
    /// The values set at this scope, secrets masked.
    public let values: JSONObject
    /// What each setting would be without this scope, secrets masked.
    public let inherited: JSONObject
    /// Which scope each inherited value comes from.
    public let inheritedSources: [String: Scope]
    /// The settings a device holds only some places of (``KeyPathValues``): ``values`` shows
    /// each as the device gets it, and a change of one replaces the setting whole.
    public let heldAtKeyPaths: Set<String>

    public init(
        metadata: Metadata, scope: Scope, values: JSONObject, inherited: JSONObject, inheritedSources: [String: Scope],
        heldAtKeyPaths: Set<String> = []
    ) {
        self.metadata = metadata
        self.scope = scope
        self.values = values
        self.inherited = inherited
        self.inheritedSources = inheritedSources
        self.heldAtKeyPaths = heldAtKeyPaths
    }
}

/// What uploading a new metadata version would do, before it is stored.
public struct MetadataPreview: Sendable {
    /// The stored version (`nil`: the app is new).
    public let stored: Metadata?
    public let proposed: Metadata
    /// Why the upload would be refused whatever the values (its version is not greater).
    public let versionProblem: String?
    /// The stored values the new version would refuse, for which devices (the 409 details).
    public let breaks: [ErrorBody.Detail]
}
