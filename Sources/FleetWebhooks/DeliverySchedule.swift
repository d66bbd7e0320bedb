/// When a message is tried again after a failed attempt: waits that grow (5 s, 30 s, 2 min,
/// 10 min, 30 min, 1 h, 2 h, then every 4 h), each moved by up to 20 % either way so that a
/// receiver that was down is not hit by every waiting message at once, for 24 hours from the
/// first attempt. After that the message is dead: it stays, visible, until an admin redelivers
/// or removes it.
public struct DeliverySchedule: Sendable, Hashable {
    /// The waits after the first, second, … failed attempt, in seconds; the last repeats.
    public var waits: [Int64]
    /// How long after its first attempt a message is still tried.
    public var window: Int64
    /// How far each wait may move, as a share of it.
    public var jitter: Double

    public static let standard = DeliverySchedule(waits: [5, 30, 120, 600, 1800, 3600, 7200, 14_400], window: 24 * 3600, jitter: 0.2)

    public init(waits: [Int64], window: Int64, jitter: Double) {
        precondition(!waits.isEmpty && waits.allSatisfy { $0 > 0 } && window > 0 && (0..<1).contains(jitter))
        self.waits = waits
        self.window = window
        self.jitter = jitter
    }

    /// When to try again after `failedAttempts` (≥ 1) attempts, the first at `firstAttemptAt`,
    /// the last ending at `now`; `nil` when that would be past the window (the message is dead).
    ///
    /// - Parameter fraction: where in the jitter range the wait falls, 0 to 1 (random in use, 0.5
    ///   is the wait itself).
    public func nextAttempt(afterFailedAttempts failedAttempts: Int, firstAttemptAt: Int64, now: Int64, fraction: Double) -> Int64? {
        let base = waits[min(max(failedAttempts, 1), waits.count) - 1]
        let factor = 1 - jitter + 2 * jitter * min(max(fraction, 0), 1)
        let next = now + Int64((Double(base) * factor).rounded())
        return next - firstAttemptAt <= window ? next : nil
    }
}
