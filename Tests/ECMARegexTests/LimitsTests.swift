import ECMARegex
import Testing

/// Matching has a step budget and compiling has caps, so that no pattern or text an admin, a
/// device or a local writer sends can pin a core or overflow a stack.
@Suite("Limits: step budget, nesting and size caps")
struct LimitsTests {
    /// Forty `a`s and a `!`: `^(a+)+$` backtracks through 2^40 ways to split them.
    static let attack = String(repeating: "a", count: 40) + "!"

    @Test("catastrophic backtracking runs out of steps instead of running for hours")
    func catastrophicBacktracking() throws {
        let pattern = try ECMAScriptPattern("^(a+)+$")
        var budget = MatchBudget(steps: 1_000_000)
        #expect(pattern.matches(Self.attack, budget: &budget) == .outOfSteps)
        #expect(budget.steps == 0)
        // Other classic shapes.
        for source in ["^(a|aa)*$", "^(a*)*$", "(a|aa)+$", "^(\\w+\\s?)*$"] {
            var other = MatchBudget(steps: 1_000_000)
            let text = source.contains("\\w") ? String(repeating: "word ", count: 12) + "!" : Self.attack
            #expect(try ECMAScriptPattern(source).matches(text, budget: &other) == .outOfSteps, "\(source)")
        }
    }

    @Test("the same pattern on text it handles in linear time stays far inside the budget")
    func linearWork() throws {
        let pattern = try ECMAScriptPattern("^(a+)+$")
        var budget = MatchBudget(steps: 1_000_000)
        #expect(pattern.matches(String(repeating: "a", count: 10_000), budget: &budget) == .match)
        #expect(budget.steps > 900_000)
        var miss = MatchBudget(steps: 1_000_000)
        #expect(try ECMAScriptPattern("^[a-z]+$").matches(String(repeating: "a", count: 10_000) + "!", budget: &miss) == .noMatch)
        #expect(miss.steps > 900_000)
    }

    @Test("one budget covers several matches; an empty one answers at once")
    func sharedBudget() throws {
        let pattern = try ECMAScriptPattern("^[0-9]{3}$")
        var budget = MatchBudget(steps: 40)
        #expect(pattern.matches("123", budget: &budget) == .match)
        let afterOne = budget.steps
        #expect(afterOne < 40 && afterOne > 0)
        while budget.steps > 0 { _ = pattern.matches("123", budget: &budget) }
        #expect(pattern.matches("123", budget: &budget) == .outOfSteps)
        // The unbudgeted form still answers for patterns that are one's own.
        #expect(pattern.matches("123"))
    }

    @Test("lookarounds and backreferences spend from the same budget")
    func nestedRuns() throws {
        var budget = MatchBudget(steps: 100_000)
        #expect(try ECMAScriptPattern("^(?=(a+)+$)a").matches(Self.attack, budget: &budget) == .outOfSteps)
        var references = MatchBudget(steps: 1_000_000)
        #expect(try ECMAScriptPattern("^(a+)\\1$").matches(String(repeating: "a", count: 2_000), budget: &references) == .match)
    }

    @Test("work that fails early is charged too: a long minimum that is never met, backreferences that mismatch")
    func failingWorkIsCharged() throws {
        // Runs of 1,999 digits against a minimum of 2,000: each start position compares ~2,000.
        let text = String(repeating: String(repeating: "7", count: 1_999) + "x", count: 50)
        var budget = MatchBudget(steps: 1_000_000)
        #expect(try ECMAScriptPattern("[0-9]{2000}").matches(text, budget: &budget) == .outOfSteps)
        var references = MatchBudget(steps: 100_000)
        let repeated = String(repeating: "ab", count: 1_000)
        #expect(try ECMAScriptPattern("(a[ab]*)\\1x").matches(repeated + repeated + "y", budget: &references) == .outOfSteps)
    }

    @Test("groups nested more than 100 deep are refused as unsupported, not a crash")
    func nestingCap() throws {
        let deepest = String(repeating: "(", count: 100) + "a" + String(repeating: ")", count: 100)
        #expect(try ECMAScriptPattern(deepest).matches("a"))
        let tooDeep = String(repeating: "(", count: 101) + "a" + String(repeating: ")", count: 101)
        #expect {
            try ECMAScriptPattern(tooDeep)
        } throws: { error in
            let error = error as? ECMAScriptPatternError
            return error?.kind == .unsupported && error?.description.contains("groups nest more than 100 deep") == true
        }
        // About 200,000 opening parentheses overflowed the stack before the cap.
        let attack = String(repeating: "(", count: 200_000)
        #expect(throws: ECMAScriptPatternError.self) { try ECMAScriptPattern(attack) }
        let lookarounds = String(repeating: "(?=", count: 150) + "a" + String(repeating: ")", count: 150)
        #expect(throws: ECMAScriptPatternError.self) { try ECMAScriptPattern(lookarounds) }
    }

    @Test("patterns over 32,768 code points are refused")
    func sizeCap() throws {
        #expect(try ECMAScriptPattern(String(repeating: "a", count: 32_768)).matches(String(repeating: "a", count: 32_768)))
        #expect {
            try ECMAScriptPattern(String(repeating: "a", count: 32_769))
        } throws: { error in
            (error as? ECMAScriptPatternError)?.description.contains("at most 32768 are allowed") == true
        }
    }
}
