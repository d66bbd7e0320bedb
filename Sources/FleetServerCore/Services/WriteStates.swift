import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes

/// What a write of values is checked against.
struct ValuesWriteState: Equatable, Sendable {
    let metadata: Metadata
    let values: [Scope: JSONObject]
    let audiences: [ValueAudit.Audience]

    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.metadata.version == rhs.metadata.version && lhs.values == rhs.values && lhs.audiences == rhs.audiences
    }
}

/// What a write of values at a scope, or starting a rollout there, is checked against: the
/// values, whom the scope reaches, and the app's active rollout.
struct RolloutWriteState: Equatable, Sendable {
    let values: ValuesWriteState
    let rollout: Rollout?
}

extension FleetService {
    /// The state a write at `scope` of `app` is checked against, read from the store.
    func rolloutWriteState(app: String, scope: Scope) async throws -> RolloutWriteState {
        RolloutWriteState(
            values: ValuesWriteState(
                metadata: try await metadata(app: app), values: try await store.allValues(app: app),
                audiences: try await audiences(of: scope, app: app)),
            rollout: try await store.activeRollout(app: app))
    }
}

extension ServiceError {
    /// 409 `rollout-in-progress`: what the admin tried cannot be done while `rollout` runs;
    /// `what` can be done anyway with `--force` (`nil`: not at all, as a second rollout).
    static func rolloutInProgress(_ rollout: Rollout, doing what: String?, keys: [String] = []) -> ServiceError {
        let which = keys.isEmpty ? "" : " of \(keys.joined(separator: ", "))"
        let abort = "fleetset admin rollout abort \(rollout.app)"
        let ways =
            what.map { "wait for it to complete, abort it (\(abort)), or \($0) with --force" }
            ?? "one rollout per app at a time: wait for it to complete, or abort it first (\(abort))"
        return ServiceError(
            409, .rolloutInProgress,
            "rollout \(rollout.id) of \(rollout.app)\(which) is \(rollout.phase.rawValue) (wave \(rollout.currentWave + 1) of \(rollout.waves.count)); \(ways)"
        )
    }
}
