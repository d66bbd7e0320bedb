import FleetJSON
import FleetMetadata
import FleetProtocol

/// Where a device stands with one app's newest settings.
public enum RolloutState: String, Sendable, Hashable, CaseIterable {
    /// It reported `applied` for the newest revision.
    case applied
    /// It reported `error` for the newest revision.
    case error
    /// It reported `unsupported` for the newest revision.
    case unsupported
    /// Nothing yet: it has not fetched the newest revision, or not reported on it.
    case waiting
}

/// One device's standing with one app.
public struct DeviceAppStanding: Sendable, Hashable {
    public let app: String
    /// The revision last served to the device.
    public let servedRevision: Int64?
    /// Whether what was last served is what the device would get now.
    public let servedIsNewest: Bool
    /// Its latest report for the app (any revision).
    public let latest: DeviceStatus?
    /// Its standing with the newest settings.
    public let state: RolloutState
}

/// One app as the console's Apps page shows it.
public struct AppRollup: Sendable, Hashable {
    public let app: String
    /// The metadata's `title`, when it has one.
    public let title: String?
    public let version: Int
    /// Devices given the app.
    public let devices: Int
    /// Devices that have fetched the newest revision.
    public let onNewest: Int
    /// Devices per ``RolloutState``.
    public let states: [RolloutState: Int]
    /// The app's active rollout, if any.
    public let rollout: Rollout?
}

/// The whole fleet at a glance: every app's roll-up and every device's standing per app.
public struct FleetOverview: Sendable {
    public let apps: [AppRollup]
    public let devices: [Device]
    /// By device id, then app id.
    public let standings: [String: [String: DeviceAppStanding]]
    /// The metadata versions, by app id.
    public let metadata: [String: Metadata]

