/// Token buckets by key: each key may take `burst` requests at once, refilled at `rate` per
/// second. A pure value: the caller passes the time (any monotonic clock's reading since a fixed
/// origin), so the rules are tested without sleeping.
///
/// Memory is bounded: beyond ``maximumKeys`` keys, the buckets that have refilled completely (they
/// hold nothing the next request would not get anyway) are dropped, then the longest idle.
public struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    /// How fast and how much a key may send.
    public struct Limit: Sendable, Hashable {
        /// Requests per second, sustained.
        public var rate: Double
        /// Requests at once.
        public var burst: Double

        public init(rate: Double, burst: Double) {
            self.rate = rate
            self.burst = burst
        }
    }

    private struct Bucket: Sendable {
        var tokens: Double
        var updated: Duration
    }

    public let limit: Limit
    /// Keys kept at most.
    public let maximumKeys: Int
    private var buckets: [Key: Bucket] = [:]

    public init(_ limit: Limit, maximumKeys: Int = 100_000) {
        self.limit = limit
        self.maximumKeys = maximumKeys
    }

    /// Takes one request of `key`'s budget at `now`: `nil` when it may go, else how long until
    /// it may (nothing is taken then).
    public mutating func take(_ key: Key, now: Duration) -> Duration? {
        // One lookup of the key (it is hashed on every request): the bucket is changed in place.
        let refusal = Self.take(from: &buckets[key, default: Bucket(tokens: limit.burst, updated: now)], limit: limit, now: now)
        if buckets.count > maximumKeys { evict(now: now) }
        return refusal
    }

    private static func take(from bucket: inout Bucket, limit: Limit, now: Duration) -> Duration? {
        bucket = refilled(bucket, limit: limit, now: now)
        guard bucket.tokens >= 1 else { return .seconds((1 - bucket.tokens) / limit.rate) }
        bucket.tokens -= 1
        return nil
    }

    /// Gives back one request `take(_:now:)` took from `key` (up to its burst).
    public mutating func refund(_ key: Key, now: Duration) {
        guard var bucket = buckets[key] else { return }
        bucket = refilled(bucket, now: now)
        bucket.tokens = min(limit.burst, bucket.tokens + 1)
        buckets[key] = bucket
    }

    /// Whether `key` has nothing left at `now`, without taking anything.
    public func isExhausted(_ key: Key, now: Duration) -> Bool {
        guard let bucket = buckets[key] else { return false }
        return refilled(bucket, now: now).tokens < 1
    }

    /// The number of keys held.
    public var keyCount: Int { buckets.count }

    private func refilled(_ bucket: Bucket, now: Duration) -> Bucket {
        Self.refilled(bucket, limit: limit, now: now)
    }

    private static func refilled(_ bucket: Bucket, limit: Limit, now: Duration) -> Bucket {
        let elapsed = now - bucket.updated
        guard elapsed > .zero else { return bucket }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return Bucket(tokens: min(limit.burst, bucket.tokens + seconds * limit.rate), updated: now)
    }

    /// Down to three quarters of ``maximumKeys`` at most, so that the next eviction is a quarter
    /// of the keys away (the cost is paid once per that many new keys, not on every one).
    private mutating func evict(now: Duration) {
        let target = maximumKeys * 3 / 4
        buckets = buckets.filter { refilled($0.value, now: now).tokens < limit.burst }
        if buckets.count > target {
            let keep = buckets.sorted { $0.value.updated > $1.value.updated }.prefix(target)
            buckets = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }
}
