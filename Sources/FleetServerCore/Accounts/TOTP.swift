import Crypto

/// Time-based one-time passwords (RFC 6238 over RFC 4226): HMAC-SHA1, 30-second steps, six
/// digits, what every authenticator app speaks. A pure value: the time is passed in.
public struct TOTP: Sendable, Hashable {
    /// The shared secret: 20 random bytes (RFC 4226 recommends 160 bits).
    public let secret: [UInt8]

    /// Seconds per step.
    public static let period: Int64 = 30
    /// Digits per code.
    public static let digits = 6

    public init(secret: [UInt8]) { self.secret = secret }

    /// A fresh secret from the system's random source.
    public static func generate() -> TOTP {
        var generator = SystemRandomNumberGenerator()
        return TOTP(secret: (0..<20).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    /// The step `time` (seconds since the epoch) falls in.
    public static func step(at time: Int64) -> Int64 { time / period }

    /// The code of `step`, zero-padded to six digits.
    public func code(step: Int64) -> String {
        let counter = (0..<8).map { UInt8(truncatingIfNeeded: UInt64(bitPattern: step) >> (56 - 8 * $0)) }
        let mac = Array(HMAC<Insecure.SHA1>.authenticationCode(for: counter, using: SymmetricKey(data: secret)))
        let offset = Int(mac[mac.count - 1] & 0x0F)
        let value =
            (UInt32(mac[offset] & 0x7F) << 24) | (UInt32(mac[offset + 1]) << 16) | (UInt32(mac[offset + 2]) << 8) | UInt32(mac[offset + 3])
        let code = String(value % 1_000_000)
        return String(repeating: "0", count: Self.digits - code.count) + code
    }

    /// The step whose code `code` is, among the step of `time` and the one before and after it
    /// (a clock a step off, a code typed as it changed), later than `usedStep` (a code is good
    /// once); `nil` when none.
    public func matchingStep(_ code: String, at time: Int64, after usedStep: Int64?) -> Int64? {
        let typed = code.filter { !$0.isWhitespace }
        guard typed.count == Self.digits, typed.allSatisfy(\.isASCII), typed.allSatisfy(\.isNumber) else { return nil }
        let now = Self.step(at: time)
        for step in [now - 1, now, now + 1] where step > (usedStep ?? .min) {
            if Credentials.constantTimeEquals(self.code(step: step), typed) { return step }
        }
        return nil
    }

    /// The secret in base32 (RFC 4648, no padding), as people type it into an authenticator.
    public var base32: String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".utf8)
        var output: [UInt8] = []
        var buffer: UInt32 = 0
        var bits = 0
        for byte in secret {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                output.append(alphabet[Int((buffer >> UInt32(bits - 5)) & 0x1F)])
                bits -= 5
            }
        }
        if bits > 0 { output.append(alphabet[Int((buffer << UInt32(5 - bits)) & 0x1F)]) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Reads a base32 secret (upper or lower case, no padding); `nil` for anything else.
    public init?(base32: String) {
        var buffer: UInt32 = 0
        var bits = 0
        var bytes: [UInt8] = []
        for character in base32.uppercased().utf8 {
            let value: UInt8
            switch character {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): value = character - UInt8(ascii: "A")
            case UInt8(ascii: "2")...UInt8(ascii: "7"): value = character - UInt8(ascii: "2") + 26
            default: return nil
            }
            buffer = (buffer << 5) | UInt32(value)
            bits += 5
            if bits >= 8 {
                bytes.append(UInt8((buffer >> UInt32(bits - 8)) & 0xFF))
                bits -= 8
            }
        }
        guard bytes.count >= 10 else { return nil }
        secret = bytes
    }

    /// The `otpauth://` URI an authenticator app reads (from a QR code or pasted):
    /// `otpauth://totp/fleetset:alice?secret=…&issuer=fleetset&…`.
    public func uri(account: String, issuer: String = "fleetset") -> String {
        "otpauth://totp/\(issuer):\(account)?secret=\(base32)&issuer=\(issuer)&algorithm=SHA1&digits=\(Self.digits)&period=\(Self.period)"
    }
}

/// One-time recovery codes for when the authenticator is lost: ten of them, shown once, kept
/// as SHA-256 hashes (they are random, 50 bits each: a fast hash is the right one).
public enum RecoveryCodes {
    /// Ten fresh codes, `xxxxx-xxxxx` in lowercase base32.
    public static func generate(count: Int = 10) -> [String] {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz234567")
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in
            let characters = (0..<10).map { _ in alphabet[Int.random(in: 0..<32, using: &generator)] }
            return String(characters[0..<5]) + "-" + String(characters[5...])
        }
    }

    /// The stored form of a code as typed (case, spaces and the dash do not matter).
    public static func hash(_ code: String) -> String {
        Credentials.hash(String(code.lowercased().filter { $0.isLetter || $0.isNumber }))
    }
}
