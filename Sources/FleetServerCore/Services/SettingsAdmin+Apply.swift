import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging

extension SettingsAdmin {
    /// The apps `caller` may read, with their metadata's version, sorted by id.
    public func apps(visibleTo caller: Caller? = nil) async throws -> AppList {
        let stored = try await store.allMetadata()
        return AppList(
            apps: stored.filter { caller?.scope.covers(app: $0.app) ?? true }.sorted { $0.app < $1.app }.map {
                AppList.Entry(app: $0.app, version: Int64($0.version))
            })
    }

    /// The values of every scope of `app` that holds any, secrets masked, and the newest
    /// history entry, read first (a write between the two reads makes a plan made from them
    /// stale, never wrongly fresh). A scoped caller gets the app's scope, its groups' and its
    /// devices'.
    ///
    /// - Throws: 404 for an unknown app.
    public func scopes(app: String, visibleTo caller: Caller? = nil) async throws -> AppScopes {
        let metadata = try await metadata(app: app)
        let newest = try await store.history(app: app, page: HistoryPage(limit: 1)).last?.number ?? 0
        let values = try await store.allValues(app: app)
        var devices: [String: Device] = [:]
        if let caller, !caller.scope.isEverything {
            devices = Dictionary(uniqueKeysWithValues: try await store.devices().map { ($0.id, $0) })
        }
        let visible = values.filter { scope, held in
            guard !held.isEmpty, let caller, !caller.scope.isEverything else { return !held.isEmpty && scope != .defaults }
            switch scope {
            case .defaults: return false
            case .app: return true
            case .group(let group): return caller.scope.covers(group: group)
            case .device(let id): return devices[id].map(caller.sees) ?? false
            }
        }
        return AppScopes(
            app: app, newest: newest,
            scopes: visible.keys.sorted { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }.map {
                ScopedValues(app: app, scope: $0.description, values: metadata.masked(visible[$0] ?? [:]))
            })
    }

    /// Sets the whole values of several scopes of `app` as one change (`POST
    /// /v1/admin/apps/{app}/apply`, `fleetset admin apply`): every device and future device any
    /// of them reaches is checked as one write of them all would be, then they are written in
    /// one transaction with one history entry, or not at all. Scopes that come out as stored are
    /// not written; when none changes, nothing is (the answer lists no change).
    ///
    /// With `dryRun` everything is checked and nothing written. With a rollout, the change must
    /// write one scope, the app's or a group's: it is staged as ``RolloutService/startRollout(app:_:actor:)``
    /// stages a merge patch.
    ///
    /// - Throws: 400 for a malformed scope, a scope named twice, a key-path value outside a
    ///   device scope, a place in `keep` that does not fit, or a rollout of more than one scope;
    ///   404 for an unknown app or device; 409 `concurrent-write` when the app's history has an
    ///   entry newer than `base`; 409 `rollout-in-progress` when a rollout of the app stages a
    ///   setting the change writes (or, with a rollout, when one is active); 422
    ///   `invalid-values` with every problem, naming the devices.
    public func apply(app: String, _ request: ApplyRequest, actor: String, dryRun: Bool) async throws -> ApplyResult {
        _ = try await metadata(app: app)
        var wanted: [Scope: ApplyRequest.ScopeValues] = [:]
        for (index, part) in request.scopes.enumerated() {
            guard let scope = Scope(parameter: part.scope) else {
                throw ServiceError.badRequest("/scopes/\(index)/scope: a scope is app, group:NAME or device:ID")
            }
            guard wanted[scope] == nil else { throw ServiceError.badRequest("/scopes/\(index)/scope: \(scope) is named twice") }
            wanted[scope] = part
            _ = try await writableScope(scope)
        }
        if request.rollout != nil, request.scopes.count > 1 {
            throw ServiceError.badRequest(
                "/rollout: a rollout stages one scope, the app's or a group's; this change names \(request.scopes.count): apply it without --rollout, or one scope at a time"
            )
        }
        let targets = wanted
        let read: @Sendable () async throws -> ApplyState = {
            var audiences = try await self.audiences(of: .app, app: app)
            for case .group(let name) in targets.keys { audiences.append(.future(groups: [name])) }
            return ApplyState(
                values: ValuesWriteState(
                    metadata: try await self.metadata(app: app), values: try await self.store.allValues(app: app), audiences: audiences),
                rollout: try await self.store.activeRollout(app: app),
                newest: try await self.store.history(app: app, page: HistoryPage(limit: 1)).last?.number ?? 0)
        }
        let check: @Sendable (ApplyState) throws -> [Scope: JSONObject]? = { state in
            try Self.checkApply(app: app, request, targets: targets, state: state)
        }
        let summary: @Sendable (ApplyState, [Scope: JSONObject]) -> [ApplyResult.ScopeChange] = { state, changed in
            changed.keys.sorted { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }.map { scope in
                ApplyResult.ScopeChange(
                    scope: scope.description, keys: SettingsValues.changedKeys(state.values.values[scope] ?? [:], changed[scope] ?? [:]))
            }
        }
        if dryRun {
            let state = try await read()
            let changed = try check(state) ?? [:]
            return ApplyResult(app: app, dryRun: true, changed: summary(state, changed))
        }
        if let staging = request.rollout {
            // Checked here (what changes, against what base); the rollout checks the patch again.
            let state = try await read()
            guard let changed = try check(state), let (scope, after) = changed.first else {
                return ApplyResult(app: app, dryRun: false, changed: [])
            }
            guard scope == .app || { if case .group = scope { true } else { false } }() else {
                throw ServiceError.badRequest(
                    "/rollout: a rollout stages a change of app or group values; a device scope reaches one device")
            }
            let stored = state.values.values[scope] ?? [:]
            var patch = JSONObject()
            for key in SettingsValues.changedKeys(stored, after) {
                patch[key] = after[key].map { JSONValue.wholeValueMergePatch(from: stored[key], to: $0) } ?? .null
            }
            let view = try await RolloutService(context: context).startRollout(
                app: app,
                RolloutRequest(
                    scope: scope.description, patch: patch, waves: staging.waves,
                    pauseOnErrorsBasisPoints: staging.pauseOnErrorsBasisPoints,
                    waveWaitSeconds: staging.waveWaitSeconds, message: request.message),
                actor: actor)
            return ApplyResult(app: app, dryRun: false, changed: summary(state, changed), rollout: view.id)
        }
        let written = try await writes.checkedWriteUnlessUnchanged(
            read: read, check: check,
            commit: { state, changed -> ApplyResult in
                let metadata = state.values.metadata
                let scopes = changed.keys.sorted { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }.map { scope in
                    ChangeRecord.ScopeChange(
                        scope: scope, patch: SettingsValues.patch(from: state.values.values[scope] ?? [:], to: changed[scope] ?? [:]),
                        after: changed[scope] ?? [:], masking: metadata)
                }
                let change = ChangeRecord(
                    at: self.wallClock.secondsSinceEpoch(), actor: actor, message: request.message, kind: .values, scopes: scopes)
                let number = try await self.store.commit(AppWrite(app: app, values: changed, change: change))
                for scope in changed.keys { await self.notifyChanged(app, scope: scope) }
                self.logger.notice(
                    "values applied",
                    metadata: [
                        "event": "apply", "app": "\(app)", "entry": "\(number)", "actor": "\(actor)",
                        "scopes": "\(scopes.map(\.scope.description).joined(separator: ","))",
                    ])
                return ApplyResult(app: app, dryRun: false, changed: summary(state, changed), entry: number)
            })
        return written ?? ApplyResult(app: app, dryRun: false, changed: [])
    }

