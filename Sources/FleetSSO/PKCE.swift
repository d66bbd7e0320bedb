import Crypto
import ExtrasBase64

/// Proof Key for Code Exchange (RFC 7636): a random verifier kept by the console, and its
/// S256 challenge sent with the authorization request. Only the holder of the verifier can
/// redeem the code the provider returns.
public struct PKCE: Sendable, Hashable {
    /// The verifier: 43 to 128 characters of `A-Z a-z 0-9 - . _ ~`.
    public let verifier: String

    /// A verifier as RFC 7636 §4.1 asks: 32 random octets, base64url without padding (43 characters).
    public static func generate() -> PKCE {
        PKCE(verifier: LoginAttempt.randomToken())!
    }

    /// A verifier read back (from a stored login attempt); `nil` when it is not one RFC 7636 allows.
    public init?(verifier: String) {
        let allowed = verifier.utf8.allSatisfy { byte in
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "~")
        }
        guard (43...128).contains(verifier.utf8.count), allowed else { return nil }
        self.verifier = verifier
    }

    /// `BASE64URL(SHA256(verifier))`, the `code_challenge` with `code_challenge_method=S256`.
    public var challenge: String {
        Base64.encodeToString(bytes: Array(SHA256.hash(data: Array(verifier.utf8))), options: [.base64UrlAlphabet, .omitPaddingCharacter])
    }
}