    public init(
        apps: [AppRollup], devices: [Device], standings: [String: [String: DeviceAppStanding]], metadata: [String: Metadata]
    ) {
        self.apps = apps
        self.devices = devices
        self.standings = standings
        self.metadata = metadata
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

extension SettingsService {
    /// The service clock's time, in seconds since the epoch.
    public var now: Int64 { wallClock.secondsSinceEpoch() }

    /// The stored metadata of `app`, or `nil` when it has none.
    public func currentMetadata(app: String) async throws -> Metadata? {
        guard try await store.metadata(app: app) != nil else { return nil }
        return try await metadata(app: app)
    }

    /// Every app's roll-up and every device's standing with each of its apps, read from the
    /// store (not the serving cache: the console is not the hot path).
    public func overview() async throws -> FleetOverview {
        let stored = try await store.allMetadata()
        let devices = try await store.devices()
        var rollups: [AppRollup] = []
        var standings: [String: [String: DeviceAppStanding]] = [:]
        var metadataByApp: [String: Metadata] = [:]
        for entry in stored {
            guard let metadata = try? await metadata(app: entry.app) else { continue }
            metadataByApp[entry.app] = metadata
            async let values = store.allValues(app: entry.app)
            async let revisions = store.revisions(app: entry.app)
            async let reports = store.latestStatuses(app: entry.app)
            async let active = store.activeRollout(app: entry.app)
            let (allValues, served, latest, rollout) = try await (values, revisions, reports, active)
            var states: [RolloutState: Int] = [:]
            var onNewest = 0
            let members = devices.filter { $0.has(app: entry.app) }
            for device in members {
                let standing = Self.standing(
                    app: entry.app, device: device, metadata: metadata, values: allValues, rollout: rollout, served: served[device.id],
                    latest: latest[device.id].map { DeviceStatus(report: $0.report, receivedAt: $0.receivedAt) })
                standings[device.id, default: [:]][entry.app] = standing
                states[standing.state, default: 0] += 1
                if standing.servedIsNewest { onNewest += 1 }
            }
            rollups.append(
                AppRollup(
                    app: entry.app, title: metadata.document["title"]?.stringValue, version: metadata.version, devices: members.count,
                    onNewest: onNewest, states: states, rollout: rollout))
        }
        return FleetOverview(apps: rollups, devices: devices, standings: standings, metadata: metadataByApp)
    }

    /// One device and its standing with each of its apps that has metadata (by app id), read
    /// for that device alone (the Device page; ``overview()`` reads the whole fleet).
    ///
    /// - Throws: 404 `unknown-device`.
    public func standings(deviceID: String) async throws -> (device: Device, standings: [String: DeviceAppStanding]) {
        guard let device = try await store.device(id: deviceID) else { throw ServiceError.unknownDevice(deviceID) }
        var standings: [String: DeviceAppStanding] = [:]
        for app in device.apps {
            guard try await store.metadata(app: app) != nil else { continue }
            let metadata = try await metadata(app: app)
            let layers = try await store.valueLayers(app: app, groups: device.groups, deviceID: device.id)
            var values: [Scope: JSONObject] = [.app: layers.app, .device(device.id): layers.device]
            for (group, groupValues) in layers.groups { values[.group(group)] = groupValues }
            let latest = try await store.latestStatus(app: app, deviceID: device.id)
            standings[app] = Self.standing(
                app: app, device: device, metadata: metadata, values: values, rollout: layers.rollout,
                served: try await store.revision(app: app, deviceID: device.id),
                latest: latest.map { DeviceStatus(report: $0.report, receivedAt: $0.receivedAt) })
        }
        return (device, standings)
    }

    /// Where `device` stands with `app`: the newest revision is the one whose fingerprint its
    /// effective settings have now (with a rollout's patch, when it admitted the device).
    static func standing(
        app: String, device: Device, metadata: Metadata, values: [Scope: JSONObject], rollout: Rollout?, served: RevisionState?,
        latest: DeviceStatus?
    ) -> DeviceAppStanding {
        var stored = ValueLayers(app: values[.app] ?? [:], device: values[.device(device.id)] ?? [:])
        for group in device.groups { stored.groups[group] = values[.group(group)] }
        let layers = rollout?.layers(stored, for: device) ?? stored
        let effective = EffectiveSettings(
            metadata: metadata, app: layers.app, groups: layers.groups, device: layers.device, deviceID: device.id)
        let newest = served?.fingerprint == effective.fingerprint(schemaVersion: metadata.version)
        var state = RolloutState.waiting
        if newest, let served, let report = latest?.report, report.revision == served.revision {
            state =
                switch report.state {
                case .applied: .applied
                case .error: .error
                case .unsupported: .unsupported
                case .pending: .waiting
                }
        }
        return DeviceAppStanding(app: app, servedRevision: served?.revision, servedIsNewest: newest, latest: latest, state: state)
    }

    /// The device's recent status reports for every app, newest first (see
    /// ``SettingsStore/recentStatuses(deviceID:)``).
    public func recentReports(deviceID: String) async throws -> [StatusRecord] {
        try await store.recentStatuses(deviceID: deviceID)
    }

    /// The values set at one scope and what it inherits from the scopes below it.
    ///
    /// - Throws: 400 for a bad scope, 404 for an unknown app or device.
    public func scopeValues(app: String, scope parameter: String?) async throws -> ScopeValuesView {
        let metadata = try await metadata(app: app)
        let scope = try await writableScope(parameter)
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

    /// What storing `bytes` as `app`'s metadata would do, without storing it.
    ///
    /// - Throws: what ``putMetadata(app:document:force:)`` throws for a document it cannot read.
    public func previewMetadata(app: String, document bytes: [UInt8]) async throws -> MetadataPreview {
        let proposed = try Self.readMetadata(app: app, document: bytes)
        let stored = try await store.metadata(app: app)
        let storedMetadata = stored == nil ? nil : try await metadata(app: app)
        var versionProblem: String?
        if let stored, stored.version >= proposed.version {
            versionProblem = "version \(proposed.version) is not greater than the stored version \(stored.version)"
        }
        let findings = ValueAudit.findings(
            metadata: proposed, values: try await store.allValues(app: app), audiences: try await audiences(of: .app, app: app))
        return MetadataPreview(stored: storedMetadata, proposed: proposed, versionProblem: versionProblem, breaks: findings.map(\.detail))
    }
}

extension SettingsService {
    /// Records a console sign-out in the store, so that the session's cookie is refused by every
    /// instance and after a restart, not only by the one that signed it out.
    public func endConsoleSession(id: String, expiresAt: Int64) async throws {
        try await store.endConsoleSession(id: id, expiresAt: expiresAt, now: now)
    }

    /// Whether the console session `id` was signed out (see ``endConsoleSession(id:expiresAt:)``).
    public func isConsoleSessionEnded(id: String) async throws -> Bool {
        try await store.isConsoleSessionEnded(id: id)
    }
}