    /// What an apply is checked against: the values and their audiences, the active rollout,
    /// and the app's newest history entry.
    struct ApplyState: Equatable, Sendable {
        let values: ValuesWriteState
        let rollout: Rollout?
        let newest: Int64
    }

    /// The new values of each scope `request` changes (`nil`: none changes), checked.
    static func checkApply(
        app: String, _ request: ApplyRequest, targets: [Scope: ApplyRequest.ScopeValues], state: ApplyState
    ) throws -> [Scope: JSONObject]? {
        if let base = request.base, state.newest != base {
            throw ServiceError(
                409, .concurrentWrite,
                "\(app) changed since the plan: its newest history entry is \(state.newest), the plan saw \(base); plan again")
        }
        var changed: [Scope: JSONObject] = [:]
        for (scope, part) in targets {
            let stored = state.values.values[scope] ?? [:]
            let values = try keeping(part, stored: stored)
            if case .device = scope {} else { try refuseKeyPaths(in: values, at: scope) }
            if values != stored { changed[scope] = values }
        }
        guard !changed.isEmpty else { return nil }
        let before = state.values.values
        let after = before.merging(changed) { $1 }
        var findings = ValueAudit.newFindings(
            metadata: state.values.metadata, before: before, after: after, audiences: state.values.audiences)
        if let rollout = state.rollout {
            if request.rollout != nil { throw ServiceError.rolloutInProgress(rollout, doing: nil) }
            let keys = Set(changed.flatMap { scope, values in SettingsValues.changedKeys(before[scope] ?? [:], values) })
            let overlap = rollout.keys.intersection(keys).sorted()
            if !overlap.isEmpty { throw ServiceError.rolloutInProgress(rollout, doing: nil, keys: overlap) }
            // The devices already admitted get the rollout's patch over these values.
            findings += ValueAudit.newFindings(
                metadata: state.values.metadata, before: rollout.staged(before), after: rollout.staged(after),
                audiences: state.values.audiences)
        }
        guard findings.isEmpty else {
            throw ServiceError(422, .invalidValues, "the change makes settings invalid", details: findings.map(\.detail))
        }
        return changed
    }

    /// A scope's values as asked, with the stored value put back at each place of `keep` (left
    /// out where the scope stores nothing).
    static func keeping(_ part: ApplyRequest.ScopeValues, stored: JSONObject) throws(ServiceError) -> JSONObject {
        var values = JSONValue.object(part.values)
        for place in part.keep {
            guard let pointer = JSONPointer(place), !pointer.isRoot else {
                throw ServiceError.badRequest("/keep: \(place) is not a place inside the values")
            }
            do {
                values = try values.setting(JSONValue.object(stored)[pointer: pointer], at: pointer)
            } catch {
                throw ServiceError.badRequest("keep \(place) at \(part.scope): \(error.message)")
            }
        }
        return values.objectValue ?? [:]
    }
}
