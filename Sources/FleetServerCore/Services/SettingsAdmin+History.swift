import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension SettingsAdmin {
    /// The app's history, oldest first, secrets masked; with `scope`, only the writes of that
    /// scope; with `before`, only the entries numbered below it (the next page back); with
    /// `limit`, only the newest that many. The store reads just that page.
    ///
    /// - Throws: 400 for a bad limit or `before`, 404 for an unknown app.
    public func history(app: String, scope: Scope?, before: Int64? = nil, limit: Int?, visibleTo caller: Caller? = nil) async throws
        -> HistoryList
    {
        let metadata = try await metadata(app: app)
        if let limit, limit < 1 { throw ServiceError.badParameter("limit must be a positive number of entries") }
        if let before, before < 1 { throw ServiceError.badParameter("before must be a history entry's number, 1 or more") }
        var entries = try await store.history(app: app, page: HistoryPage(scope: scope, before: before, limit: limit))
        if let scope {
            for index in entries.indices { entries[index].change.scopes.removeAll { $0.scope != scope } }
        }
        if let caller, !caller.scope.isEverything {
            // A scoped caller sees what was written at the app's scope, its groups' and its devices'.
            let devices = Dictionary(uniqueKeysWithValues: try await store.devices().map { ($0.id, $0) })
            entries = entries.compactMap { entry in
                var entry = entry
                let wrote = !entry.change.scopes.isEmpty
                entry.change.scopes.removeAll { change in
                    switch change.scope {
                    case .defaults, .app: false
                    case .group(let group): !caller.scope.covers(group: group)
                    case .device(let id): !(devices[id].map(caller.sees) ?? false)
                    }
                }
                // An entry that wrote only where the caller does not see is left out whole.
                return wrote && entry.change.scopes.isEmpty ? nil : entry
            }
        }
        return HistoryList(app: app, entries: entries.map { Self.record($0, masking: metadata) })
    }

    /// Removes from every app's history what `retention` does not keep (see
    /// ``HistoryRetention``); logs each app that lost entries. Returns how many went in all.
    @discardableResult
    public func pruneHistory(keeping retention: HistoryRetention) async throws -> Int {
        var total = 0
        for app in try await store.allMetadata().map(\.app) {
            var removed = 0
            var pass = HistoryPruning(removed: 0, finished: false)
            while !pass.finished && !Task.isCancelled {
                pass = try await store.pruneHistory(app: app, keeping: retention, now: wallClock.secondsSinceEpoch())
                removed += pass.removed
            }
            guard removed > 0 else { continue }
            total += removed
            logger.notice("history pruned", metadata: ["event": "history-pruned", "app": "\(app)", "removed": "\(removed)"])
        }
        return total
    }

    static func record(_ entry: HistoryEntry, masking metadata: Metadata) -> HistoryRecord {
        HistoryRecord(
            number: entry.number, at: entry.change.at, actor: entry.change.actor, message: entry.change.message,
            kind: entry.change.kind.rawValue,
            scopes: entry.change.scopes.map {
                let shown = $0.masked(by: metadata)
                return HistoryRecord.ScopeChange(scope: $0.scope.description, patch: shown.patch, values: shown.after)
            },
            metadataVersion: entry.change.metadataVersion.map(Int64.init))
    }

    /// Makes the values of every scope (or of one) what they were after history entry `to`, as
    /// a new entry: history is never rewritten. Scopes of devices deleted since are left alone.
    /// The values are checked against the current metadata as any write is; a metadata version
    /// stored since is not undone (its defaults apply).
    ///
    /// - Throws: 400 for a malformed request or an entry the app's history does not have;
    ///   404 for an unknown app; 409 `rollout-in-progress` while a rollout of the app runs
    ///   (unless forced: the rollout is then aborted); 409 `nothing-to-revert`; 422 when the old
    ///   values are not valid now.
    public func revert(app: String, _ request: RevertRequest, actor: String) async throws -> HistoryRecord {
        _ = try await metadata(app: app)
        var only: Scope?
        if let parameter = request.scope { only = try await writableScope(Scope.named(parameter)) }
        let scopeOnly = only
        let entry = try await writes.checkedWrite(
            read: { () async throws -> RevertState in
                RevertState(
                    values: ValuesWriteState(
                        metadata: try await self.metadata(app: app), values: try await self.store.allValues(app: app),
                        audiences: try await self.audiences(of: scopeOnly ?? .app, app: app)),
                    history: try await self.store.historyBase(app: app, through: request.to),
                    rollout: try await self.store.activeRollout(app: app), devices: Set(try await self.store.devices().map(\.id)))
            },
            check: { state -> [Scope: JSONObject] in
                let history = state.history
                guard request.to >= 1, request.to <= history.newest else {
                    throw ServiceError.badRequest(
                        "/to: \(app) has no history entry \(request.to); its history runs from \(history.floor) to \(history.newest)")
                }
                // From the floor on the values can be rebuilt (each scope's base is kept), even
                // where the floor's own entry went.
                guard request.to >= history.floor else {
                    throw ServiceError.badRequest(
                        "/to: entry \(request.to) of \(app) is older than the history the server keeps (--history-keep); a revert can go back to entry \(history.floor) at the earliest"
                    )
                }
                if let rollout = state.rollout, !request.force {
                    throw ServiceError.rolloutInProgress(rollout, doing: "revert")
                }
                var target = history.values
                let scopes = Set(target.keys).union(state.values.values.keys).filter { scope in
                    if let scopeOnly { return scope == scopeOnly }
                    if case .device(let id) = scope { return state.devices.contains(id) }
                    return scope != .defaults
                }
                var changed: [Scope: JSONObject] = [:]
                for scope in scopes where (target[scope] ?? [:]) != (state.values.values[scope] ?? [:]) {
                    changed[scope] = target[scope] ?? [:]
                }
                // A forced revert during a rollout ends it even when the stored values are as asked.
                guard !changed.isEmpty || state.rollout != nil else {
                    throw ServiceError(
                        409, .nothingToRevert,
                        "the values\(scopeOnly.map { " at \($0)" } ?? "") are already as they were after entry \(request.to)")
                }
                target = state.values.values.merging(changed) { $1 }
                let findings = ValueAudit.newFindings(
                    metadata: state.values.metadata, before: state.values.values, after: target, audiences: state.values.audiences)
                guard findings.isEmpty else {
                    throw ServiceError(
                        422, .invalidValues, "the values of entry \(request.to) are not valid under the current metadata",
                        details: findings.map(\.detail))
                }
                return changed
            },
            commit: { state, changed in
                let now = self.wallClock.secondsSinceEpoch()
                let scopes = changed.keys.sorted { $0.description.utf8.lexicographicallyPrecedes($1.description.utf8) }.map { scope in
                    ChangeRecord.ScopeChange(
                        scope: scope, patch: SettingsValues.patch(from: state.values.values[scope] ?? [:], to: changed[scope] ?? [:]),
                        after: changed[scope] ?? [:], masking: state.values.metadata)
                }
                var aborted = state.rollout
                aborted?.end(.aborted, at: now, reason: "aborted by a forced revert to entry \(request.to)")
                let message = request.message.isEmpty ? "revert to entry \(request.to)" : request.message
                let change = ChangeRecord(at: now, actor: actor, message: message, kind: .revert, scopes: scopes)
                let number = try await self.store.commit(AppWrite(app: app, values: changed, rollout: aborted, change: change))
                for scope in changed.keys { await self.notifyChanged(app, scope: scope) }
                if aborted != nil { await self.notifyChanged(app, scope: .app) }
                self.logger.notice(
                    "values reverted",
                    metadata: [
                        "event": "revert", "app": "\(app)", "to": "\(request.to)", "entry": "\(number)", "actor": "\(actor)",
                        "scopes": "\(scopes.map(\.scope.description).joined(separator: ","))",
                    ])
                return HistoryEntry(app: app, number: number, change: change)
            })
        return Self.record(entry, masking: try await metadata(app: app))
    }

    /// What a revert is checked against.
    struct RevertState: Equatable, Sendable {
        let values: ValuesWriteState
        let history: HistoryBase
        let rollout: Rollout?
        let devices: Set<String>
    }
}
