/// An integer of any size, exact: what a JSON integer beyond 64 bits reads as, so that the
/// validator compares it exactly (`9223372036854775808` is greater than `maximum:
/// 9223372036854775807`, which a `Double` cannot tell).
///
/// JSON numbers that overflow a `Double` are refused by the reader, so these integers have at
/// most 309 digits and every operation here is cheap. The type does only what comparing,
/// printing and `multipleOf` need.
public struct BigInteger: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// True for a negative value; zero is never negative.
    public let isNegative: Bool
    /// The magnitude in base 2^32, least significant limb first, without leading zero limbs
    /// (zero has none).
    private let limbs: [UInt32]

    private init(isNegative: Bool, limbs: [UInt32]) {
        var trimmed = limbs
        while trimmed.last == 0 { trimmed.removeLast() }
        self.isNegative = isNegative && !trimmed.isEmpty
        self.limbs = trimmed
    }

    /// Reads optional `-` and decimal digits (nothing else); nil for any other text.
    public init?(decimal text: some StringProtocol) {
        var digits = Substring(text)
        let negative = digits.first == "-"
        if negative { digits = digits.dropFirst() }
        guard !digits.isEmpty else { return nil }
        var limbs: [UInt32] = []
        for character in digits.utf8 {
            guard character >= UInt8(ascii: "0"), character <= UInt8(ascii: "9") else { return nil }
            Self.multiplyAdd(&limbs, by: 10, adding: UInt32(character - UInt8(ascii: "0")))
        }
        self.init(isNegative: negative, limbs: limbs)
    }

    /// The value of `value`.
    public init(_ value: Int64) {
        let magnitude = value.magnitude
        self.init(isNegative: value < 0, limbs: [UInt32(truncatingIfNeeded: magnitude), UInt32(truncatingIfNeeded: magnitude >> 32)])
    }

    /// The exact value of `value`, when it is a finite whole number.
    public init?(exactly value: Double) {
        guard value.isFinite, value.rounded(.towardZero) == value else { return nil }
        let magnitude = value.magnitude
        guard magnitude >= 0x1p63 else {
            self.init(Int64(value))
            return
        }
        // magnitude = significand × 2^shift, with a 53-bit whole significand.
        let significand = UInt64(magnitude.significandBitPattern) | (1 << 52)
        let shift = Int(magnitude.exponent) - 52
        var limbs = [UInt32(truncatingIfNeeded: significand), UInt32(truncatingIfNeeded: significand >> 32)]
        Self.shiftLeft(&limbs, by: shift)
        self.init(isNegative: value < 0, limbs: limbs)
    }

    /// The value, when it fits in `Int64`.
    public var int64Value: Int64? {
        guard limbs.count <= 2 else { return nil }
        let magnitude = limbs.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (32 * UInt64($1.offset)) }
        if isNegative {
            if magnitude == UInt64(Int64.max) + 1 { return .min }
            return magnitude <= UInt64(Int64.max) ? -Int64(magnitude) : nil
        }
        return magnitude <= UInt64(Int64.max) ? Int64(magnitude) : nil
    }

    /// The nearest `Double` (correctly rounded; infinite beyond its range).
    public var doubleValue: Double {
        Double(description) ?? (isNegative ? -.infinity : .infinity)
    }

    /// Whether the value is zero.
    public var isZero: Bool { limbs.isEmpty }

    /// Decimal digits, with `-` when negative.
    public var description: String {
        guard !isZero else { return "0" }
        var remaining = limbs
        var chunks: [UInt32] = []  // base 10^9, least significant first
        while !remaining.isEmpty {
            chunks.append(Self.divide(&remaining, by: 1_000_000_000))
        }
        var text = isNegative ? "-" : ""
        text += String(chunks.removeLast())
        for chunk in chunks.reversed() {
            let digits = String(chunk)
            text += String(repeating: "0", count: 9 - digits.count) + digits
        }
        return text
    }

    /// The remainder of the magnitudes: zero exactly when `self` is a multiple of `divisor`.
    /// `divisor` must not be zero.
    public func magnitudeRemainder(dividingBy divisor: BigInteger) -> BigInteger {
        precondition(!divisor.isZero, "division by zero")
        // Shift-and-subtract, one bit at a time: at most about 1,024 bits here.
        var remainder: [UInt32] = []
        for bit in stride(from: limbs.count * 32 - 1, through: 0, by: -1) {
            Self.shiftLeft(&remainder, by: 1)
            if limbs[bit / 32] >> (bit % 32) & 1 == 1 {
                if remainder.isEmpty { remainder = [1] } else { remainder[0] |= 1 }
            }
            if Self.compareMagnitudes(remainder, divisor.limbs) >= 0 {
                Self.subtract(&remainder, divisor.limbs)
            }
        }
        return BigInteger(isNegative: false, limbs: remainder)
    }

    public static func < (lhs: BigInteger, rhs: BigInteger) -> Bool {
        if lhs.isNegative != rhs.isNegative { return lhs.isNegative }
        let order = compareMagnitudes(lhs.limbs, rhs.limbs)
        return lhs.isNegative ? order > 0 : order < 0
    }

    // MARK: - Magnitude arithmetic (base 2^32, least significant first)

    private static func multiplyAdd(_ limbs: inout [UInt32], by factor: UInt32, adding addend: UInt32) {
        var carry = UInt64(addend)
        for index in limbs.indices {
            let product = UInt64(limbs[index]) * UInt64(factor) + carry
            limbs[index] = UInt32(truncatingIfNeeded: product)
            carry = product >> 32
        }
        if carry != 0 { limbs.append(UInt32(carry)) }
    }

    /// Divides in place by a small divisor; returns the remainder and trims leading zeros.
    private static func divide(_ limbs: inout [UInt32], by divisor: UInt32) -> UInt32 {
        var remainder: UInt64 = 0
        for index in limbs.indices.reversed() {
            let current = remainder << 32 | UInt64(limbs[index])
            limbs[index] = UInt32(current / UInt64(divisor))
            remainder = current % UInt64(divisor)
        }
        while limbs.last == 0 { limbs.removeLast() }
        return UInt32(remainder)
    }

    private static func shiftLeft(_ limbs: inout [UInt32], by shift: Int) {
        guard shift > 0, !limbs.isEmpty else { return }
        let whole = shift / 32
        let bits = shift % 32
        if bits > 0 {
            var carry: UInt32 = 0
            for index in limbs.indices {
                let limb = limbs[index]
                limbs[index] = limb << bits | carry
                carry = limb >> (32 - bits)
            }
            if carry != 0 { limbs.append(carry) }
        }
        limbs.insert(contentsOf: repeatElement(0, count: whole), at: 0)
    }

    private static func compareMagnitudes(_ a: [UInt32], _ b: [UInt32]) -> Int {
        let a = a.last == 0 ? Array(a.reversed().drop { $0 == 0 }.reversed()) : a
        if a.count != b.count { return a.count < b.count ? -1 : 1 }
        for index in a.indices.reversed() where a[index] != b[index] {
            return a[index] < b[index] ? -1 : 1
        }
        return 0
    }

    /// `a -= b`, for `a >= b`.
    private static func subtract(_ a: inout [UInt32], _ b: [UInt32]) {
        var borrow: Int64 = 0
        for index in a.indices {
            var difference = Int64(a[index]) - borrow - (index < b.count ? Int64(b[index]) : 0)
            borrow = 0
            if difference < 0 {
                difference += 1 << 32
                borrow = 1
            }
            a[index] = UInt32(difference)
        }
        while a.last == 0 { a.removeLast() }
    }
}
