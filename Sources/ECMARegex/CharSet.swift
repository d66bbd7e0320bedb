// Code point sets used by the matcher: character classes, `.`, `\d`, `\p{…}`, …

/// A set of code points, described as sorted disjoint ranges plus Unicode
/// property predicates, optionally complemented.
///
/// Code points are `UInt32` rather than `Unicode.Scalar` because ECMA-262
/// patterns may mention lone surrogates (`\uD800`), which are valid pattern
/// syntax but can never occur in a Swift `String`, so they simply never match.
struct CharSet: Sendable {
    /// Sorted, non-overlapping, non-adjacent ranges.
    private(set) var ranges: [ClosedRange<UInt32>]
    /// A code point is in the set if it is in `ranges` or satisfies any of these.
    private(set) var properties: [PropertyTest]
    /// Complement of the union above (`[^…]`).
    var negated: Bool

    init(ranges: [ClosedRange<UInt32>] = [], properties: [PropertyTest] = [], negated: Bool = false) {
        self.ranges = CharSet.normalize(ranges)
        self.properties = properties
        self.negated = negated
    }

    init(_ scalar: UInt32) {
        self.init(ranges: [scalar...scalar])
    }

    /// Adds every member of `other` to this set (requires `canAbsorb(other)`).
    mutating func formUnion(_ other: CharSet) {
        precondition(canAbsorb(other))
        if other.negated {
            ranges = CharSet.normalize(ranges + CharSet.complement(other.ranges))
        } else {
            ranges = CharSet.normalize(ranges + other.ranges)
            properties += other.properties
        }
    }

    /// Whether `formUnion(other)` is exact: a negated set with properties
    /// (like `[^\p{L}]`) cannot be folded into ranges.
    func canAbsorb(_ other: CharSet) -> Bool {
        !negated && !(other.negated && !other.properties.isEmpty)
    }

    @inline(__always)
    func contains(_ c: UInt32) -> Bool {
        var hit = rangesContain(c)
        if !hit && !properties.isEmpty, let scalar = Unicode.Scalar(c) {
            for p in properties where p.matches(scalar) {
                hit = true
                break
            }
        }
        return hit != negated
    }

    @inline(__always)
    private func rangesContain(_ c: UInt32) -> Bool {
        if ranges.count <= 8 {
            for r in ranges {
                if c < r.lowerBound { return false }
                if c <= r.upperBound { return true }
            }
            return false
        }
        var lo = 0
        var hi = ranges.count
        while lo < hi {
            let mid = (lo + hi) / 2
            let r = ranges[mid]
            if c < r.lowerBound { hi = mid } else if c > r.upperBound { lo = mid + 1 } else { return true }
        }
        return false
    }

    static func normalize(_ input: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        if input.count < 2 { return input }
        let sorted = input.sorted { $0.lowerBound < $1.lowerBound }
        var out: [ClosedRange<UInt32>] = []
        out.reserveCapacity(sorted.count)
        for r in sorted {
            if let last = out.last, r.lowerBound <= last.upperBound &+ 1 {
                out[out.count - 1] = last.lowerBound...max(last.upperBound, r.upperBound)
            } else {
                out.append(r)
            }
        }
        return out
    }

    static func complement(_ ranges: [ClosedRange<UInt32>]) -> [ClosedRange<UInt32>] {
        var out: [ClosedRange<UInt32>] = []
        var next: UInt32 = 0
        for r in normalize(ranges) {
            if r.lowerBound > next { out.append(next...(r.lowerBound - 1)) }
            next = r.upperBound + 1
        }
        if next <= 0x10FFFF { out.append(next...0x10FFFF) }
        return out
    }

    // MARK: Predefined sets (ECMA-262 semantics)

    static let digitRanges: [ClosedRange<UInt32>] = [0x30...0x39]
    static let wordRanges: [ClosedRange<UInt32>] = [0x30...0x39, 0x41...0x5A, 0x5F...0x5F, 0x61...0x7A]
    static let lineTerminatorRanges: [ClosedRange<UInt32>] = [0x0A...0x0A, 0x0D...0x0D, 0x2028...0x2029]
    /// ECMA-262 WhiteSpace (TAB, VT, FF, SP, NBSP, ZWNBSP, Zs) ∪ LineTerminator.
    /// Deliberately excludes U+0085 (NEL) and U+180E.
    static let spaceRanges: [ClosedRange<UInt32>] = normalize([
        0x09...0x0D, 0x20...0x20, 0xA0...0xA0, 0x1680...0x1680, 0x2000...0x200A,
        0x2028...0x2029, 0x202F...0x202F, 0x205F...0x205F, 0x3000...0x3000, 0xFEFF...0xFEFF,
    ])

    static let digit = CharSet(ranges: digitRanges)
    static let nonDigit = CharSet(ranges: complement(digitRanges))
    static let word = CharSet(ranges: wordRanges)
    static let nonWord = CharSet(ranges: complement(wordRanges))
    static let space = CharSet(ranges: spaceRanges)
    static let nonSpace = CharSet(ranges: complement(spaceRanges))
    /// `.` without the `s` flag: everything but line terminators.
    static let dot = CharSet(ranges: complement(lineTerminatorRanges))
    /// `.` with the `s` flag.
    static let all = CharSet(ranges: [0...0x10FFFF])

    @inline(__always)
    static func isWordChar(_ c: UInt32) -> Bool {
        (c >= 0x61 && c <= 0x7A) || (c >= 0x41 && c <= 0x5A) || (c >= 0x30 && c <= 0x39) || c == 0x5F
    }

    @inline(__always)
    static func isLineTerminator(_ c: UInt32) -> Bool {
        c == 0x0A || c == 0x0D || c == 0x2028 || c == 0x2029
    }
}
