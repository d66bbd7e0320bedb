import FleetJSON
import FleetProtocol
import FleetServerCore
import Testing

@testable import FleetConsole

/// The fleet's gauges as values, from overviews made by hand: no store, no server, no clock.
@Suite("Fleet gauges")
struct FleetGaugesTests {
    static let now: Int64 = 1_795_000_000

    static func device(_ id: String, apps: [String] = ["kiosk"], seenAgo: Int64?, disabled: Bool = false) -> Device {
        Device(
            id: id, tokenHash: "hash-" + id, apps: apps, groups: [], enrolledAt: now - 1_000_000, lastSeenAt: seenAgo.map { now - $0 },
            disabled: disabled)
    }

    static func standing(_ app: String, _ state: StatusReport.State?) -> DeviceAppStanding {
        DeviceAppStanding(
            app: app, servedRevision: 1, servedIsNewest: true,
            latest: state.map {
                DeviceStatus(report: StatusReport(revision: 1, schemaVersion: 1, state: $0, source: .agent), receivedAt: now - 10)
            },
            state: .waiting)
    }

    static func rollup(_ app: String, rollout: Rollout? = nil) -> AppRollup {
        AppRollup(app: app, title: nil, version: 1, devices: 0, onNewest: 0, states: [:], rollout: rollout)
    }

    static func rollout(_ app: String, phase: RolloutPhase, wave: Int, of waves: [RolloutWave]) -> Rollout {
        Rollout(
            id: "r-" + app, app: app, scope: .app, patch: ["title": "Staged"], waves: waves, pauseOnErrorsBasisPoints: 0,
            waveWaitSeconds: 600, phase: phase, currentWave: wave, waveStartedAt: now, startedAt: now, actor: "owner")
    }

    /// Each series as Prometheus writes it, with its value.
    static func lines(_ gauges: FleetGauges) -> [String: Double] {
        Dictionary(uniqueKeysWithValues: gauges.values.map { ($0.key.description, $0.value) })
    }

    /// kiosk: six enabled devices seen from now to never, one disabled; a paused rollout at its
    /// second wave of three. signage: one device, a completed rollout (not active: from the
    /// newest rollouts). lobby: no device, no rollout.
    static let overview = FleetOverview(
        apps: [
            rollup("kiosk", rollout: rollout("kiosk", phase: .paused, wave: 1, of: [.group("w1"), .group("w2"), .everyone])),
            rollup("lobby"), rollup("signage"),
        ],
        devices: [
            device("d-now", seenAgo: 0), device("d-11m", seenAgo: 660), device("d-exactly-1h", seenAgo: 3600),
            device("d-2h", seenAgo: 7200), device("d-3d", seenAgo: 3 * 86_400), device("d-never", seenAgo: nil),
            device("d-off", seenAgo: 5 * 86_400, disabled: true), device("d-sign", apps: ["signage"], seenAgo: 30),
        ],
        standings: [
            "d-now": ["kiosk": standing("kiosk", .applied)], "d-11m": ["kiosk": standing("kiosk", .error)],
            "d-exactly-1h": ["kiosk": standing("kiosk", .unsupported)], "d-2h": ["kiosk": standing("kiosk", .pending)],
            "d-3d": ["kiosk": standing("kiosk", .applied)], "d-never": ["kiosk": standing("kiosk", nil)],
            "d-off": ["kiosk": standing("kiosk", .error)], "d-sign": ["signage": standing("signage", .applied)],
        ],
        metadata: [:])

