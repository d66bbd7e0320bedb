import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore

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

/// The console's read models: the fleet overview and a device's standing with its apps, read
/// from the store through the services' public API (the console is not the hot path).
public struct ConsoleQueries: Sendable {
    let context: ServiceContext
    let admin: SettingsAdmin

    public init(_ services: FleetServices) {
        context = services.context
        admin = services.admin
    }

    private var store: any SettingsStore { context.store }
}

extension ConsoleQueries {
    /// Every app's roll-up and every device's standing with each of its apps, read from the
    /// store (not the serving cache: the console is not the hot path).
    public func overview() async throws -> FleetOverview {
        let stored = try await store.allMetadata()
        let devices = try await store.devices()
        var rollups: [AppRollup] = []
        var standings: [String: [String: DeviceAppStanding]] = [:]
        var metadataByApp: [String: Metadata] = [:]
        for entry in stored {
            guard let metadata = (try? await admin.currentMetadata(app: entry.app)) ?? nil else { continue }
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
            guard let metadata = try await admin.currentMetadata(app: app) else { continue }
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
}
