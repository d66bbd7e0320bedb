import FleetJSON

extension Evaluator {
    /// Values longer than this are cut short in messages.
    static let quotedLength = 60

    /// A value as JSON text for a message, cut short when long; empty for a secret.
    static func quoted(_ value: JSONValue, secret: Bool, prefix: String = "") -> String {
        guard !secret else { return "" }
        let text = value.serialized(maximumLength: quotedLength * 4 + 4)
        guard text.unicodeScalars.count > quotedLength else { return prefix + text }
        return prefix + String(String.UnicodeScalarView(text.unicodeScalars.prefix(quotedLength))) + "…"
    }

    /// ` (got "5")`, or nothing for a secret.
    static func got(_ value: JSONValue, secret: Bool) -> String {
        secret ? "" : " (got \(quoted(value, secret: false)))"
    }

    /// `"1", "2" or "3"`, at most ten values; a secret's allowed values are not secret (they
    /// are in the metadata every admin reads).
    static func list(_ values: [JSONValue], secret: Bool) -> String {
        let shown = values.prefix(10).map { quoted($0, secret: false) }
        let more = values.count > 10 ? ", … (\(values.count) values)" : ""
        return shown.joined(separator: ", ") + more
    }

    /// `1 item`, `3 items`.
    static func plural(_ count: Int, _ singular: String, _ pluralForm: String? = nil) -> String {
        "\(count) \(count == 1 ? singular : pluralForm ?? singular + "s")"
    }
}

extension NumericBound {
    var keyword: String {
        switch kind {
        case .minimum: "minimum"
        case .exclusiveMinimum: "exclusiveMinimum"
        case .maximum: "maximum"
        case .exclusiveMaximum: "exclusiveMaximum"
        }
    }

    /// `>= 10`, `< 5`.
    var phrase: String {
        switch kind {
        case .minimum: ">= \(limit)"
        case .exclusiveMinimum: "> \(limit)"
        case .maximum: "<= \(limit)"
        case .exclusiveMaximum: "< \(limit)"
        }
    }

    func admits(_ number: JSONNumber) -> Bool {
        let order = Self.compare(number, limit)
        switch kind {
        case .minimum: return order >= 0
        case .exclusiveMinimum: return order > 0
        case .maximum: return order <= 0
        case .exclusiveMaximum: return order < 0
        }
    }

    /// -1, 0 or 1 as `a` is less than, equal to or greater than `b`; exact for every pair,
    /// integers of any size included.
    static func compare(_ a: JSONNumber, _ b: JSONNumber) -> Int {
        switch (a, b) {
        case (.integer(let x), .integer(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.double(let x), .double(let y)): return x < y ? -1 : (x > y ? 1 : 0)
        case (.double(let x), _): return -compare(b, x)
        case (_, .double(let y)): return compare(a, y)
        default:
            // Both whole: compare exactly.
            let x = a.exactInteger!, y = b.exactInteger!
            return x < y ? -1 : (y < x ? 1 : 0)
        }
    }

    /// Compares a whole number with a double exactly: against the whole numbers on either side
    /// of the double when it has a fraction.
    private static func compare(_ integer: JSONNumber, _ double: Double) -> Int {
        guard let whole = integer.exactInteger, let below = BigInteger(exactly: double.rounded(.down)) else {
            return double > 0 ? -1 : 1  // an infinity (the reader makes none)
        }
        if whole < below { return -1 }
        if below < whole { return 1 }  // whole >= floor + 1 >= double
        return double > double.rounded(.down) ? -1 : 0
    }

    /// Whether `number` is an integer multiple of `divisor` (> 0).
    ///
    /// Integers are checked exactly. Otherwise the quotient is computed in binary floating point
    /// and accepted within a few units in the last place of a whole number, so that `0.0075` is
    /// a multiple of `0.0001` although neither has an exact binary form. A quotient beyond the
    /// range of `Double` falls back to the remainder.
    static func isMultiple(_ number: JSONNumber, of divisor: JSONNumber) -> Bool {
        if case .integer(let value) = number, case .integer(let step) = divisor {
            return value % step == 0
        }
        if let value = number.exactInteger, let step = divisor.exactInteger {
            return value.magnitudeRemainder(dividingBy: step).isZero
        }
        let value = number.doubleValue
        let step = divisor.doubleValue
        let quotient = value / step
        guard quotient.isFinite else { return value.truncatingRemainder(dividingBy: step) == 0 }
        let nearest = quotient.rounded()
        return abs(quotient - nearest) <= max(1, abs(quotient)) * 1e-12
    }
}
