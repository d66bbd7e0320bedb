/// The fields of a submitted form (`application/x-www-form-urlencoded`), in order.
public struct FormFields: Sendable, Hashable {
    /// Every name and value, in the order sent (a name may repeat).
    public let pairs: [Pair]

    /// One field.
    public struct Pair: Sendable, Hashable {
        public let name: String
        public let value: String
    }

    public init(_ pairs: [(String, String)]) {
        self.pairs = pairs.map { Pair(name: $0.0, value: $0.1) }
    }

    /// Decodes a form body: `+` is a space, `%XX` a byte; bytes that are not UTF-8 become U+FFFD.
    public init(urlEncoded body: some Sequence<UInt8>) {
        var pairs: [(String, String)] = []
        for part in Array(body).split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let halves = part.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            pairs.append((Self.decode(halves[0]), halves.count > 1 ? Self.decode(halves[1]) : ""))
        }
        self.init(pairs)
    }

    /// The last value sent for `name` (a checkbox after its hidden default wins).
    public subscript(name: String) -> String? {
        pairs.last { $0.name == name }?.value
    }

    /// Whether a field named `name` was sent.
    public func has(_ name: String) -> Bool { pairs.contains { $0.name == name } }

    /// The names sent that start with `prefix`, each once, in order.
    public func names(withPrefix prefix: String) -> [String] {
        var seen: Set<String> = []
        return pairs.map(\.name).filter { $0.hasPrefix(prefix) && seen.insert($0).inserted }
    }

    private static func decode(_ bytes: some Collection<UInt8>) -> String {
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "+") {
                output.append(UInt8(ascii: " "))
            } else if byte == UInt8(ascii: "%"), let high = bytes.index(index, offsetBy: 1, limitedBy: bytes.endIndex),
                high != bytes.endIndex, let low = bytes.index(high, offsetBy: 1, limitedBy: bytes.endIndex), low != bytes.endIndex,
                let value = hexValue(bytes[high], bytes[low])
            {
                output.append(value)
                index = low
            } else {
                output.append(byte)
            }
            index = bytes.index(after: index)
        }
        return String(decoding: output, as: UTF8.self)
    }

    private static func hexValue(_ high: UInt8, _ low: UInt8) -> UInt8? {
        func digit(_ byte: UInt8) -> UInt8? {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        guard let high = digit(high), let low = digit(low) else { return nil }
        return high << 4 | low
    }
}
