import ECMARegex
import Testing

private func m(_ pattern: String, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) -> Bool {
    do {
        return try ECMAScriptPattern(pattern).matches(text)
    } catch {
        Issue.record("pattern \(pattern) failed to compile: \(error)", sourceLocation: sourceLocation)
        return false
    }
}

private func errorKind(_ pattern: String) -> ECMAScriptPatternError.Kind? {
    do {
        _ = try ECMAScriptPattern(pattern)
        return nil
    } catch {
        return error.kind
    }
}

@Suite struct CharacterClassEscapes {
    @Test func digitIsASCIIOnly() {
        #expect(m(#"^\d+$"#, "0123456789"))
        #expect(!m(#"^\d$"#, "\u{07C0}"))  // NKO DIGIT ZERO
        #expect(!m(#"^\d$"#, "৪"))
        #expect(m(#"^\D$"#, "৪"))
    }

    @Test func wordIsASCIIOnly() {
        #expect(m(#"^\w+$"#, "azAZ09_"))
        #expect(!m(#"^\w$"#, "é"))
        #expect(m(#"^\W$"#, "é"))
    }

    @Test func spaceFollowsECMA() {
        for s in [
            "\t", "\u{0B}", "\u{0C}", " ", "\u{A0}", "\u{FEFF}", "\u{1680}", "\u{2000}", "\u{200A}",
            "\u{202F}", "\u{205F}", "\u{3000}", "\n", "\r", "\u{2028}", "\u{2029}",
        ] {
            #expect(m(#"^\s$"#, s), "\(s.unicodeScalars.first!.value)")
            #expect(!m(#"^\S$"#, s))
        }
        #expect(!m(#"^\s$"#, "\u{85}"))  // NEL is not ECMA whitespace
        #expect(!m(#"^\s$"#, "\u{180E}"))
        #expect(m(#"^\S$"#, "\u{85}"))
    }

    @Test func escapesInsideClasses() {
        #expect(m(#"^[\d\s-]+$"#, "12 - 3"))
        #expect(!m(#"^[\d\s-]+$"#, "12a"))
        #expect(m(#"^[\b]$"#, "\u{08}"))
        #expect(m(#"^[\-]$"#, "-"))
        #expect(m(#"^[^\W\d]$"#, "a"))
        #expect(!m(#"^[^\W\d]$"#, "1"))
        #expect(m(#"^[\D]$"#, "x"))
    }
}

@Suite struct Assertions {
    @Test func dollarDoesNotMatchBeforeTrailingNewline() {
        #expect(m("^abc$", "abc"))
        #expect(!m("^abc$", "abc\n"))
        #expect(!m("^abc$", "x\nabc"))
    }

    @Test func wordBoundaryIsASCII() {
        #expect(m(#"\bfoo\b"#, "a foo b"))
        #expect(!m(#"\bfoo\b"#, "afoo"))
        #expect(m(#"\bfoo\b"#, "éfooé"))  // é is not a word character
        #expect(m(#"\Boo\B"#, "foox"))
    }

    @Test func lookaround() {
        #expect(m(#"^(?=.*\d)(?=.*[a-z]).{6,}$"#, "abc123"))
        #expect(!m(#"^(?=.*\d)(?=.*[a-z]).{6,}$"#, "abcdef"))
        #expect(m(#"^((?!ab).)*$"#, "aacb"))
        #expect(!m(#"^((?!ab).)*$"#, "cab"))
        #expect(m(#"(?<=\$)\d+"#, "cost: $42"))
        #expect(!m(#"(?<=\$)\d+"#, "cost: 42"))
        #expect(m(#"(?<!\$)\b\d+"#, "cost: 42"))
        #expect(!m(#"^\$(?<!\$)\d+$"#, "$42"))
        // Lookbehind matches right to left: the greedy \d+ in front takes the most.
        #expect(m(#"(?<=(\d+)(\d+))$"#, "1053"))
        #expect(m(#"(?<=\1(a))b"#, "aab"))  // backreference evaluated after the group, backwards
        #expect(!m(#"^(?<=\1(a))b"#, "ab"))
    }
}