    @Test("per app: enabled and disabled devices, silent ones, last-seen ages, latest reports, the newest rollout's state and wave")
    func gauges() {
        let gauges = FleetGauges(
            overview: Self.overview, newestRollouts: ["signage": Self.rollout("signage", phase: .completed, wave: 0, of: [.everyone])],
            now: Self.now, silentAfter: 3600)
        let lines = Self.lines(gauges)
        let expected: [String: Double] = [
            #"fleetset_devices{app="kiosk"}"#: 6, #"fleetset_devices_disabled{app="kiosk"}"#: 1,
            // Last seen longer ago than an hour (exactly an hour is not), or never.
            #"fleetset_devices_silent{app="kiosk"}"#: 3,
            #"fleetset_devices_last_seen{app="kiosk",age="10m"}"#: 1, #"fleetset_devices_last_seen{app="kiosk",age="1h"}"#: 2,
            #"fleetset_devices_last_seen{app="kiosk",age="1d"}"#: 1, #"fleetset_devices_last_seen{app="kiosk",age="older"}"#: 2,
            // A pending report is neither; the disabled device's error does not count.
            #"fleetset_devices_reporting{app="kiosk",state="applied"}"#: 2,
            #"fleetset_devices_reporting{app="kiosk",state="error"}"#: 1,
            #"fleetset_devices_reporting{app="kiosk",state="unsupported"}"#: 1,
            #"fleetset_rollout_state{app="kiosk",state="running"}"#: 0, #"fleetset_rollout_state{app="kiosk",state="paused"}"#: 1,
            #"fleetset_rollout_state{app="kiosk",state="completed"}"#: 0, #"fleetset_rollout_state{app="kiosk",state="aborted"}"#: 0,
            #"fleetset_rollout_state{app="kiosk",state="none"}"#: 0,
            #"fleetset_rollout_wave{app="kiosk"}"#: 2, #"fleetset_rollout_waves{app="kiosk"}"#: 3,

            #"fleetset_devices{app="signage"}"#: 1, #"fleetset_devices_silent{app="signage"}"#: 0,
            #"fleetset_devices_last_seen{app="signage",age="10m"}"#: 1,
            #"fleetset_devices_reporting{app="signage",state="applied"}"#: 1,
            #"fleetset_rollout_state{app="signage",state="completed"}"#: 1, #"fleetset_rollout_state{app="signage",state="none"}"#: 0,
            #"fleetset_rollout_wave{app="signage"}"#: 1, #"fleetset_rollout_waves{app="signage"}"#: 1,

            // An app with nothing has every series, at 0, and the state none.
            #"fleetset_devices{app="lobby"}"#: 0, #"fleetset_devices_silent{app="lobby"}"#: 0,
            #"fleetset_devices_reporting{app="lobby",state="error"}"#: 0,
            #"fleetset_rollout_state{app="lobby",state="none"}"#: 1, #"fleetset_rollout_state{app="lobby",state="paused"}"#: 0,
            #"fleetset_rollout_wave{app="lobby"}"#: 0,
        ]
        for (series, value) in expected { #expect(lines[series] == value, "\(series): \(lines[series].map { "\($0)" } ?? "missing")") }
        // 17 series an app, whatever its fleet: the labels are apps and fixed lists, never devices.
        #expect(lines.count == 3 * 17)
        #expect(!lines.keys.contains { $0.contains("d-") })
    }

    @Test("silent is strictly longer ago than --silent-after")
    func silentAfter() {
        let overview = FleetOverview(
            apps: [Self.rollup("kiosk")], devices: [Self.device("a", seenAgo: 60), Self.device("b", seenAgo: 61)], standings: [:],
            metadata: [:])
        #expect(Self.lines(FleetGauges(overview: overview, now: Self.now, silentAfter: 60))[#"fleetset_devices_silent{app="kiosk"}"#] == 1)
        #expect(Self.lines(FleetGauges(overview: overview, now: Self.now, silentAfter: 61))[#"fleetset_devices_silent{app="kiosk"}"#] == 0)
        #expect(Self.lines(FleetGauges(overview: overview, now: Self.now, silentAfter: 59))[#"fleetset_devices_silent{app="kiosk"}"#] == 2)
    }

    @Test("age buckets: up to 10 minutes, an hour, a day; older or never")
    func ages() {
        let cases: [(Int64?, FleetGauges.Age)] = [
            (0, .tenMinutes), (600, .tenMinutes), (601, .hour), (3600, .hour), (3601, .day), (86_400, .day), (86_401, .older),
            (nil, .older),
        ]
        for (seconds, age) in cases { #expect(FleetGauges.Age(seconds: seconds) == age, "\(seconds.map { "\($0)" } ?? "never")") }
    }

    @Test("the changes to set: every series in order, and 0 for each series of the previous gauges that is gone")
    func changes() {
        let before = FleetGauges(overview: Self.overview, now: Self.now, silentAfter: 3600)
        let after = FleetGauges(
            overview: FleetOverview(apps: [Self.rollup("lobby")], devices: [], standings: [:], metadata: [:]), now: Self.now,
            silentAfter: 3600)
        let first = before.changes(after: nil)
        #expect(first.count == before.values.count)
        #expect(first.map(\.series) == first.map(\.series).sorted())
        let changes = after.changes(after: before)
        #expect(changes.count == before.values.count)
        let kiosk = changes.filter { $0.series.labels.first == .init("app", "kiosk") }
        #expect(kiosk.count == 17 && kiosk.allSatisfy { $0.value == 0 })
        #expect(changes.contains { $0.series.description == #"fleetset_rollout_state{app="lobby",state="none"}"# && $0.value == 1 })
    }
}
