import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension RolloutService {
    /// Looks at every running rollout once and takes the step ``RolloutGate`` decides: admit
    /// the next wave, complete, or pause. The server calls it on a timer; it is safe on several
    /// instances at once (each step is written only if the rollout is as it was read).
    ///
    /// - Parameter onlyWhenDue: look only at rollouts with news: a status report of the app
    ///   since the last look (on this instance), a wave whose time is up, or
    ///   ``rolloutLookInterval`` since the last look (reports other instances took). Each look
    ///   reads the app's devices, values, revisions and recent reports, so an idle rollout on a
    ///   large fleet is not read every tick.
    /// - Returns: the running rollouts as they are after the pass.
    @discardableResult
    public func superviseRollouts(onlyWhenDue: Bool = false) async throws -> [Rollout] {
        var result: [Rollout] = []
        for rollout in try await store.activeRollouts() where rollout.phase == .running {
            let now = wallClock.secondsSinceEpoch()
            let due = rolloutLooks.withLock { looks in
                let due =
                    !onlyWhenDue || looks.reported.contains(rollout.app) || now >= rollout.waveStartedAt + rollout.waveWaitSeconds
                    || now - (looks.lastLooked[rollout.app] ?? .min / 2) >= Self.rolloutLookInterval
                if due {
                    looks.reported.remove(rollout.app)
                    looks.lastLooked[rollout.app] = now
                }
                return due
            }
            guard due else {
                result.append(rollout)
                continue
            }
            do {
                result.append(try await supervise(rollout))
            } catch {
                // One app's trouble (its metadata unreadable, a conflict) holds up no other app.
                logger.error(
                    "rollout not looked at",
                    metadata: ["event": "rollout", "app": "\(rollout.app)", "rollout": "\(rollout.id)", "error": "\(error)"])
                result.append(rollout)
            }
        }
        return result
    }

    /// The longest a running rollout goes unlooked at by an instance that hears of no report:
    /// 10 s.
    public static let rolloutLookInterval: Int64 = 10

    private func supervise(_ read: Rollout) async throws -> Rollout {
        let states = try await deviceStates(of: read)
        let now = wallClock.secondsSinceEpoch()
        let step = RolloutGate.step(read, devices: states, now: now)
        switch step {
        case .wait, .none: return read
        case .advance, .complete, .pause:
            return try await writes.run { () async throws -> Rollout in
                // Another instance (or an admin) may have moved it since it was read.
                guard var rollout = try await self.store.activeRollout(app: read.app), rollout == read else { return read }
                switch step {
                case .pause(let reason):
                    rollout.phase = .paused
                    rollout.reason = reason
                    rollout.version += 1
                    try await self.commitRollout(
                        rollout, summary: "rollout \(rollout.id) paused: \(reason)", actor: "server", note: "", at: now)
                    return rollout
                default:
                    return try await self.moveOn(&rollout, at: now, actor: "server", note: "")
                }
            }
        }
    }

    /// Where each admitted device of `rollout` stands with the staged values (see
    /// ``RolloutDeviceState``): it fetched them when the revision last served to it has their
    /// fingerprint, and then reported on that revision — the agent, and the app too when the
    /// app acknowledges revisions (it has reported before). A device whose own or group values
    /// hide the patch counts as applied (the rollout changes nothing for it, and what it
    /// reported before is not the rollout's doing). Disabled devices are left out.
    func deviceStates(of rollout: Rollout) async throws -> [RolloutDeviceState] {
        let app = rollout.app
        let metadata = try await metadata(app: app)
        async let devices = store.devices()
        async let values = store.allValues(app: app)
        async let revisions = store.revisions(app: app)
        async let history = store.statusHistory(app: app)
        let (allDevices, allValues, served, reports) = try await (devices, values, revisions, history)
        var reportsByDevice: [String: [StatusReport]] = [:]
        for record in reports { reportsByDevice[record.deviceID, default: []].append(record.report) }
        var sharedFingerprints: [[String]: (staged: UInt64, stored: UInt64)] = [:]
        var states: [RolloutDeviceState] = []
        for device in allDevices where device.has(app: app) && !device.disabled && rollout.reaches(device) {
            let wave = rollout.wave(of: device)
            guard wave <= rollout.currentWave else { continue }
            let own = allValues[.device(device.id)] ?? [:]
            let groups = device.groups.sorted()
            let fingerprints: (staged: UInt64, stored: UInt64)
            if own.isEmpty, let known = sharedFingerprints[groups] {
                fingerprints = known
            } else {
                var layers = ValueLayers(app: allValues[.app] ?? [:], device: own)
                for group in device.groups { layers.groups[group] = allValues[.group(group)] }
                func fingerprint(_ layers: ValueLayers) -> UInt64 {
                    EffectiveSettings(
                        metadata: metadata, app: layers.app, groups: layers.groups, device: layers.device, deviceID: device.id
                    )
                    .fingerprint(schemaVersion: metadata.version)
                }
                fingerprints = (fingerprint(rollout.staged(layers)), fingerprint(layers))
                if own.isEmpty { sharedFingerprints[groups] = fingerprints }
            }
            guard fingerprints.staged != fingerprints.stored else {
                // Its own or its groups' values hide the patch: the rollout changes nothing for it.
                states.append(RolloutDeviceState(device: device.id, wave: wave, outcome: .applied, detail: "not changed by the rollout"))
                continue
            }
            let (outcome, detail) = Self.outcome(
                served: served[device.id], stagedFingerprint: fingerprints.staged, reports: reportsByDevice[device.id] ?? [])
            states.append(RolloutDeviceState(device: device.id, wave: wave, outcome: outcome, detail: detail))
        }
        return states
    }

    /// One device's outcome from what it was served and what it reported.
    static func outcome(
        served: RevisionState?, stagedFingerprint: UInt64, reports: [StatusReport]
    ) -> (RolloutDeviceState.Outcome, String) {
        guard let served, served.fingerprint == stagedFingerprint else { return (.waiting, "has not fetched the staged values") }
        let onRevision = reports.filter { $0.revision == served.revision }
        let agent = onRevision.first { $0.source == .agent }
        let app = onRevision.first { $0.source == .app }
        if let agent, agent.state == .pending {
            return (.waiting, "pending on revision \(served.revision): \(agent.message)")
        }
        for report in [agent, app].compactMap({ $0 }) where report.state != .applied {
            let who = report.source == .app ? "app " : ""
            return (
                .failed,
                "\(who)\(report.state.rawValue) on revision \(served.revision)\(report.message.isEmpty ? "" : ": \(report.message)")"
            )
        }
        guard agent != nil else { return (.waiting, "no report on revision \(served.revision) yet") }
        if app == nil, reports.contains(where: { $0.source == .app }) {
            return (.waiting, "its app has not acknowledged revision \(served.revision) yet")
        }
        return (.applied, "applied revision \(served.revision)")
    }

    /// The rollout with each admitted wave's progress and the devices not done.
    func rolloutView(_ rollout: Rollout) async throws -> RolloutView {
        let metadata = try await metadata(app: rollout.app)
        let states = rollout.phase.isActive ? try await deviceStates(of: rollout) : []
        var progress: [RolloutWaveProgress] = []
        if rollout.phase.isActive {
            for wave in 0...rollout.currentWave {
                let inWave = states.filter { $0.wave == wave }
                func count(_ outcome: RolloutDeviceState.Outcome) -> Int64 { Int64(inWave.filter { $0.outcome == outcome }.count) }
                progress.append(
                    RolloutWaveProgress(
                        wave: rollout.waves[wave], devices: Int64(inWave.count), applied: count(.applied), failed: count(.failed),
                        waiting: count(.waiting)))
            }
        }
        let notDone = states.filter { $0.outcome == .failed } + states.filter { $0.outcome == .waiting }
        return RolloutView(
            id: rollout.id, app: rollout.app, scope: rollout.scope.description, patch: metadata.masked(rollout.patch), waves: rollout.waves,
            pauseOnErrorsBasisPoints: rollout.pauseOnErrorsBasisPoints, waveWaitSeconds: rollout.waveWaitSeconds, phase: rollout.phase,
            currentWave: rollout.currentWave, waveStartedAt: rollout.waveStartedAt, startedAt: rollout.startedAt, endedAt: rollout.endedAt,
            reason: rollout.reason, actor: rollout.actor, message: rollout.message, progress: progress, devices: Array(notDone.prefix(50)))
    }
}

extension Rollout {
    /// Ends it: completed or aborted, at `time`, saying why.
    public mutating func end(_ phase: RolloutPhase, at time: Int64, reason: String) {
        self.phase = phase
        self.endedAt = time
        self.reason = reason
        version += 1
    }
}

/// What ``RolloutService/superviseRollouts(onlyWhenDue:)`` remembers between ticks.
struct RolloutLooks: Sendable {
    /// Apps with status reports since their rollout was last looked at.
    var reported: Set<String> = []
    /// When each app's rollout was last looked at, seconds since the epoch.
    var lastLooked: [String: Int64] = [:]
}
