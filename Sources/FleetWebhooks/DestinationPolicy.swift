#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Where the server may send webhooks (a guard against server-side request forgery: a
/// subscription must not make the server call into its own network).
///
/// - The URL is `https://`; `http://` only when its host is loopback (`localhost`, `127.x.y.z`,
///   `[::1]`). No user name or password in it, no fragment.
/// - Every address the host resolves to is checked, and the connection is made to the checked
///   address (no second lookup that could answer differently). Loopback addresses are allowed
///   only for a loopback host; private, shared, link-local, multicast and reserved addresses
///   only with `allowPrivate`. The cloud metadata address is never allowed.
public struct DestinationPolicy: Sendable, Hashable {
    /// Whether private addresses (RFC 1918, unique-local, link-local, …) may be reached.
    public var allowPrivate: Bool

    public init(allowPrivate: Bool = false) { self.allowPrivate = allowPrivate }

    /// A URL that passed ``check(url:)``.
    public struct Destination: Sendable, Hashable {
        public let url: String
        public let host: String
        public let port: Int
        /// Whether the URL names a loopback host (so loopback addresses are its own).
        public let isLoopbackHost: Bool
        /// Whether the URL is `http://` (then every address must be loopback).
        public let isPlainHTTP: Bool
    }

    /// Why a destination was refused: said to the admin who made the subscription.
    public struct Refused: Error, Sendable, Hashable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Checks the URL's form: scheme, host, port.
    public func check(url: String) throws(Refused) -> Destination {
        guard url.utf8.count <= 2048, url.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Refused(reason: "the URL must be printable ASCII without spaces, at most 2048 characters")
        }
        let scheme: String
        if url.lowercased().hasPrefix("https://") {
            scheme = "https"
        } else if url.lowercased().hasPrefix("http://") {
            scheme = "http"
        } else {
            throw Refused(reason: "the URL must start with https:// (http:// only for a loopback host)")
        }
        let rest = url.dropFirst(scheme.count + 3)
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        guard !url.contains("#") else { throw Refused(reason: "the URL must not have a fragment (#)") }
        guard !authority.contains("@") else { throw Refused(reason: "the URL must not hold a user name or password") }
        var host: Substring
        var portText: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw Refused(reason: "the URL's IPv6 host has no closing ]") }
            host = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw Refused(reason: "the URL's host is not followed by a port") }
                portText = after.dropFirst()
            }
            guard Self.ipv6(String(host)) != nil else { throw Refused(reason: "the URL's host [\(host)] is not an IPv6 address") }
        } else {
            let parts = authority.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count <= 2 else { throw Refused(reason: "the URL's host is not followed by a port") }
            host = parts[0]
            portText = parts.count == 2 ? parts[1] : nil
        }
        guard !host.isEmpty else { throw Refused(reason: "the URL has no host") }
        var port = scheme == "https" ? 443 : 80
        if let portText {
            guard let number = Int(portText), (1...65535).contains(number) else {
                throw Refused(reason: "the URL's port '\(portText)' is not a number from 1 to 65535")
            }
            port = number
        }
        let hostName = host.lowercased()
        let loopback = Self.isLoopbackName(hostName)
        guard scheme == "https" || loopback else {
            throw Refused(reason: "the URL must use https:// (http:// only for a loopback host such as 127.0.0.1)")
        }
        return Destination(url: url, host: hostName, port: port, isLoopbackHost: loopback, isPlainHTTP: scheme == "http")
    }

    /// Checks one address the destination's host resolved to (text form, IPv4 or IPv6).
    public func check(address: String, for destination: Destination) throws(Refused) {
        guard let kind = Self.kind(of: address) else { throw Refused(reason: "'\(address)' is not an IP address") }
        if destination.isPlainHTTP, kind != .loopback {
            throw Refused(reason: "\(destination.host) resolves to \(address), not a loopback address: http:// only reaches this machine")
        }
        switch kind {
        case .global: return
        case .loopback where destination.isLoopbackHost: return
        case .loopback: throw Refused(reason: "\(destination.host) resolves to the loopback address \(address)")
        case .metadata: throw Refused(reason: "\(destination.host) resolves to the cloud metadata address \(address)")
        case .unspecified: throw Refused(reason: "\(destination.host) resolves to the unspecified address \(address) (this machine)")
        case .restricted(let what):
            guard allowPrivate else {
                throw Refused(
                    reason: "\(destination.host) resolves to \(address), a \(what) address (allowed only with --webhooks-allow-private)")
            }
        }
    }

    /// What an address is, as the policy sees it.
    enum AddressKind: Equatable {
        case global, loopback, metadata, unspecified
        case restricted(String)
    }

    /// Whether `text` is an IPv4 or IPv6 address (no brackets).
    public static func isAddress(_ text: String) -> Bool { ipv4(text) != nil || ipv6(text) != nil }

    static func isLoopbackName(_ host: String) -> Bool {
        if host == "localhost" || host.hasSuffix(".localhost") { return true }
        return kind(of: host) == .loopback
    }

    static func kind(of address: String) -> AddressKind? {
        if let octets = ipv4(address) { return kind(ipv4: octets) }
        guard let octets = ipv6(address) else { return nil }
        if octets[0..<15].allSatisfy({ $0 == 0 }) {
            return octets[15] == 1 ? .loopback : .unspecified
        }
        // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::a.b.c.d)
        // reach an IPv4 address; so does 6to4 (2002:AABB:CCDD::).
        if octets[0..<10].allSatisfy({ $0 == 0 }) && octets[10] == 0xFF && octets[11] == 0xFF || octets[0..<12].allSatisfy({ $0 == 0 })
            || octets[0..<12] == [0, 0x64, 0xFF, 0x9B, 0, 0, 0, 0, 0, 0, 0, 0]
        {
            return kind(ipv4: Array(octets[12..<16]))
        }
        if octets[0] == 0x20 && octets[1] == 0x02 { return kind(ipv4: Array(octets[2..<6])) }
        if octets[0..<6] == [0, 0x64, 0xFF, 0x9B, 0, 1] { return .restricted("local-use NAT64") }
        if octets == [0xFD, 0x00, 0x0E, 0xC2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, 0x54] { return .metadata }
        switch octets[0] {
        case 0xFC, 0xFD: return .restricted("unique-local")
        case 0xFE where octets[1] & 0xC0 == 0x80: return .restricted("link-local")
        case 0xFE where octets[1] & 0xC0 == 0xC0: return .restricted("site-local")
        case 0xFF: return .restricted("multicast")
        default: return .global
        }
    }

    static func kind(ipv4 octets: [UInt8]) -> AddressKind {
        let (a, b) = (octets[0], octets[1])
        switch a {
        case 127: return .loopback
        case 0: return .unspecified
        case 10: return .restricted("private")
        case 100 where b & 0xC0 == 64: return .restricted("shared (carrier-grade NAT)")
        case 169 where b == 254:
            return octets == [169, 254, 169, 254] ? .metadata : .restricted("link-local")
        case 172 where b & 0xF0 == 16: return .restricted("private")
        case 192 where b == 168: return .restricted("private")
        case 192 where b == 0 && octets[2] == 0: return .restricted("reserved")
        case 198 where b & 0xFE == 18: return .restricted("benchmarking")
        case 224...239: return .restricted("multicast")
        case 240...255: return .restricted("reserved")
        default: return .global
        }
    }

    static func ipv4(_ text: String) -> [UInt8]? {
        var address = in_addr()
        guard inet_pton(AF_INET, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address) { Array($0) }
    }

    static func ipv6(_ text: String) -> [UInt8]? {
        var address = in6_addr()
        guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
        return withUnsafeBytes(of: address) { Array($0) }
    }
}
