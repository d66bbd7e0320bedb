import Crypto
import ExtrasBase64

/// The `webhook-signature` header of the Standard Webhooks specification: `v1,` and the base64
/// HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>` under the secret's key. While a
/// secret is being rotated a message carries one signature per secret, separated by spaces, so
/// a receiver that knows either accepts it.
public enum WebhookSignature {
    /// How far a message's timestamp may be from the receiver's clock: 5 minutes, either way.
    public static let tolerance: Int64 = 5 * 60

    /// The signature of one message under one secret (`v1,<base64>`).
    public static func sign(id: String, timestamp: Int64, body: [UInt8], secret: WebhookSecret) -> String {
        "v1," + Base64.encodeToString(bytes: mac(id: id, timestamp: timestamp, body: body, key: secret.key))
    }

    /// The header's value for a message signed by every one of `secrets` (the current one first).
    public static func header(id: String, timestamp: Int64, body: [UInt8], secrets: [WebhookSecret]) -> String {
        secrets.map { sign(id: id, timestamp: timestamp, body: body, secret: $0) }.joined(separator: " ")
    }

    /// Whether `header` holds a `v1` signature of the message under `secret`, and `timestamp` is
    /// within ``tolerance`` of `now`: what a receiver checks.
    public static func verify(header: String, id: String, timestamp: Int64, body: [UInt8], secret: WebhookSecret, now: Int64) -> Bool {
        let (distance, overflow) = now.subtractingReportingOverflow(timestamp)
        guard !overflow, distance.magnitude <= tolerance else { return false }
        let expected = mac(id: id, timestamp: timestamp, body: body, key: secret.key)
        for candidate in header.split(separator: " ") {
            guard candidate.hasPrefix("v1,"), let given = try? Base64.decode(string: String(candidate.dropFirst(3))) else { continue }
            if constantTimeEqual(given, expected) { return true }
        }
        return false
    }

    private static func mac(id: String, timestamp: Int64, body: [UInt8], key: [UInt8]) -> [UInt8] {
        var signed = Array("\(id).\(timestamp).".utf8)
        signed.append(contentsOf: body)
        return Array(HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key)))
    }

    private static func constantTimeEqual(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        return zip(lhs, rhs).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
