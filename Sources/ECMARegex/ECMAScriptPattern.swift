// Public API: ECMA-262 regular expressions (with the `u` flag) as used by
// JSON Schema `pattern` and `patternProperties`.
//
// Implementation: a parser for the ECMA-262 u-mode grammar (Parser.swift), a
// compiler to a small backtracking VM implementing the spec's matcher
// semantics (Matcher.swift), and Unicode property lookups
// (UnicodeProperties.swift). The stdlib `Regex` is not used for matching: it
// has no lookbehind and differs from ECMA-262 in many details; it is only
// consulted for Script/Script_Extensions data. Matching is per Unicode scalar
// (code point), never per grapheme cluster.

/// An ECMA-262 regular expression (as used by JSON Schema `pattern`), compiled once.
///
/// The pattern is interpreted as if written `new RegExp(source, "u")`: strict
/// u-mode syntax (no Annex B leniency), code point matching, `\d`/`\w`/`\b`
/// ASCII-only, `\s` per ECMA-262 WhiteSpace + LineTerminator, `.` excluding
/// line terminators, `^`/`$` anchored to the whole input.
///
/// Values are immutable and safe to share between threads.
public struct ECMAScriptPattern: Sendable {
    /// The pattern text as given to `init`.
    public let source: String

    private let program: Program
    private let bytecode: Bytecode

    /// Parses and compiles `source`.
    ///
    /// - Throws: `ECMAScriptPatternError` with kind `.invalid` if `source` is
    ///   not a valid ECMA-262 pattern under the `u` flag, or `.unsupported`
    ///   if it is valid but uses a feature this implementation cannot honour
    ///   exactly (see `ECMAScriptPatternError.Kind.unsupported`).
    public init(_ source: String) throws(ECMAScriptPatternError) {
        self.source = source
        var parser = Parser(source)
        self.program = try parser.parse()
        self.bytecode = Bytecode(program)
    }

    /// True when the pattern matches anywhere in `text` (unanchored search,
    /// like `RegExp.prototype.test`), with no limit on the work it may take.
    ///
    /// Matching is a backtracking search with ECMA-262 semantics, so like in
    /// JavaScript, pathological patterns such as `(a+)+b` take exponential
    /// time on some inputs: use this only for patterns you wrote yourself, and
    /// ``matches(_:budget:)`` for anyone else's. Memory use is on the heap; the
    /// native stack does not grow with the input length.
    public func matches(_ text: String) -> Bool {
        var unlimited = MatchBudget(steps: .max)
        return matches(text, budget: &unlimited) == .match
    }

    /// Searches `text` like ``matches(_:)``, spending at most `budget`'s remaining steps, and
    /// takes from `budget` what the search spent, so that one budget can cover many matches.
    ///
    /// A step is one instruction of the matcher, one code point consumed or given back, or one
    /// start position tried: work linear in the input costs a few steps per code point, while
    /// catastrophic backtracking (`^(a+)+$` against forty `a`s and a `!`) runs out.
    public func matches(_ text: String, budget: inout MatchBudget) -> MatchResult {
        guard budget.steps > 0 else { return .outOfSteps }
        var input = ContiguousArray<UInt32>()
        input.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars { input.append(scalar.value) }
        var state = MatchState(input: input, program: program, bytecode: bytecode, steps: budget.steps)
        let found = state.search()
        budget.steps = max(0, state.stepsLeft)
        if state.outOfSteps { return .outOfSteps }
        return found ? .match : .noMatch
    }
}

/// How much work matching may still do: see ``ECMAScriptPattern/matches(_:budget:)``.
public struct MatchBudget: Sendable, Hashable {
    /// Steps left. Each match takes what it spent.
    public var steps: Int

    /// A budget of `steps` steps.
    public init(steps: Int) {
        self.steps = steps
    }
}

/// The outcome of a budgeted match.
public enum MatchResult: Sendable, Hashable {
    /// The pattern matches somewhere in the text.
    case match
    /// The pattern matches nowhere in the text.
    case noMatch
    /// The budget ran out before the search could tell: the text is too expensive to check
    /// against this pattern.
    case outOfSteps
}

/// Why a pattern could not be compiled.
public struct ECMAScriptPatternError: Error, Sendable, CustomStringConvertible {
    /// Category of the problem.
    public enum Kind: Sendable {
        /// Not a valid ECMA-262 pattern (a JavaScript engine would throw a
        /// `SyntaxError` for `new RegExp(source, "u")`).
        case invalid
        /// Valid ECMA-262, but this implementation cannot honour its meaning
        /// exactly: the `(?i:…)` modifier (needs Unicode case folding), the
        /// `Extended_Pictographic` property, Script values unknown to the
        /// Swift runtime's Unicode tables, and patterns beyond its limits (over
        /// 32,768 code points long, or groups nested over 100 deep).
        case unsupported
    }

    /// Whether the pattern is invalid or merely unsupported.
    public let kind: Kind
    /// Human readable explanation, e.g. "unterminated character class".
    public let message: String
    /// Offset in Unicode scalars into the source where the problem is.
    public let offset: Int

    /// Creates an error value.
    public init(kind: Kind, message: String, offset: Int) {
        self.kind = kind
        self.message = message
        self.offset = offset
    }

    /// E.g. `invalid regular expression at offset 3: nothing to repeat`.
    public var description: String {
        let what = kind == .invalid ? "invalid regular expression" : "unsupported regular expression"
        return "\(what) at offset \(offset): \(message)"
    }
}
