/// Base64url without padding (RFC 4648 §5): the alphabet `A–Z a–z 0–9 - _`, no `=`. Text made
/// of it is safe in a URL, a cookie and an HTTP header.
public enum Base64URL {
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// `bytes` encoded: four characters for each three bytes, two or three for the last one or two.
    public static func encoded(_ bytes: [UInt8]) -> String {
        var output: [UInt8] = []
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var group: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { group |= UInt32(byte) << (16 - 8 * offset) }
            for position in 0..<(chunk.count + 1) { output.append(alphabet[Int((group >> (18 - 6 * position)) & 0x3F)]) }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// Why a text is not base64url without padding.
    public enum DecodingError: Error, Sendable, Hashable, CustomStringConvertible {
        /// A character outside the alphabet (`=` padding included), at this offset (0-based, in bytes).
        case badCharacter(offset: Int, UInt8)
        /// A length no encoding has: one character more than a multiple of four.
        case badLength(Int)
        /// The last character sets bits beyond the data (no encoder writes it so; a text cut or altered).
        case extraBits

        public var description: String {
            switch self {
            case .badCharacter(let offset, let byte):
                let shown = (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x" + String(byte, radix: 16)
                return "\(shown) at offset \(offset) is not a base64url character (A-Z a-z 0-9 - _, no padding)"
            case .badLength(let length):
                return "\(length) characters cannot be base64url without padding"
            case .extraBits:
                return "the last character holds bits beyond the data (the text was cut or changed)"
            }
        }
    }

    /// The bytes `text` encodes; strict: only the alphabet, no padding, no extra bits, so that
    /// each byte sequence has exactly one text.
    public static func decoded(_ text: some StringProtocol) throws(DecodingError) -> [UInt8] {
        let characters = Array(text.utf8)
        guard characters.count % 4 != 1 else { throw .badLength(characters.count) }
        var output: [UInt8] = []
        output.reserveCapacity(characters.count * 3 / 4)
        var group: UInt32 = 0
        var bits = 0
        for (offset, character) in characters.enumerated() {
            guard let value = sextet(character) else { throw .badCharacter(offset: offset, character) }
            group = group << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: group >> UInt32(bits)))
                group &= (1 << UInt32(bits)) - 1
            }
        }
        guard group == 0 else { throw .extraBits }
        return output
    }

    private static func sextet(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): character - UInt8(ascii: "A")
        case UInt8(ascii: "a")...UInt8(ascii: "z"): character - UInt8(ascii: "a") + 26
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0") + 52
        case UInt8(ascii: "-"): 62
        case UInt8(ascii: "_"): 63
        default: nil
        }
    }
}
