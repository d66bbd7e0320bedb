import FleetProtocol
import FleetServerCore

/// The fleet's state as Prometheus gauges, per app: its devices, how long ago they were last
/// seen, their latest reports, and its newest rollout. A value computed from a
/// ``FleetOverview``; `FleetGaugeRecorder` sets them on the server's metrics, and the alert
/// rules (`packaging/prometheus/fleetset.rules.yml`) read them.
///
/// Labels stay few: an app, and a state or age bucket from a fixed list; never a device or a
/// group. Only enabled devices count, but in `fleetset_devices_disabled`: a disabled device is
/// refused, so it goes silent by design.
public struct FleetGauges: Sendable, Hashable {
    /// One label of a series.
    public struct Label: Sendable, Hashable {
        public let name: String
        public let value: String

        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    /// A gauge's name with its labels, in order (`app` first).
    public struct Series: Sendable, Hashable, Comparable, CustomStringConvertible {
        public let name: String
        public let labels: [Label]

        public init(_ name: String, _ labels: [Label]) {
            self.name = name
            self.labels = labels
        }

        /// The labels as swift-metrics dimensions.
        public var dimensions: [(String, String)] { labels.map { ($0.name, $0.value) } }

        /// As Prometheus writes it: `fleetset_devices{app="kiosk"}`.
        public var description: String {
            "\(name){\(labels.map { "\($0.name)=\"\($0.value)\"" }.joined(separator: ","))}"
        }

        public static func < (left: Series, right: Series) -> Bool { left.description < right.description }
    }

    /// How long ago a device was last seen, each bucket up to its bound (after the one before).
    /// The first is 10 minutes: a device holding a long-poll (up to 5 minutes) is seen when it
    /// asks, and its last-seen time is written at most once a minute.
    public enum Age: String, Sendable, CaseIterable {
        case tenMinutes = "10m"
        case hour = "1h"
        case day = "1d"
        /// Longer ago than a day, or never.
        case older

        /// The bucket of a device last seen `seconds` ago (`nil`: never).
        public init(seconds: Int64?) {
            guard let seconds else {
                self = .older
                return
            }
            self =
                switch seconds {
                case ...600: .tenMinutes
                case ...3600: .hour
                case ...86_400: .day
                default: .older
                }
        }
    }

    /// The latest-report states counted (a `pending` report is neither success nor failure).
    public static let reportStates: [StatusReport.State] = [.applied, .error, .unsupported]

    /// The value of each series.
    public let values: [Series: Double]

    /// The gauges of `overview` at `now` (seconds since the Unix epoch).
    ///
    /// - Parameters:
    ///   - newestRollouts: each app's newest rollout, ended ones included, by app id (the
    ///     overview has the active ones only); an app with neither has the state `none`.
    ///   - silentAfter: seconds since a device was last seen beyond which it counts as silent.
    public init(overview: FleetOverview, newestRollouts: [String: Rollout] = [:], now: Int64, silentAfter: Int64) {
        var values: [Series: Double] = [:]
        for rollup in overview.apps {
            let app = rollup.app
            func set(_ name: String, _ value: Int, _ label: Label? = nil) {
                values[Series(name, [Label("app", app)] + (label.map { [$0] } ?? []))] = Double(value)
            }
            let members = overview.devices.filter { $0.has(app: app) }
            let enabled = members.filter { !$0.disabled }
            set("fleetset_devices", enabled.count)
            set("fleetset_devices_disabled", members.count - enabled.count)
            var ages: [Age: Int] = [:]
            var silent = 0
            var reports: [StatusReport.State: Int] = [:]
            for device in enabled {
                let age = device.lastSeenAt.map { now - $0 }
                ages[Age(seconds: age), default: 0] += 1
                if (age ?? .max) > silentAfter { silent += 1 }
                if let state = overview.standings[device.id]?[app]?.latest?.report.state { reports[state, default: 0] += 1 }
            }
            set("fleetset_devices_silent", silent)
            for age in Age.allCases { set("fleetset_devices_last_seen", ages[age] ?? 0, Label("age", age.rawValue)) }
            for state in Self.reportStates { set("fleetset_devices_reporting", reports[state] ?? 0, Label("state", state.rawValue)) }
            let rollout = rollup.rollout ?? newestRollouts[app]
            let phase = rollout?.phase.rawValue ?? "none"
            for state in RolloutPhase.allCases.map(\.rawValue) + ["none"] {
                set("fleetset_rollout_state", state == phase ? 1 : 0, Label("state", state))
            }
            set("fleetset_rollout_wave", rollout.map { $0.currentWave + 1 } ?? 0)
            set("fleetset_rollout_waves", rollout?.waves.count ?? 0)
        }
        self.values = values
    }

    /// What to set on the metrics, in order of series: every value, and 0 for each series
    /// `previous` had that these gauges do not (an app gone), so that no stale value stays.
    public func changes(after previous: FleetGauges?) -> [(series: Series, value: Double)] {
        var all = values
        for series in (previous?.values ?? [:]).keys where all[series] == nil { all[series] = 0 }
        return all.sorted { $0.key < $1.key }.map { (series: $0.key, value: $0.value) }
    }
}

extension ConsoleQueries {
    /// The fleet's gauges now (see ``FleetGauges``): the ``overview()``, and the newest rollout
    /// of each app without an active one.
    public func gauges(silentAfter: Int64) async throws -> FleetGauges {
        let overview = try await overview()
        var newest: [String: Rollout] = [:]
        for rollup in overview.apps where rollup.rollout == nil {
            newest[rollup.app] = try await context.store.rollouts(app: rollup.app).first
        }
        return FleetGauges(overview: overview, newestRollouts: newest, now: context.now, silentAfter: silentAfter)
    }
}
