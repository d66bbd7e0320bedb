import FleetServerCore
import Synchronization

/// How many requests the server takes from whom, answered 429 `rate-limited` with `Retry-After`
/// beyond that (see ``RateLimiter``):
///
/// - every client address: ``Configuration/perAddress`` (generous: a site's devices may share one
///   address behind NAT);
/// - failed authentication and enrollment per address: ``Configuration/failures`` (a guessing
///   client is slowed to a crawl; its address is refused until the bucket refills);
/// - every authenticated device: ``Configuration/perDevice`` (an agent needs a long-poll a minute
///   and a few reports; one that loops is stopped).
///
/// The admin token is limited only by its address.
public final class RequestLimits: Sendable {
    /// The limits.
    public struct Configuration: Sendable, Hashable {
        public var perAddress: RateLimiter<String>.Limit
        public var failures: RateLimiter<String>.Limit
        public var perDevice: RateLimiter<String>.Limit

        public init(
            perAddress: RateLimiter<String>.Limit = .init(rate: 200, burst: 400),
            failures: RateLimiter<String>.Limit = .init(rate: 1, burst: 20),
            perDevice: RateLimiter<String>.Limit = .init(rate: 10, burst: 50)
        ) {
            self.perAddress = perAddress
            self.failures = failures
            self.perDevice = perDevice
        }
    }

    private struct Buckets: Sendable {
        var addresses: RateLimiter<String>
        var failures: RateLimiter<String>
        var devices: RateLimiter<String>
    }

    private let buckets: Mutex<Buckets>
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant

    public init(_ configuration: Configuration = Configuration()) {
        buckets = Mutex(
            Buckets(
                addresses: RateLimiter(configuration.perAddress), failures: RateLimiter(configuration.failures),
                devices: RateLimiter(configuration.perDevice)))
        origin = clock.now
    }

    private var now: Duration { origin.duration(to: clock.now) }

    /// Admits one request from `address`, unless the address is over its limit or has failed to
    /// authenticate too often.
    func admit(address: String) throws(ServiceError) {
        let now = now
        let refusal: Duration? = buckets.withLock { buckets in
            if buckets.failures.isExhausted(address, now: now) { return .seconds(1) }
            return buckets.addresses.take(address, now: now)
        }
        if let refusal { throw ServiceError.rateLimited("this address", retryAfter: refusal) }
    }

    /// Records a failed authentication or enrollment from `address`.
    func recordFailure(address: String) {
        let now = now
        _ = buckets.withLock { $0.failures.take(address, now: now) }
    }

    /// Admits one request of an authenticated device.
    func admit(device: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.devices.take(device, now: now) }) {
            throw ServiceError.rateLimited("this device", retryAfter: refusal)
        }
    }
}
