/// The time of day, in whole seconds since the Unix epoch: when devices were seen, reports
/// arrived and enrollment tokens expire. Injected, so the service's logic is tested with a
/// clock the test sets.
public protocol WallClock: Sendable {
    /// Seconds since 1970-01-01T00:00:00Z.
    func secondsSinceEpoch() -> Int64
}
