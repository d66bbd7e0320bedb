import FleetProtocol

/// The rule that moves a rollout on, as a pure function of the rollout, what its admitted
/// devices reported, and the time.
///
/// - The admitted devices are those of waves up to ``Rollout/currentWave``.
/// - When `failed` (reports of `error` or `unsupported` for the staged values) exceeds
///   ``Rollout/pauseOnErrorsBasisPoints`` of the admitted devices, the rollout pauses, naming
///   the devices and what they reported.
/// - When every admitted device has reported (and the failures are within the threshold), the
///   next wave is admitted, or after the last the rollout completes.
/// - When the current wave's ``Rollout/waveWaitSeconds`` have passed with devices still
///   waiting, the rollout pauses, naming them.
/// - Otherwise it waits, until the wave's time is up at the latest.
///
/// A wave no device is in is admitted and passed at once. Devices an admin accepted by
/// resuming (``Rollout/accepted``) are not counted.
public enum RolloutGate {
    /// What to do with the rollout.
    public enum Step: Sendable, Hashable {
        /// Nothing now; look again by `until` (seconds since the epoch) at the latest.
        case wait(until: Int64)
        /// Admit wave `wave`.
        case advance(to: Int)
        /// Every wave passed: write the patch into the stored values.
        case complete
        /// Stop admitting waves, saying why.
        case pause(reason: String)
        /// Not running: nothing to decide.
        case none
    }

    /// How many devices a message names before "and N more".
    public static let namedDevices = 5

    /// The next step for `rollout` given its admitted devices' states at `now`.
    ///
    /// - Parameter devices: every device the rollout reaches whose wave is admitted (other
    ///   devices are ignored).
    public static func step(_ rollout: Rollout, devices: [RolloutDeviceState], now: Int64) -> Step {
        guard rollout.phase == .running else { return .none }
        let admitted = devices.filter { $0.wave <= rollout.currentWave && !rollout.accepted.contains($0.device) }
        let failed = admitted.filter { $0.outcome == .failed }
        // failed / admitted > threshold, in integers: failed × 10,000 > threshold × admitted.
        if !failed.isEmpty, failed.count * 10_000 > rollout.pauseOnErrorsBasisPoints * admitted.count {
            let share = RolloutWave.percentText(basisPoints: (failed.count * 10_000 + admitted.count / 2) / admitted.count)
            let limit = RolloutWave.percentText(basisPoints: rollout.pauseOnErrorsBasisPoints)
            return .pause(
                reason:
                    "\(failed.count) of \(admitted.count) admitted device(s) (\(share)) reported error or unsupported, more than the \(limit) allowed: "
                    + named(failed.map { "\($0.device) (\($0.detail))" }))
        }
        let waiting = admitted.filter { $0.outcome == .waiting }
        if waiting.isEmpty {
            return rollout.currentWave + 1 < rollout.waves.count ? .advance(to: rollout.currentWave + 1) : .complete
        }
        let deadline = rollout.waveStartedAt + rollout.waveWaitSeconds
        guard now >= deadline else { return .wait(until: deadline) }
        return .pause(
            reason:
                "\(waiting.count) of \(admitted.count) admitted device(s) did not report within \(RolloutRequest.durationText(seconds: rollout.waveWaitSeconds)) of wave \(rollout.currentWave + 1) (\(rollout.waves[rollout.currentWave])): "
                + named(waiting.map { "\($0.device) (\($0.detail))" }))
    }

    /// The first ``namedDevices`` of `items`, then how many more.
    static func named(_ items: [String]) -> String {
        let shown = items.prefix(namedDevices).joined(separator: ", ")
        return items.count > namedDevices ? shown + " and \(items.count - namedDevices) more" : shown
    }
}
