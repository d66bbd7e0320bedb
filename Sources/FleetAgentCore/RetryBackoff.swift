/// How long to wait after a failure: exponential backoff with full jitter, honouring the
/// server's `Retry-After`.
///
/// The n-th failure in a row waits a uniformly random time between 0 and
/// `min(cap, base · 2ⁿ⁻¹)` ("full jitter": a fleet that lost its server together does not come
/// back in lockstep). When the server asked for a delay with `Retry-After`, the wait is at least
/// that (up to ``retryAfterCap``). A success resets the count.
public struct RetryBackoff: Sendable, Equatable {
    /// The ceiling of the first failure's wait.
    public var base: Duration
    /// The highest ceiling.
    public var cap: Duration
    /// The longest `Retry-After` honoured: a server asking for more is waited for this long.
    public var retryAfterCap: Duration
    /// Failures since the last success.
    public private(set) var failures = 0

    /// Defaults: 1 s doubling up to 5 minutes; `Retry-After` honoured up to an hour.
    public init(base: Duration = .seconds(1), cap: Duration = .seconds(300), retryAfterCap: Duration = .seconds(3600)) {
        self.base = base
        self.cap = cap
        self.retryAfterCap = retryAfterCap
    }

    /// The ceiling of the next failure's wait (before jitter).
    public var nextCeiling: Duration {
        let doublings = min(failures, 30)
        let ceiling = base * (1 << doublings)
        return min(ceiling, cap)
    }

    /// Counts a failure and returns how long to wait before the next attempt.
    public mutating func delayAfterFailure(
        retryAfter: Duration? = nil, using random: inout some RandomNumberGenerator
    ) -> Duration {
        let ceiling = nextCeiling
        failures += 1
        let jittered = Self.uniform(upTo: ceiling, using: &random)
        guard let retryAfter, retryAfter > .zero else { return jittered }
        return max(jittered, min(retryAfter, retryAfterCap))
    }

    /// Counts a success.
    public mutating func reset() { failures = 0 }

    /// A uniformly random duration in `0...limit`, at millisecond resolution.
    public static func uniform(upTo limit: Duration, using random: inout some RandomNumberGenerator) -> Duration {
        let milliseconds = limit.milliseconds
        guard milliseconds > 0 else { return .zero }
        return .milliseconds(Int64.random(in: 0...milliseconds, using: &random))
    }
}

extension Duration {
    /// The whole milliseconds in this duration (rounded down).
    public var milliseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    /// This duration in seconds, as a `Double` (for messages and environment variables).
    public var secondsValue: Double { Double(milliseconds) / 1000 }

    /// `30 s`, `0.5 s`: for messages.
    public var secondsText: String { milliseconds % 1000 == 0 ? "\(milliseconds / 1000) s" : "\(secondsValue) s" }
}
