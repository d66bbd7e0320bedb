import Crypto
import FleetProtocol

/// The bearer secrets the server hands out, and how it keeps them: only as SHA-256 hashes.
///
/// Every secret is 32 bytes from the system's random source (`getrandom`), base64url-encoded
/// behind a prefix that says what it is, so a leaked token is recognisable by secret scanners
/// and by a person: `fsd_` device token, `fsa_` admin token, `fse_` enrollment token, `fsk_` an
/// account's API token. A fast
/// hash is the right one here: the secrets have 256 bits of entropy, so there is nothing to
/// brute-force, and the lookup stays a single indexed query.
public enum Credentials {
    /// What a secret is for.
    public enum Kind: String, Sendable, CaseIterable {
        case device = "fsd_"
        case admin = "fsa_"
        case enrollment = "fse_"
        /// An account's API token.
        case api = "fsk_"
    }

    /// A fresh random secret of the given kind.
    public static func generate(_ kind: Kind) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return kind.rawValue + base64URL(bytes)
    }

    /// The hex SHA-256 of a secret, as stored and looked up.
    public static func hash(_ secret: String) -> String {
        hex(Array(SHA256.hash(data: Array(secret.utf8))))
    }

    /// A random identifier: `prefix` and 20 lowercase base-32 characters (100 bits).
    public static func identifier(prefix: String) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)
        var generator = SystemRandomNumberGenerator()
        let characters = (0..<20).map { _ in alphabet[Int.random(in: 0..<32, using: &generator)] }
        return prefix + String(decoding: characters, as: UTF8.self)
    }

    /// `text` with every run that starts like one of fleetset's secrets (`fsa_`, `fsd_`, `fse_`,
    /// `fsk_` and at least 8 token characters) replaced by its prefix and `…`: for what an
    /// admin may have pasted a secret into (an id in a path, a message) before it is logged or
    /// kept.
    public static func redacted(_ text: String) -> String {
        let bytes = Array(text.utf8)
        let prefixes = Kind.allCases.map { Array($0.rawValue.utf8) }
        func isTokenByte(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || byte == 0x2D || byte == 0x5F
        }
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            if let prefix = prefixes.first(where: { bytes[index...].starts(with: $0) }) {
                var end = index + prefix.count
                while end < bytes.count, isTokenByte(bytes[end]) { end += 1 }
                if end - index - prefix.count >= 8 {
                    output += prefix + Array("…".utf8)
                    index = end
                    continue
                }
            }
            output.append(bytes[index])
            index += 1
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Compares two strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ left: String, _ right: String) -> Bool {
        let a = Array(left.utf8)
        let b = Array(right.utf8)
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for index in a.indices { difference |= a[index] ^ b[index] }
        return difference == 0
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// `bytes` in base64url without padding (RFC 4648 §5).
    public static func base64URL(_ bytes: [UInt8]) -> String { Base64URL.encoded(bytes) }

    /// The SHA-256 of `bytes` as 16 hex digits (for ETags of documents).
    public static func shortDigest(_ bytes: some Sequence<UInt8>) -> String {
        hex(Array(SHA256.hash(data: Array(bytes)).prefix(8)))
    }
}
