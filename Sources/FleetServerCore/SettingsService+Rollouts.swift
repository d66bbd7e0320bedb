import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension SettingsService {
    // MARK: - Starting, resuming, aborting

    /// Stages a merge patch of app or group values in waves (see ``Rollout``): checked as a
    /// write of the same patch would be, for every device it will reach, then stored with its
    /// first wave admitted.
    ///
    /// - Throws: 400 for a malformed request or a device scope; 404 for an unknown app or
    ///   group-less device; 409 `rollout-in-progress` when the app has an active rollout;
    ///   422 `invalid-values` with each problem the change would cause.
    public func startRollout(app: String, _ body: JSONValue, actor: String) async throws -> RolloutView {
        let request = try Self.read(body, as: RolloutRequest.init(json:))
        _ = try await metadata(app: app)
        let scope = try await writableScope(request.scope)
        guard scope == .app || { if case .group = scope { true } else { false } }() else {
            throw ServiceError.badRequest("/scope: a rollout stages a change of app or group values; a device scope reaches one device")
        }
        let rollout = try await writes.checkedWrite(
            read: { () async throws -> RolloutWriteState in
                RolloutWriteState(
                    values: ValuesWriteState(
                        metadata: try await self.metadata(app: app), values: try await self.store.allValues(app: app),
                        audiences: try await self.audiences(of: scope, app: app)),
                    rollout: try await self.store.activeRollout(app: app))
            },
            check: { state in
                if let running = state.rollout { throw Self.rolloutInProgress(running, doing: nil) }
                var after = state.values.values
                after[scope] = try Self.scopeValues(applying: request.patch, at: scope, state.values)  // no key paths here
                let findings = ValueAudit.newFindings(
                    metadata: state.values.metadata, before: state.values.values, after: after, audiences: state.values.audiences)
                guard findings.isEmpty else {
                    throw ServiceError(422, .invalidValues, "the change makes settings invalid", details: findings.map(\.detail))
                }
            },
            commit: { state, _ in
                let now = self.wallClock.secondsSinceEpoch()
                let rollout = Rollout(
                    id: Credentials.identifier(prefix: "r-"), app: app, scope: scope, patch: request.patch, waves: request.waves,
                    pauseOnErrorsBasisPoints: request.pauseOnErrorsBasisPoints, waveWaitSeconds: request.waveWaitSeconds,
                    waveStartedAt: now, startedAt: now, actor: actor, message: request.message)
                let summary =
                    "rollout \(rollout.id) started at \(scope): \(request.patch.keys.sorted().joined(separator: ", ")) in waves \(request.waves.map(\.description).joined(separator: ", "))"
                try await self.commitRollout(rollout, summary: summary, actor: actor, note: request.message, at: now)
                return rollout
            })
        return try await rolloutView(rollout)
    }

    /// What starting a rollout is checked against.
    struct RolloutWriteState: Equatable, Sendable {
        let values: ValuesWriteState
        let rollout: Rollout?
    }

    /// The app's active rollout, or its latest, with each admitted wave's progress.
    ///
    /// - Throws: 404 `no-rollout` when the app never had one.
    public func rolloutStatus(app: String) async throws -> RolloutView {
        _ = try await metadata(app: app)
        guard let rollout = try await store.rollouts(app: app).first else {
            throw ServiceError(404, .noRollout, "\(app) has had no rollout; start one with fleetset admin set --rollout")
        }
        return try await rolloutView(rollout)
    }

    /// Resumes a paused rollout: the admin accepts the current wave as it is (its failed and
    /// silent devices are not counted again), and the next wave is admitted (after the last,
    /// the rollout completes).
    ///
    /// - Throws: 404 `no-rollout`; 409 `rollout-not-paused`.
    public func resumeRollout(app: String, actor: String) async throws -> RolloutView {
        try await changeActiveRollout(app: app) { rollout, now in
            guard rollout.phase == .paused else {
                throw ServiceError(409, .rolloutNotPaused, "rollout \(rollout.id) of \(app) is running, not paused; nothing to resume")
            }
            rollout.phase = .running
            rollout.reason = ""
            // What stopped it is accepted: its failed and silent devices are not counted again.
            for state in try await self.deviceStates(of: rollout) where state.outcome != .applied { rollout.accepted.insert(state.device) }
            return try await self.moveOn(&rollout, at: now, actor: actor, note: "resumed by \(actor)")
        }
    }

    /// Aborts the active rollout: every device is back on the stored values (those admitted get
    /// a new revision with them).
    ///
    /// - Throws: 404 `no-rollout` when none is active.
    public func abortRollout(app: String, actor: String) async throws -> RolloutView {
        try await changeActiveRollout(app: app) { rollout, now in
            rollout.end(.aborted, at: now, reason: "aborted by \(actor)")
            try await self.commitRollout(rollout, summary: "rollout \(rollout.id) aborted", actor: actor, note: "", at: now)
            return rollout
        }
    }

    /// Runs `change` on the app's active rollout inside the write section.
    private func changeActiveRollout(
        app: String, _ change: @escaping @Sendable (inout Rollout, Int64) async throws -> Rollout
    ) async throws -> RolloutView {
        _ = try await metadata(app: app)
        let changed = try await writes.run { () async throws -> Rollout in
            guard var rollout = try await self.store.activeRollout(app: app) else {
                throw ServiceError(404, .noRollout, "\(app) has no active rollout")
            }
            return try await change(&rollout, self.wallClock.secondsSinceEpoch())
        }
        return try await rolloutView(changed)
    }

    /// Admits the next wave of `rollout`, or completes it after the last. Inside the write section.
    private func moveOn(_ rollout: inout Rollout, at now: Int64, actor: String, note: String) async throws -> Rollout {
        if rollout.currentWave + 1 < rollout.waves.count {
            rollout.currentWave += 1
            rollout.waveStartedAt = now
            rollout.version += 1
            let summary =
                "rollout \(rollout.id): wave \(rollout.currentWave + 1) of \(rollout.waves.count) (\(rollout.waves[rollout.currentWave])) admitted"
            try await commitRollout(rollout, summary: summary, actor: actor, note: note, at: now)
            return rollout
        }
        return try await complete(&rollout, at: now, actor: actor, note: note)
    }

    /// Writes the patch into the stored values and ends the rollout; pauses it instead when the
    /// values changed meanwhile so that the patch no longer fits (the findings say how).
    private func complete(_ rollout: inout Rollout, at now: Int64, actor: String, note: String) async throws -> Rollout {
        let app = rollout.app
        let metadata = try await metadata(app: app)
        let values = try await store.allValues(app: app)
        let after = rollout.staged(values)
        let findings = ValueAudit.newFindings(
            metadata: metadata, before: values, after: after, audiences: try await audiences(of: rollout.scope, app: app))
        guard findings.isEmpty else {
            rollout.phase = .paused
            rollout.reason =
                "the staged values no longer fit the stored ones: "
                + findings.prefix(3).map { "\($0.pointer.displayText): \($0.message)" }.joined(separator: "; ")
            rollout.version += 1
            try await commitRollout(rollout, summary: "rollout \(rollout.id) paused: \(rollout.reason)", actor: "server", note: "", at: now)
            return rollout
        }
        let scopeValues = after[rollout.scope] ?? [:]
        rollout.end(.completed, at: now, reason: "")
        let change = ChangeRecord(
            at: now, actor: actor, message: Self.message("rollout \(rollout.id) completed", note: note), kind: .rollout,
            scopes: [
                ChangeRecord.ScopeChange(
                    scope: rollout.scope, patch: SettingsValues.patch(from: values[rollout.scope] ?? [:], to: scopeValues),
                    after: scopeValues, masking: metadata)
            ])
        do {
            _ = try await store.commit(AppWrite(app: app, values: [rollout.scope: scopeValues], rollout: rollout, change: change))
        } catch is RolloutConflict {
            throw Self.rolloutChangedMeanwhile(app)
        }
        await notifyChanged(app, scope: .app)
        logRollout(rollout, "rollout completed")
        return rollout
    }

    /// Stores the rollout as it is now, with a history entry, and wakes the app's long-polls (the
    /// devices whose values it changed are answered; the others wait on, unanswered).
    private func commitRollout(_ rollout: Rollout, summary: String, actor: String, note: String, at now: Int64) async throws {
        let change = ChangeRecord(at: now, actor: actor, message: Self.message(summary, note: note), kind: .rollout)
        do {
            _ = try await store.commit(AppWrite(app: rollout.app, rollout: rollout, change: change))
        } catch is RolloutConflict {
            throw Self.rolloutChangedMeanwhile(rollout.app)
        }
        await notifyChanged(rollout.app, scope: .app)
        logRollout(rollout, summary)
    }

    /// 409 `concurrent-write`: another writer changed the rollout between the read and the write.
    private static func rolloutChangedMeanwhile(_ app: String) -> ServiceError {
        ServiceError(409, .concurrentWrite, "the rollout of \(app) was changed meanwhile; look at it again and retry")
    }

    private static func message(_ summary: String, note: String) -> String {
        note.isEmpty ? summary : "\(summary) — \(note)"
    }

    private func logRollout(_ rollout: Rollout, _ summary: String) {
        logger.log(
            level: rollout.phase == .paused || rollout.phase == .aborted ? .warning : .notice, "\(summary)",
            metadata: [
                "event": "rollout", "app": "\(rollout.app)", "rollout": "\(rollout.id)", "phase": "\(rollout.phase.rawValue)",
                "wave": "\(rollout.currentWave + 1)/\(rollout.waves.count)", "reason": "\(rollout.reason)",
            ])
    }

    // MARK: - Supervising

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

/// What ``SettingsService/superviseRollouts(onlyWhenDue:)`` remembers between ticks.
struct RolloutLooks: Sendable {
    /// Apps with status reports since their rollout was last looked at.
    var reported: Set<String> = []
    /// When each app's rollout was last looked at, seconds since the epoch.
    var lastLooked: [String: Int64] = [:]
}
