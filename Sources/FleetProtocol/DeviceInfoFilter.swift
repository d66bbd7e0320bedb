import ECMARegex
import FleetJSON

/// One condition on a device's facts (`--where os.version=12`, `?where=…`, a dynamic group's
/// query): the fact with a dotted name equals (`=`) or differs from (`!=`) a value, or matches
/// (`~`) or does not match (`!~`) an ECMA-262 regular expression (searched anywhere in the
/// fact, as JSON Schema's `pattern`: anchor it with `^…$` to match the whole fact). A device
/// without the fact matches only the negated forms.
public struct DeviceInfoFilter: Sendable, Hashable, CustomStringConvertible {
    /// How the fact is compared with ``value``.
    public enum Comparison: String, Sendable, CaseIterable {
        /// The fact is the value.
        case equals = "="
        /// The fact is not the value, or the device does not have it.
        case differs = "!="
        /// The fact matches the regular expression.
        case matches = "~"
        /// The fact does not match the regular expression, or the device does not have it.
        case doesNotMatch = "!~"

        /// Whether a device without the fact matches.
        public var isNegated: Bool { self == .differs || self == .doesNotMatch }
    }

    /// The most steps one regular expression may take on one fact: a fact is at most 256
    /// characters, which a pattern that does not backtrack reads in a few thousand steps. One
    /// that backtracks catastrophically on a device's fact stalls nothing: the condition is
    /// false, `~` and `!~` alike, so that a device cannot meet a `!~` by making the match too
    /// expensive to decide.
    public static let matchBudget = 20_000
    /// The longest condition, in characters.
    public static let maximumLength = 1024

    /// The fact's dotted name: `os.version`, `apps.kiosk.version`.
    public var name: String
    /// The value to compare with, as ``DeviceInfo/fact(_:in:)`` shows the fact (integers in
    /// decimal), or the regular expression.
    public var value: String
    /// How the fact is compared.
    public var comparison: Comparison
    private let pattern: ECMAScriptPattern?

    /// Creates an `=` or `!=` condition.
    public init(name: String, value: String, negated: Bool = false) {
        self.name = name
        self.value = value
        self.comparison = negated ? .differs : .equals
        self.pattern = nil
    }

    /// Whether a device without the fact matches (`!=`, `!~`).
    public var negated: Bool { comparison.isNegated }

    /// Reads `NAME=VALUE`, `NAME!=VALUE`, `NAME~REGEX` or `NAME!~REGEX`.
    ///
    /// - Throws: ``DeviceInfoFilterError`` saying what is wrong: no operator, an empty or
    ///   malformed name, a regular expression that does not compile (with its offset).
    public init(parsing text: String) throws(DeviceInfoFilterError) {
        guard text.unicodeScalars.count <= Self.maximumLength else {
            throw DeviceInfoFilterError(text: text, "is longer than \(Self.maximumLength) characters")
        }
        guard let operatorIndex = text.firstIndex(where: { $0 == "=" || $0 == "~" }) else {
            throw DeviceInfoFilterError(text: text, "must be NAME=VALUE, NAME!=VALUE, NAME~REGEX or NAME!~REGEX")
        }
        var name = text[..<operatorIndex]
        let negated = name.hasSuffix("!")
        if negated { name = name.dropLast() }
        guard !name.isEmpty, !name.hasPrefix("."), !name.hasSuffix("."), !name.contains(".."), !name.contains("!") else {
            throw DeviceInfoFilterError(text: text, "needs a fact's dotted name before the operator, such as os.version")
        }
        let value = String(text[text.index(after: operatorIndex)...])
        self.name = String(name)
        self.value = value
        if text[operatorIndex] == "=" {
            comparison = negated ? .differs : .equals
            pattern = nil
        } else {
            comparison = negated ? .doesNotMatch : .matches
            do {
                pattern = try ECMAScriptPattern(value)
            } catch {
                throw DeviceInfoFilterError(text: text, "holds an \(error)")
            }
        }
    }

    /// Reads a condition as ``init(parsing:)`` does; `nil` for anything it refuses.
    public init?(_ text: String) {
        guard let parsed = try? DeviceInfoFilter(parsing: text) else { return nil }
        self = parsed
    }

    /// Whether a device with these facts matches.
    public func matches(_ info: JSONObject) -> Bool {
        guard let fact = DeviceInfo.fact(name, in: info) else { return negated }
        switch comparison {
        case .equals: return fact == value
        case .differs: return fact != value
        case .matches, .doesNotMatch:
            var budget = MatchBudget(steps: Self.matchBudget)
            switch pattern?.matches(fact, budget: &budget) {
            case .match: return comparison == .matches
            case .noMatch: return comparison == .doesNotMatch
            case .outOfSteps, nil: return false
            }
        }
    }

    /// Whether a device with these facts matches every condition (every device, with none).
    public static func all(_ filters: [DeviceInfoFilter], match info: JSONObject) -> Bool {
        filters.allSatisfy { $0.matches(info) }
    }

    /// `NAME=VALUE`, `NAME!=VALUE`, `NAME~REGEX` or `NAME!~REGEX`, as ``init(parsing:)`` reads it.
    public var description: String { name + comparison.rawValue + value }

    public static func == (left: DeviceInfoFilter, right: DeviceInfoFilter) -> Bool {
        left.name == right.name && left.comparison == right.comparison && left.value == right.value
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(name)
        hasher.combine(comparison)
        hasher.combine(value)
    }
}

/// A condition on facts that could not be read: `os.version 12: must be NAME=VALUE, …`.
public struct DeviceInfoFilterError: Error, Sendable, CustomStringConvertible {
    /// The condition as given.
    public let text: String
    /// What is wrong with it.
    public let reason: String

    /// Creates an error about `text`.
    public init(text: String, _ reason: String) {
        self.text = text
        self.reason = reason
    }

    /// `condition "os.version 12" must be NAME=VALUE, …`.
    public var description: String { "condition \"\(TerminalText.escaped(text))\" \(reason)" }
}