@Suite struct DotAndCodePoints {
    @Test func dotExcludesLineTerminators() {
        #expect(m("^.$", "a"))
        for t in ["\n", "\r", "\u{2028}", "\u{2029}"] { #expect(!m("^.$", t)) }
        #expect(m("^.$", "\u{85}"))
        #expect(m(#"^[\s\S]$"#, "\n"))
    }

    @Test func matchingIsPerCodePoint() {
        #expect(m("^.$", "🐲"))  // one code point, two UTF-16 units
        #expect(m("^.{2}$", "e\u{301}"))  // decomposed é: two scalars
        #expect(m("^.$", "\u{E9}"))
        #expect(!m("^.$", "e\u{301}"))
        #expect(m("^.{2}$", "🇦🇧"))  // flag = two regional indicators
        #expect(m("^🐲*$", "🐲🐲"))
        #expect(!m("^🐲*$", "🐉"))
    }

    @Test func unicodeEscapes() {
        #expect(m(#"^\u0041\x42\u{43}$"#, "ABC"))
        #expect(m(#"^\uD83D\uDC32$"#, "🐲"))  // surrogate pair combines
        #expect(m(#"^[\uD83D\uDC32]$"#, "🐲"))
        #expect(m(#"^\u{1F432}$"#, "🐲"))
        #expect(!m(#"\uD83D"#, "🐲"))  // lone surrogate never matches a scalar
        #expect(m(#"^\cJ\cj\0\t\n\v\f\r$"#, "\n\n\u{0}\t\n\u{B}\u{C}\r"))
        #expect(m(#"^[\u{10000}-\u{10FFFF}]$"#, "😀"))
        #expect(m(#"^\/\$\^\.\*\+\?\(\)\[\]\{\}\|\\$"#, #"/$^.*+?()[]{}|\"#))
    }
}

@Suite struct GroupsAndQuantifiers {
    @Test func quantifiers() {
        #expect(m("^[a-z0-9-]{1,63}$", "my-host-01"))
        #expect(!m("^[a-z0-9-]{1,63}$", String(repeating: "a", count: 64)))
        #expect(m("^a{2}$", "aa"))
        #expect(m("^a{2,}$", "aaaa"))
        #expect(!m("^a{2,3}$", "aaaa"))
        #expect(m("^x{2,3}?y", "xxy"))
        #expect(m("^(?:ab){2}$", "abab"))
        #expect(m("^a{0}b$", "b"))
        #expect(!m("a{99999999999999999999}", "aaa"))
    }

    @Test func backreferences() {
        #expect(m(#"^(a|b)\1$"#, "aa"))
        #expect(!m(#"^(a|b)\1$"#, "ab"))
        #expect(m(#"^(?<q>['"]).*\k<q>$"#, "'x'"))
        #expect(!m(#"^(?<q>['"]).*\k<q>$"#, "'x\""))
        #expect(m(#"^\1(a)$"#, "a"))  // forward reference matches empty
        #expect(m(#"^(?:(a)|b)\1$"#, "b"))  // non-participating group matches empty
        #expect(m(#"^(?:(a)|(b))+\1\2$"#, "abb"))  // captures reset per iteration
        #expect(!m(#"^(?:(a)|(b))+\1\2$"#, "abab"))
    }

    @Test func emptyIterationsTerminate() {
        #expect(m("^(a*)*$", "aaa"))
        #expect(m("^(a*?)+?$", "aaa"))
        #expect(m("^(?:a?)*b$", "b"))
        #expect(!m("^(a*)*$", "aab"))
    }

    @Test func lazyVersusGreedy() {
        #expect(m(#"^(a+?)\1$"#, "aaaa"))
        #expect(m(#"^<(.+?)>"#, "<a><b>"))
    }

    @Test func duplicateNamedGroupsInDifferentAlternatives() throws {
        let p = try ECMAScriptPattern(#"^(?:(?<d>\d{4})-\d{2}|\d{2}/(?<d>\d{4}))\k<d>$"#)
        #expect(p.matches("2024-012024"))
        #expect(p.matches("01/19991999"))
        #expect(!p.matches("01/19992024"))
        #expect(errorKind("(?<d>a)(?<d>b)") == .invalid)
        #expect(errorKind("(?<d>a)|(?:(?<d>b)(?<d>c))") == .invalid)
    }

    @Test func modifiers() {
        #expect(m("^(?s:.)$", "\n"))
        #expect(!m("^(?s:a)(?:.)$", "a\n"))
        #expect(m("^a(?m:$)", "a\nb"))
        #expect(m("(?-i:a)", "a"))
        #expect(errorKind("(?i:a)") == .unsupported)
        #expect(errorKind("(?ii:a)") == .invalid)
        #expect(errorKind("(?-:a)") == .invalid)
        #expect(errorKind("(?m-m:a)") == .invalid)
        #expect(errorKind("(?i)a") == .invalid)
    }

    @Test func longInputsDoNotExhaustTheStack() async {
        let p = try! ECMAScriptPattern("^(?:a|bc)*$")
        let text = String(repeating: "abc", count: 200_000)
        // Run on a cooperative-pool thread, which has a smaller stack than main.
        let result = await Task.detached { p.matches(text) }.value
        #expect(result)
    }
}

@Suite struct UnicodeProperties {
    @Test func generalCategory() {
        #expect(m(#"^\p{L}+$"#, "Hello"))
        #expect(m(#"^\p{Letter}+$"#, "πé"))
        #expect(!m(#"^\p{L}+$"#, "123"))
        #expect(m(#"^\p{Lu}\p{Ll}+$"#, "Hello"))
        #expect(m(#"^\p{gc=Nd}+$"#, "42৪"))
        #expect(m(#"^\p{General_Category=Decimal_Number}$"#, "৪"))
        #expect(m(#"^\p{digit}+$"#, "৪২"))
        #expect(m(#"^\P{L}+$"#, "123"))
        #expect(m(#"^[^\p{L}]+$"#, "123"))
        #expect(m(#"^[\p{L}\d]+$"#, "abc123"))
        #expect(m(#"^\p{Cn}$"#, "\u{0378}"))
    }

