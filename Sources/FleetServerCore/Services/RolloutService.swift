import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension RolloutService {
    // MARK: - Starting, resuming, aborting

    /// Stages a merge patch of app or group values in waves (see ``Rollout``): checked as a
    /// write of the same patch would be, for every device it will reach, then stored with its
    /// first wave admitted.
    ///
    /// - Throws: 400 for a malformed request or a device scope; 404 for an unknown app or
    ///   group-less device; 409 `rollout-in-progress` when the app has an active rollout;
    ///   422 `invalid-values` with each problem the change would cause.
    public func startRollout(app: String, _ request: RolloutRequest, actor: String) async throws -> RolloutView {
        _ = try await metadata(app: app)
        let scope = try await writableScope(Scope.named(request.scope))
        guard scope == .app || { if case .group = scope { true } else { false } }() else {
            throw ServiceError.badRequest("/scope: a rollout stages a change of app or group values; a device scope reaches one device")
        }
        let queryMembers = try await queryWaveMembers(app: app, waves: request.waves)
        let rollout = try await writes.checkedWrite(
            read: { try await self.rolloutWriteState(app: app, scope: scope) },
            check: { state in
                if let running = state.rollout { throw ServiceError.rolloutInProgress(running, doing: nil) }
                var after = state.values.values
                after[scope] = try SettingsAdmin.scopeValues(applying: request.patch, at: scope, state.values)  // no key paths here
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
                    waveStartedAt: now, startedAt: now, actor: actor, message: request.message, queryMembers: queryMembers)
                let summary =
                    "rollout \(rollout.id) started at \(scope): \(request.patch.keys.sorted().joined(separator: ", ")) in waves \(request.waves.map(\.description).joined(separator: ", "))"
                try await self.commitRollout(rollout, summary: summary, actor: actor, note: request.message, at: now)
                return rollout
            })
        return try await rolloutView(rollout)
    }

    /// The devices of `app` each `where:` wave of `waves` takes: those whose facts meet its
    /// query now (none read when there is no such wave).
    private func queryWaveMembers(app: String, waves: [RolloutWave]) async throws -> [Int: Set<String>] {
        guard waves.contains(where: { if case .query = $0 { true } else { false } }) else { return [:] }
        async let devices = store.devices()
        async let facts = store.allDeviceInfo()
        let (all, info) = try await (devices, facts)
        return Rollout.queryMembers(waves: waves, devices: all.filter { $0.has(app: app) }, facts: info.mapValues(\.info))
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
    func moveOn(_ rollout: inout Rollout, at now: Int64, actor: String, note: String) async throws -> Rollout {
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
    func complete(_ rollout: inout Rollout, at now: Int64, actor: String, note: String) async throws -> Rollout {
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
    func commitRollout(_ rollout: Rollout, summary: String, actor: String, note: String, at now: Int64) async throws {
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
}
