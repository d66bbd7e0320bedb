import FleetJSON
import FleetMetadata

/// Secrets taken out of a program's output before any of it is kept, reported or logged.
///
/// A hook's output is collected as its last bytes only. Cutting first and redacting after would
/// let a secret that straddles the cut survive as a fragment (the end of a password is still
/// most of a password). So the collector keeps ``bytesToKeep(limit:secrets:)`` bytes, which is
/// enough for every secret that reaches into the last `limit` bytes to be seen whole;
/// ``redact(_:secrets:limit:wasCut:)`` masks each occurrence, drops the region where only a
/// fragment of a secret can be, and only then cuts to `limit`.
public enum OutputRedaction {
    /// What replaces each secret: ``SettingsValues/mask``'s text.
    public static let mask = SettingsValues.mask.stringValue ?? "********"

    /// How many of the last output bytes to collect so that `limit` bytes can be redacted
    /// safely: `limit` plus the longest form of a secret less one.
    public static func bytesToKeep(limit: Int, secrets: [String]) -> Int {
        limit + max(0, (forms(of: secrets).map(\.utf8.count).max() ?? 0) - 1)
    }

    /// Each secret as it is and as it appears inside a JSON string (a hook that prints the
    /// settings file or a `jq` error shows `\"` and `\\` there), without duplicates.
    public static func forms(of secrets: [String]) -> [String] {
        var forms: [String] = []
        for secret in secrets where !secret.isEmpty {
            forms.append(secret)
            let escaped = String(JSONValue.string(secret).serialized().dropFirst().dropLast())
            if escaped != secret { forms.append(escaped) }
        }
        return forms
    }

    /// `output` with every occurrence of every secret replaced by ``mask`` (longer secrets
    /// first where they overlap), then cut to its last `limit` bytes.
    ///
    /// - Parameter wasCut: whether `output` is the tail of a longer stream. Its first bytes
    ///   (as many as the longest secret less one) may then be the end of a secret whose start
    ///   was lost; they are dropped unless a whole secret covers them.
    public static func redact(_ output: [UInt8], secrets: [String], limit: Int, wasCut: Bool) -> String {
        let needles = Set(forms(of: secrets)).map { Array($0.utf8) }.sorted { $0.count > $1.count }
        var covered = [Bool](repeating: false, count: output.count)
        for needle in needles where needle.count <= output.count {
            var start = 0
            while start + needle.count <= output.count {
                if output[start] == needle[0], output[start..<start + needle.count].elementsEqual(needle) {
                    for position in start..<start + needle.count { covered[position] = true }
                    start += needle.count
                } else {
                    start += 1
                }
            }
        }
        let fragmentRegion = wasCut ? max(0, (needles.first?.count ?? 0) - 1) : 0
        var result: [UInt8] = []
        result.reserveCapacity(output.count)
        var position = 0
        while position < output.count {
            if covered[position] {
                result.append(contentsOf: mask.utf8)
                while position < output.count && covered[position] { position += 1 }
            } else {
                if position >= fragmentRegion { result.append(output[position]) }
                position += 1
            }
        }
        return String(decoding: result.suffix(limit), as: UTF8.self)
    }
}
