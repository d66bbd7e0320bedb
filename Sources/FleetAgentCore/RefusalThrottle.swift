/// How many of one local user's refused inbox requests the agent handles one by one: any user of
/// the device may leave files in an inbox (mode 1733), so one who floods it must not turn each
/// file into a warning line, a rename and a `.reason` file. Per uid, ``burst`` refusals at once
/// and one more every ``refill``; beyond that a refused file is removed quietly and counted,
/// and ``takeSummary()`` gives the counts for one summary line per uid. Pure: time is the
/// caller's monotonic instant.
public struct RefusalThrottle<Instant: InstantProtocol>: Sendable where Instant.Duration == Duration, Instant: Sendable {
    /// Refusals handled in full at once, per uid.
    public let burst: Int
    /// One more refusal handled in full per this much time.
    public let refill: Duration
    private var buckets: [UInt32: (tokens: Double, at: Instant)] = [:]
    private var quiet: [UInt32: Int] = [:]

    public init(burst: Int = 20, refill: Duration = .seconds(6)) {
        self.burst = burst
        self.refill = refill
    }

    /// What to do with one refused file.
    public enum Decision: Sendable, Hashable {
        /// Log it and move it aside with its reason.
        case handle
        /// Remove it and count it; the first such since the last summary (say once that the
        /// user's refusals go quiet).
        case quietFromNow
        /// Remove it and count it.
        case quiet
    }

    /// What to do with a refusal of a file owned by `uid` at `now`.
    public mutating func admit(_ uid: UInt32, at now: Instant) -> Decision {
        var bucket = buckets[uid] ?? (Double(burst), now)
        let elapsed = bucket.at.duration(to: now)
        bucket.tokens = min(Double(burst), bucket.tokens + Double(elapsed / refill))
        bucket.at = now
        defer { buckets[uid] = bucket }
        guard bucket.tokens >= 1 else {
            quiet[uid, default: 0] += 1
            return quiet[uid] == 1 ? .quietFromNow : .quiet
        }
        bucket.tokens -= 1
        return .handle
    }

    /// The refusals counted quietly since the last summary, per uid in ascending order; clears
    /// them, and forgets the uids whose allowance is whole again at `now`.
    public mutating func takeSummary(at now: Instant) -> [(uid: UInt32, count: Int)] {
        defer { quiet = [:] }
        buckets = buckets.filter { _, bucket in bucket.tokens + Double(bucket.at.duration(to: now) / refill) < Double(burst) }
        return quiet.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    }
}
