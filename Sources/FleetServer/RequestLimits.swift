import FleetProtocol
import FleetServerCore
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// How many requests the server takes from whom, answered 429 `rate-limited` with `Retry-After`
/// beyond that (see ``RateLimiter``):
///
/// - every client address: ``Configuration/perAddress`` (generous: a site's devices may share one
///   address behind NAT);
/// - failed authentication and enrollment per address: ``Configuration/failures``. Beyond it, a
///   request from that address with a token the server does not accept, and any enrollment, is
///   answered 429 instead of 401 until the bucket refills. A request with a valid token is never
///   refused for what others at its address did.
/// - every authenticated device: ``Configuration/perDevice`` (an agent needs a long-poll a minute
///   and a few reports; one that loops is stopped).
///
/// The admin token is limited only by its address. An IPv6 client is counted by its /64 (one
/// host gets a whole /64 to pick addresses from). Behind a reverse proxy, name it with
/// `--trusted-proxy`: the client address is then the last one in its `X-Forwarded-For`.
public final class RequestLimits: Sendable {
    /// The limits.
    public struct Configuration: Sendable, Hashable {
        public var perAddress: RateLimiter<String>.Limit
        public var failures: RateLimiter<String>.Limit
        public var perDevice: RateLimiter<String>.Limit
        /// Reverse proxies whose `X-Forwarded-For` names the client.
        public var trustedProxies: Set<String>

        public init(
            perAddress: RateLimiter<String>.Limit = .init(rate: 200, burst: 400),
            failures: RateLimiter<String>.Limit = .init(rate: 1, burst: 20),
            perDevice: RateLimiter<String>.Limit = .init(rate: 10, burst: 50), trustedProxies: Set<String> = []
        ) {
            self.perAddress = perAddress
            self.failures = failures
            self.perDevice = perDevice
            self.trustedProxies = trustedProxies
        }
    }

    private struct Buckets: Sendable {
        var addresses: RateLimiter<String>
        var failures: RateLimiter<String>
        var devices: RateLimiter<String>
    }

    private let buckets: Locked<Buckets>
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    private let trustedProxies: Set<String>

    public init(_ configuration: Configuration = Configuration()) {
        trustedProxies = configuration.trustedProxies
        buckets = Locked(
            Buckets(
                addresses: RateLimiter(configuration.perAddress), failures: RateLimiter(configuration.failures),
                devices: RateLimiter(configuration.perDevice)))
        origin = clock.now
    }

    private var now: Duration { origin.duration(to: clock.now) }

    /// The key a client is counted by: its address (the last `X-Forwarded-For` entry when `peer`
    /// is a trusted proxy), an IPv6 address by its /64.
    func client(peer: String, forwardedFor: String?) -> String {
        var address = peer
        if trustedProxies.contains(peer), let forwarded = forwardedFor?.split(separator: ",").last {
            address = String(forwarded.trimmingSpaces())
        }
        return Self.key(address)
    }

    static func key(_ address: String) -> String {
        guard address.contains(":") else { return address }
        var bytes = [UInt8](repeating: 0, count: 16)  // an in6_addr
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        return bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// Admits one request from `client`, unless it is over its limit.
    func admit(client: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.addresses.take(client, now: now) }) {
            throw ServiceError.rateLimited("this address", retryAfter: refusal)
        }
    }

    /// Records a failed authentication or enrollment from `client`; throws 429 once it has
    /// failed too often (instead of the 401 it would get).
    func recordFailure(client: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.failures.take(client, now: now) }) {
            throw ServiceError.rateLimited("this address", retryAfter: refusal)
        }
    }

    /// Refuses a client that has failed too often before its secret is even checked: an
    /// enrollment, or a sign-in to the console (so that guessing stops, not only its answers).
    func admitGuess(client: String) throws(ServiceError) {
        let now = now
        if buckets.withLock({ $0.failures.isExhausted(client, now: now) }) {
            throw ServiceError.rateLimited("this address", retryAfter: .seconds(1))
        }
    }

    /// Admits one request of an authenticated device.
    func admit(device: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.devices.take(device, now: now) }) {
            throw ServiceError.rateLimited("this device", retryAfter: refusal)
        }
    }
}
