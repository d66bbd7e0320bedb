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
/// - failed authentication, enrollment and console sign-in: ``Configuration/failures``, counted
///   twice, per address and per presented credential. Beyond either, a request with a credential
///   the server does not accept is answered 429 instead of 401 until the bucket refills. The
///   credential is always checked first: a request with a valid token, enrollment token or
///   admin token is never refused for what others at its address (a NAT, a proxy not named with
///   `--trusted-proxy`) or with another credential did.
/// - every authenticated device: ``Configuration/perDevice`` (an agent needs a long-poll a minute
///   and a few reports; one that loops is stopped);
/// - every authenticated device's writes (its settings write-backs, facts and token requests),
///   on top of that: ``Configuration/perDeviceWrite``, well below the read rate (a person at a
///   kiosk changes a setting now and then; a stolen token writing in a loop fills the history).
///
/// The admin token is limited only by its address. An IPv6 client is counted by its /64 (one
/// host gets a whole /64 to pick addresses from); an IPv4 client of a dual-stack listener
/// (`[::]`), which the kernel hands over as `::ffff:a.b.c.d`, by its IPv4 address. Behind a
/// reverse proxy, name it with `--trusted-proxy`: the client address is then the last one in its
/// `X-Forwarded-For`. Addresses are compared in one canonical form, so `127.0.0.1` names the
/// proxy whether it connects to an IPv4 or a dual-stack listener.
public final class RequestLimits: Sendable {
    /// The limits.
    public struct Configuration: Sendable, Hashable {
        public var perAddress: RateLimiter<String>.Limit
        public var failures: RateLimiter<String>.Limit
        public var perDevice: RateLimiter<String>.Limit
        public var perDeviceWrite: RateLimiter<String>.Limit
        /// Reverse proxies whose `X-Forwarded-For` names the client.
        public var trustedProxies: Set<String>

        public init(
            perAddress: RateLimiter<String>.Limit = .init(rate: 200, burst: 400),
            failures: RateLimiter<String>.Limit = .init(rate: 1, burst: 20),
            perDevice: RateLimiter<String>.Limit = .init(rate: 10, burst: 50),
            perDeviceWrite: RateLimiter<String>.Limit = .init(rate: 0.2, burst: 30), trustedProxies: Set<String> = []
        ) {
            self.perAddress = perAddress
            self.failures = failures
            self.perDevice = perDevice
            self.perDeviceWrite = perDeviceWrite
            self.trustedProxies = trustedProxies
        }
    }

    private struct Buckets: Sendable {
        var addresses: RateLimiter<String>
        var failures: RateLimiter<String>
        var devices: RateLimiter<String>
        var deviceWrites: RateLimiter<String>
    }

    private let buckets: Locked<Buckets>
    private let clock = ContinuousClock()
    private let origin: ContinuousClock.Instant
    private let trustedProxies: Set<String>

    public init(_ configuration: Configuration = Configuration()) {
        trustedProxies = Set(configuration.trustedProxies.map(Self.canonical))
        buckets = Locked(
            Buckets(
                addresses: RateLimiter(configuration.perAddress), failures: RateLimiter(configuration.failures),
                devices: RateLimiter(configuration.perDevice), deviceWrites: RateLimiter(configuration.perDeviceWrite)))
        origin = clock.now
    }

    private var now: Duration { origin.duration(to: clock.now) }

    /// The key a client is counted by: its address (the last `X-Forwarded-For` entry when `peer`
    /// is a trusted proxy), an IPv4 address (mapped ones included) by itself, an IPv6 address by
    /// its /64. Runs for every request: the address is parsed once (twice behind a proxy).
    func client(peer: String, forwardedFor: String?) -> String {
        if !trustedProxies.isEmpty, trustedProxies.contains(Self.canonical(peer)),
            let forwarded = forwardedFor?.split(separator: ",").last
        {
            return Self.key(String(forwarded.trimmingSpaces()))
        }
        return Self.key(peer)
    }

    /// The client's own address (not the /64 it is counted by), in one form (``canonical(_:)``):
    /// what the audit trail and an API token's last use record.
    func address(peer: String, forwardedFor: String?) -> String {
        if !trustedProxies.isEmpty, trustedProxies.contains(Self.canonical(peer)),
            let forwarded = forwardedFor?.split(separator: ",").last
        {
            return Self.canonical(String(forwarded.trimmingSpaces()))
        }
        return Self.canonical(peer)
    }