    @Test func binaryProperties() {
        #expect(m(#"^\p{Alphabetic}+$"#, "abcπ"))
        #expect(m(#"^\p{Emoji}$"#, "😀"))
        #expect(m(#"^\p{RI}{2}$"#, "🇦🇧"))
        #expect(m(#"^\p{ASCII}+$"#, "abc"))
        #expect(!m(#"^\p{ASCII}$"#, "é"))
        #expect(m(#"^\p{Any}$"#, "\u{10FFFF}"))
        #expect(m(#"^\p{White_Space}$"#, "\u{85}"))
        #expect(m(#"^\p{EComp}$"#, "#"))
    }

    @Test func scripts() {
        #expect(m(#"^\p{Script=Greek}+$"#, "αβγ"))
        #expect(!m(#"^\p{sc=Grek}$"#, "a"))
        #expect(m(#"^\p{scx=Deva}$"#, "\u{0964}"))  // DEVANAGARI DANDA: Common script, Devanagari extension
        #expect(!m(#"^\p{sc=Deva}$"#, "\u{0964}"))
        #expect(m(#"^\P{Script=Latin}$"#, "α"))
    }

    @Test func scriptsAreThreadSafe() async {
        let p = try! ECMAScriptPattern(#"^\p{Script=Greek}+$"#)
        let results = await withTaskGroup(of: Bool.self) { group in
            for i in 0..<64 { group.addTask { (0..<200).allSatisfy { _ in p.matches(i % 2 == 0 ? "αβγ" : "abc") == (i % 2 == 0) } } }
            return await group.reduce(true) { $0 && $1 }
        }
        #expect(results)
    }

    @Test func invalidAndUnsupportedProperties() {
        for p in [
            #"\p{Invalid}"#, #"\p{letter}"#, #"\p{Greek}"#, #"\p{Script=greek}"#, #"\p{sc=L}"#,
            #"\p{Alphabetic=Yes}"#, #"\p{L"#, #"\p"#, #"\P{}"#, #"\p{Basic_Emoji}"#, #"\p{sc=Hrkt}"#,
        ] {
            #expect(errorKind(p) == .invalid, "\(p)")
        }
        #expect(errorKind(#"\p{Extended_Pictographic}"#) == .unsupported)
    }
}

@Suite struct Errors {
    @Test(arguments: [
        "^(abc]", "[z-a]", "a**", "a{", "{", "}", "]", "a{2,1}", #"\a"#, #"\-"#, "a++", "(?i)a", #"\A"#, #"\z"#,
        #"\h"#, "[[:alpha:]]", #"\k<a>"#, #"\2(a)"#, #"[\d-z]"#, #"[a-\d]"#, #"\c"#, #"\c1"#, #"\x4"#, #"\u12"#,
        #"\u{110000}"#, #"\u{}"#, #"\00"#, #"\01"#, #"[\1]"#, "(?=a)*", "(?<=a)?", "^*", "$+", #"\b*"#, "(", ")",
        "(?", "(?:a", "(?<>a)", "(?<1a>a)", "(?<a-b>a)", "[", "a\\", #"\k"#, #"\k<"#, "x{1}{2}", "a|*", "(?<a",
        "[a-z&&[^e]]", "(?P<n>a)", "(?#comment)", #"\8"#, "a{,5}", #"[\B]"#, #"[\k]"#, #"\cé"#,
    ])
    func invalidPatterns(_ pattern: String) {
        #expect(errorKind(pattern) == .invalid)
    }

    @Test func errorDetails() {
        do {
            _ = try ECMAScriptPattern("ab[cd")
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .invalid)
            #expect(error.offset == 2)
            #expect(error.message == "unterminated character class")
            #expect(error.description == "invalid regular expression at offset 2: unterminated character class")
        }
        do {
            _ = try ECMAScriptPattern("é(?i:x)")
            Issue.record("expected an error")
        } catch {
            #expect(error.kind == .unsupported)
            #expect(error.offset == 1)  // offsets count Unicode scalars
        }
    }

    @Test func validEdgeCases() {
        for p in [
            "", "a|", "|", "()", "(?:)", "[]", "[^]", "a[]b", "[-a]", "[a-]", #"[\]]"#, "/", #"\/"#, "[/]",
            #"(?<$_a1>x)\k<$_a1>"#, #"(?<\u0061>x)\k<a>"#, "a{0,0}", #"\0"#, #"[\0]"#, #"\k<n>(?<n>a)"#,
            "(|a)+", "[--a]",
        ] {
            #expect(errorKind(p) == nil, "\(p)")
        }
        #expect(m("^[]$", "") == false)  // [] matches nothing
        #expect(m("^[^]$", "\n"))  // [^] matches anything
        #expect(!m("a[]b", "ab"))
        #expect(errorKind(#"[\c_]"#) == .invalid)  // ClassControlLetter is Annex B only
    }
}
