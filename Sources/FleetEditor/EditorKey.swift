/// A key a person pressed, as the editor understands it.
public enum EditorKey: Sendable, Hashable {
    case up, down, left, right, enter, escape, tab, backspace, delete, home, end, pageUp, pageDown
    /// A printable character.
    case character(Character)
    /// Ctrl with a letter (`control("s")` for Ctrl-S).
    case control(Character)
}

/// Turns the bytes a terminal sends into keys: UTF-8 text, control characters, and the escape
/// sequences of cursor and editing keys (`ESC [ A`, `ESC O A`, `ESC [ 5 ~`, …), which may arrive
/// split across reads. A lone `ESC` is held until ``flush()`` (the terminal sends nothing more
/// within a moment) or the next byte that cannot start a sequence.
public struct KeyDecoder: Sendable {
    private var pending: [UInt8] = []

    public init() {}

    /// The keys `bytes` complete (with what earlier reads left).
    public mutating func keys(from bytes: [UInt8]) -> [EditorKey] {
        pending += bytes
        var keys: [EditorKey] = []
        var index = 0
        while index < pending.count {
            guard let (key, length) = Self.key(at: index, in: pending) else { break }  // incomplete: wait for more
            if let key { keys.append(key) }
            index += length
        }
        pending.removeFirst(index)
        return keys
    }

    /// What is held: a lone `ESC` is the Escape key.
    public mutating func flush() -> [EditorKey] {
        defer { pending = [] }
        return pending == [0x1b] ? [.escape] : []
    }

    /// Whether bytes are held waiting for the rest of a sequence.
    public var isHolding: Bool { !pending.isEmpty }

    /// The key at `index` and how many bytes it takes (`nil` key: bytes to skip); `nil` when the
    /// bytes there may be the start of a longer sequence not complete yet.
    private static func key(at index: Int, in bytes: [UInt8]) -> (EditorKey?, Int)? {
        let byte = bytes[index]
        switch byte {
        case 0x1b:
            guard index + 1 < bytes.count else { return nil }
            let next = bytes[index + 1]
            guard next == UInt8(ascii: "[") || next == UInt8(ascii: "O") else { return (.escape, 1) }
            // CSI or SS3: parameters (digits, ;) then one final byte.
            var end = index + 2
            while end < bytes.count, (0x30...0x3f).contains(bytes[end]) { end += 1 }
            guard end < bytes.count else { return nil }
            let parameters = String(decoding: bytes[(index + 2)..<end], as: UTF8.self)
            let length = end - index + 1
            switch (bytes[end], parameters) {
            case (UInt8(ascii: "A"), _): return (.up, length)
            case (UInt8(ascii: "B"), _): return (.down, length)
            case (UInt8(ascii: "C"), _): return (.right, length)
            case (UInt8(ascii: "D"), _): return (.left, length)
            case (UInt8(ascii: "H"), _): return (.home, length)
            case (UInt8(ascii: "F"), _): return (.end, length)
            case (UInt8(ascii: "~"), "1"), (UInt8(ascii: "~"), "7"): return (.home, length)
            case (UInt8(ascii: "~"), "4"), (UInt8(ascii: "~"), "8"): return (.end, length)
            case (UInt8(ascii: "~"), "3"): return (.delete, length)
            case (UInt8(ascii: "~"), "5"): return (.pageUp, length)
            case (UInt8(ascii: "~"), "6"): return (.pageDown, length)
            default: return (nil, length)
            }
        case 0x0d, 0x0a: return (.enter, 1)
        case 0x09: return (.tab, 1)
        case 0x7f, 0x08: return (.backspace, 1)
        case 0x01...0x1a: return (.control(Character(Unicode.Scalar(byte + 0x60))), 1)
        case 0x00, 0x1c...0x1f: return (nil, 1)
        default:
            // One UTF-8 character: its length from the lead byte.
            let length = byte < 0x80 ? 1 : byte >= 0xf0 ? 4 : byte >= 0xe0 ? 3 : byte >= 0xc0 ? 2 : 1
            guard index + length <= bytes.count else { return nil }
            guard let text = String(validating: bytes[index..<(index + length)], as: UTF8.self), let character = text.first else {
                return (nil, 1)
            }
            return (.character(character), length)
        }
    }
}
