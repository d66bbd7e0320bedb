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

/// What starting a rollout is checked against.
struct RolloutWriteState: Equatable, Sendable {
    let values: ValuesWriteState
    let rollout: Rollout?
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
