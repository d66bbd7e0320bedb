import ExtrasBase64

/// A subscription's signing secret as the Standard Webhooks specification writes it: `whsec_`
/// and the base64 of 24 to 64 random octets. Made by the server (32 octets), shown once to the
/// person who made the subscription, kept by the store.
public struct WebhookSecret: Sendable, Hashable {
    /// The text prefix of every secret.
    public static let prefix = "whsec_"
    /// The octets an HMAC is keyed with.
    public let key: [UInt8]

    /// A new secret of 32 random octets.
    public static func generate() -> WebhookSecret {
        var generator = SystemRandomNumberGenerator()
        return WebhookSecret(unchecked: (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) })
    }

    private init(unchecked key: [UInt8]) { self.key = key }

    /// Reads `whsec_<base64>`; `nil` when the prefix is missing, the base64 is not valid or
    /// the key is shorter than 24 or longer than 64 octets.
    public init?(_ text: String) {
        guard text.hasPrefix(Self.prefix),
            let key = try? Base64.decode(string: String(text.dropFirst(Self.prefix.count))), (24...64).contains(key.count)
        else { return nil }
        self.key = key
    }

    /// `whsec_` and the key in base64: what the person gives their receiver.
    public var text: String { Self.prefix + Base64.encodeToString(bytes: key) }
}

extension WebhookSecret: CustomStringConvertible, CustomReflectable {
    /// Never the key: a secret printed by mistake must not leak.
    public var description: String { "WebhookSecret(redacted)" }
    /// Never the key in `dump` or a debugger's description either.
    public var customMirror: Mirror { Mirror(self, children: []) }
}