    /// `address` in one form: an IPv4-mapped IPv6 address (`::ffff:127.0.0.2`, as a dual-stack
    /// socket reports an IPv4 peer) as its IPv4 address, any other IPv6 address as `inet_ntop`
    /// writes it (lower case, zeros compressed); anything else unchanged.
    static func canonical(_ address: String) -> String {
        guard let bytes = ipv6Bytes(address) else { return address }
        if let ipv4 = mappedIPv4(bytes) { return ipv4 }
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, bytes, &text, socklen_t(text.count)) != nil else { return address }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The key of an address: an IPv4 address (mapped ones included) itself, an IPv6 address
    /// its /64.
    static func key(_ address: String) -> String {
        guard let bytes = ipv6Bytes(address) else { return address }
        if let ipv4 = mappedIPv4(bytes) { return ipv4 }
        return bytes.prefix(8).map { String($0, radix: 16) }.joined(separator: ":") + "::/64"
    }

    /// The IPv4 address of an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), `nil` for any other.
    private static func mappedIPv4(_ bytes: [UInt8]) -> String? {
        guard bytes.prefix(10).allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff else { return nil }
        return bytes.suffix(4).map { String($0) }.joined(separator: ".")
    }

    /// The 16 bytes of an IPv6 address in text (brackets allowed), `nil` for anything else.
    private static func ipv6Bytes(_ address: String) -> [UInt8]? {
        var text = Substring(address)
        if text.first == "[" && text.last == "]" { text = text.dropFirst().dropLast() }
        guard text.contains(":") else { return nil }
        var bytes = [UInt8](repeating: 0, count: 16)  // an in6_addr
        guard inet_pton(AF_INET6, String(text), &bytes) == 1 else { return nil }
        return bytes
    }

    /// Admits one request from `client`, unless it is over its limit.
    func admit(client: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.addresses.take(client, now: now) }) {
            throw ServiceError.rateLimited("this address", retryAfter: refusal)
        }
    }

    /// Records a refused credential (a bearer token, an enrollment token, the admin token at
    /// sign-in) that `client` presented: counted against the address and against the
    /// credential itself (so that one credential tried from many addresses is slowed too).
    /// Throws 429 once either has failed too often, instead of the 401 it would get. Called only
    /// after the credential was checked and refused: a valid one never reaches it.
    func recordFailure(client: String, credential: String?) throws(ServiceError) {
        let now = now
        let credentialKey = credential.map { "credential " + Credentials.hash($0).prefix(32) }
        let refusal = buckets.withLock { buckets -> Duration? in
            let byAddress = buckets.failures.take(client, now: now)
            let byCredential = credentialKey.flatMap { buckets.failures.take($0, now: now) }
            return [byAddress, byCredential].compactMap(\.self).max()
        }
        if let refusal { throw ServiceError.rateLimited("this address or credential", retryAfter: refusal) }
    }

    /// Admits a sign-in from `client` before its password is checked: refused (429) while the
    /// address's failed-authentication budget is spent, so that a guesser's next guess costs it
    /// a wait, not the server a hash. Takes nothing (``recordFailure(client:credential:)`` does, on a failure).
    func admitSignIn(client: String) throws(ServiceError) {
        let now = now
        guard buckets.withLock({ $0.failures.isExhausted(client, now: now) }) else { return }
        throw ServiceError.rateLimited("this address", retryAfter: .seconds(1))
    }

    /// Admits one request of an authenticated device.
    func admit(device: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.devices.take(device, now: now) }) {
            throw ServiceError.rateLimited("this device", retryAfter: refusal)
        }
    }

    /// Admits one write of an authenticated device (a settings write-back, its facts, a token
    /// request), counted in addition to ``admit(device:)``.
    func admit(deviceWrite device: String) throws(ServiceError) {
        let now = now
        if let refusal = buckets.withLock({ $0.deviceWrites.take(device, now: now) }) {
            throw ServiceError.rateLimited("this device's writes", retryAfter: refusal)
        }
    }
}
