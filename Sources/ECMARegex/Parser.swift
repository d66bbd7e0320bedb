// Parser for ECMA-262 `Pattern` syntax with the `u` flag (no Annex B leniency).

/// Regular expression syntax tree, ready to be interpreted by `Matcher`.
indirect enum Node: Sendable {
    /// Matches exactly one code point.
    case char(UInt32)
    /// Matches one code point belonging to the set (classes, `.`, `\d`, `\p{…}`, …).
    case set(CharSet)
    /// Terms matched one after another (in reverse order inside lookbehinds).
    case sequence([Node])
    /// Alternatives tried left to right.
    case alternation([Node])
    /// Capturing group number `index` (1-based).
    case group(index: Int, Node)
    /// Quantified atom. `max == Int.max` means unbounded. Captures
    /// `firstGroup ..< firstGroup + groupCount` are reset on each iteration.
    case quantified(Node, min: Int, max: Int, greedy: Bool, firstGroup: Int, groupCount: Int)
    /// Backreference; `slot` indexes `Program.backreferences` (the candidate
    /// group numbers: several only for duplicate named groups).
    case backreference(slot: Int)
    /// `^` (with `multiline`, also after a line terminator).
    case lineStart(multiline: Bool)
    /// `$` (with `multiline`, also before a line terminator).
    case lineEnd(multiline: Bool)
    /// `\b` (or `\B` when `negated`), ASCII word characters only.
    case wordBoundary(negated: Bool)
    /// `(?=…)`, `(?!…)`, `(?<=…)`, `(?<!…)`.
    case lookaround(behind: Bool, negated: Bool, Node)
}

/// Result of parsing: the tree plus the tables the matcher needs.
struct Program: Sendable {
    let root: Node
    let groupCount: Int
    /// Resolved candidate group numbers for each `.backreference(slot:)`.
    let backreferences: [[Int]]
    /// True when every match must begin at index 0 (leading non-multiline `^`).
    let anchoredAtStart: Bool
    /// Code points that can begin a match, when known and the pattern cannot
    /// match the empty string; used to skip hopeless start positions.
    let firstCharacters: CharSet?

    init(root: Node, groupCount: Int, backreferences: [[Int]]) {
        self.root = root
        self.groupCount = groupCount
        self.backreferences = backreferences
        self.anchoredAtStart = Program.isAnchoredAtStart(root)
        if let (set, canBeEmpty) = Program.firstCharacters(of: root), !canBeEmpty {
            self.firstCharacters = set
        } else {
            self.firstCharacters = nil
        }
    }

    private static func isAnchoredAtStart(_ node: Node) -> Bool {
        switch node {
        case .lineStart(multiline: false): return true
        case .sequence(let items): return items.first.map(isAnchoredAtStart) ?? false
        case .alternation(let alternatives): return alternatives.allSatisfy(isAnchoredAtStart)
        case .group(_, let body): return isAnchoredAtStart(body)
        default: return false
        }
    }

    /// The set of code points a forward match of `node` can start with, and
    /// whether it can match without consuming anything; nil when unknown.
    private static func firstCharacters(of node: Node) -> (CharSet, canBeEmpty: Bool)? {
        switch node {
        case .char(let c): return (CharSet(c), false)
        case .set(let s): return (s, false)
        case .sequence(let items):
            var union = CharSet()
            for item in items {
                guard let (set, canBeEmpty) = firstCharacters(of: item), union.canAbsorb(set) else { return nil }
                union.formUnion(set)
                if !canBeEmpty { return (union, false) }
            }
            return (union, true)
        case .alternation(let alternatives):
            var union = CharSet()
            var anyEmpty = false
            for alternative in alternatives {
                guard let (set, canBeEmpty) = firstCharacters(of: alternative), union.canAbsorb(set) else { return nil }
                union.formUnion(set)
                anyEmpty = anyEmpty || canBeEmpty
            }
            return (union, anyEmpty)
        case .group(_, let body):
            return firstCharacters(of: body)
        case .quantified(let body, let min, _, _, _, _):
            guard let (set, canBeEmpty) = firstCharacters(of: body) else { return nil }
            return (set, canBeEmpty || min == 0)
        case .lineStart, .lineEnd, .wordBoundary, .lookaround:
            return (CharSet(), true)  // zero-width
        case .backreference:
            return nil
        }
    }
}

struct Parser {
    /// Patterns longer than this many code points are not compiled: a `pattern` is a setting's
    /// constraint, not a program, and the cap bounds the compiler's time and memory.
    static let maximumLength = 32_768
    /// Groups and lookarounds nest at most this deep. The parser, the analyses and the
    /// compiler recurse once per level, so the cap keeps them far from the end of any thread's
    /// stack (about 200,000 nested `(` overflowed it before the cap).
    static let maximumNesting = 100

    private let src: [Unicode.Scalar]
    private var pos = 0
    private var nesting = 0
    private var groupCount = 0
    /// Named groups in source order: (name, group number).
    private var namedGroups: [(String, Int)] = []
    /// Names that could participate together with a group being defined now
    /// (used to allow duplicate names only in different alternatives).
    private var visibleNames: Set<String> = []
    private enum PendingReference { case number(Int, offset: Int), name(String, offset: Int) }
    private var pendingReferences: [PendingReference] = []
    /// Modifier state, changed by `(?ms-ms:…)`.
    private var dotAll = false
    private var multiline = false

    init(_ source: String) {
        src = Array(source.unicodeScalars)
    }

    // MARK: Entry point

    mutating func parse() throws(ECMAScriptPatternError) -> Program {
        if src.count > Parser.maximumLength {
            throw error(
                .unsupported, "the pattern is \(src.count) code points long; at most \(Parser.maximumLength) are allowed",
                at: Parser.maximumLength)
        }
        let root = try parseDisjunction()
        if pos < src.count {
            // parseDisjunction only stops early at ')'.
            throw error(.invalid, "unmatched ')'", at: pos)
        }
        var refs: [[Int]] = []
        for ref in pendingReferences {
            switch ref {
            case .number(let n, let offset):
                guard n <= groupCount else {
                    throw error(.invalid, "backreference to nonexistent group \(n)", at: offset)
                }
                refs.append([n])
            case .name(let name, let offset):
                let groups = namedGroups.filter { $0.0 == name }.map(\.1)
                guard !groups.isEmpty else {
                    throw error(.invalid, "reference to undefined group name '\(name)'", at: offset)
                }
                refs.append(groups)
            }
        }
        return Program(root: root, groupCount: groupCount, backreferences: refs)
    }

    // MARK: Helpers

    private func error(_ kind: ECMAScriptPatternError.Kind, _ message: String, at offset: Int) -> ECMAScriptPatternError {
        ECMAScriptPatternError(kind: kind, message: message, offset: offset)
    }

    private var atEnd: Bool { pos >= src.count }

    private func peek(_ ahead: Int = 0) -> UInt32? {
        pos + ahead < src.count ? src[pos + ahead].value : nil
    }

    private func peekIs(_ c: Character, _ ahead: Int = 0) -> Bool {
        peek(ahead) == c.unicodeScalars.first!.value
    }

    private mutating func eat(_ c: Character) -> Bool {
        if peekIs(c) { pos += 1; return true }
        return false
    }

    private static func hexValue(_ c: UInt32?) -> UInt32? {
        guard let c else { return nil }
        switch c {
        case 0x30...0x39: return c - 0x30
        case 0x41...0x46: return c - 0x41 + 10
        case 0x61...0x66: return c - 0x61 + 10
        default: return nil
        }
    }

    private static func isDecimal(_ c: UInt32?) -> Bool {
        guard let c else { return false }
        return c >= 0x30 && c <= 0x39
    }

    private static func isASCIILetter(_ c: UInt32?) -> Bool {
        guard let c else { return false }
        return (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
    }

    /// `^ $ \ . * + ? ( ) [ ] { } |` and `/` may be identity-escaped with `u`.
    private static func isIdentityEscapable(_ c: UInt32) -> Bool {
        switch c {
        case 0x5E, 0x24, 0x5C, 0x2E, 0x2A, 0x2B, 0x3F, 0x28, 0x29, 0x5B, 0x5D, 0x7B, 0x7D, 0x7C, 0x2F:
            return true
        default:
            return false
        }
    }

    // MARK: Disjunction / Alternative / Term

    private mutating func parseDisjunction() throws(ECMAScriptPatternError) -> Node {
        nesting += 1
        defer { nesting -= 1 }
        // The top level is level 1; each group or lookaround adds one.
        if nesting > Parser.maximumNesting + 1 {
            throw error(.unsupported, "groups nest more than \(Parser.maximumNesting) deep", at: pos)
        }
        let base = visibleNames
        var defined: Set<String> = []
        var alternatives: [Node] = []
        while true {
            visibleNames = base
            alternatives.append(try parseAlternative())
            defined.formUnion(visibleNames)
            if !eat("|") { break }
        }
        visibleNames = base.union(defined)
        if alternatives.count == 1 { return alternatives[0] }
        return Parser.simplifyAlternation(alternatives)
    }

    /// An alternation whose branches each match exactly one code point (and
    /// capture nothing) is equivalent to a single set: merge it.
    private static func simplifyAlternation(_ alternatives: [Node]) -> Node {
        var merged = CharSet()
        for alt in alternatives {
            switch alt {
            case .char(let c): merged.formUnion(CharSet(c))
            case .set(let s) where merged.canAbsorb(s): merged.formUnion(s)
            default: return .alternation(alternatives)
            }
        }
        return .set(merged)
    }

    private mutating func parseAlternative() throws(ECMAScriptPatternError) -> Node {
        var terms: [Node] = []
        while let c = peek(), c != 0x7C /* | */, c != 0x29 /* ) */ {
            terms.append(try parseTerm())
        }
        return terms.count == 1 ? terms[0] : .sequence(terms)
    }

    private mutating func parseTerm() throws(ECMAScriptPatternError) -> Node {
        let start = pos
        let c = src[pos].value
        let atom: Node
        switch c {
        case 0x5E:  // ^
            pos += 1
            return try notQuantified(.lineStart(multiline: multiline), assertionAt: start)
        case 0x24:  // $
            pos += 1
            return try notQuantified(.lineEnd(multiline: multiline), assertionAt: start)
        case 0x5C:  // \
            if peekIs("b", 1) || peekIs("B", 1) {
                let negated = peekIs("B", 1)
                pos += 2
                return try notQuantified(.wordBoundary(negated: negated), assertionAt: start)
            }
            atom = try parseAtomEscape()
        case 0x28:  // (
            if let look = try parseLookaroundIfPresent() {
                return try notQuantified(look, assertionAt: start)
            }
            let firstGroup = groupCount + 1
            let group = try parseGroup()
            return try parseQuantifier(for: group, firstGroup: firstGroup, atomStart: start)
        case 0x2E:  // .
            pos += 1
            atom = .set(dotAll ? CharSet.all : CharSet.dot)
        case 0x5B:  // [
            atom = try parseClass()
        case 0x2A, 0x2B, 0x3F:  // * + ?
            throw error(.invalid, "nothing to repeat", at: start)
        case 0x7B:  // {
            if isQuantifierBraces() {
                throw error(.invalid, "nothing to repeat", at: start)
            }
            throw error(.invalid, "lone quantifier brackets", at: start)
        case 0x7D, 0x5D:  // } ]
            throw error(.invalid, "lone quantifier brackets", at: start)
        default:
            pos += 1
            atom = .char(c)
        }
        return try parseQuantifier(for: atom, firstGroup: groupCount + 1, atomStart: start)
    }

    /// Assertions cannot be quantified with the `u` flag.
    private func notQuantified(_ node: Node, assertionAt start: Int) throws(ECMAScriptPatternError) -> Node {
        if let c = peek(), c == 0x2A || c == 0x2B || c == 0x3F || (c == 0x7B && isQuantifierBraces()) {
            throw error(.invalid, "nothing to repeat", at: pos)
        }
        return node
    }

    // MARK: Quantifiers

    /// Whether `{` at `pos` starts `{n}`, `{n,}` or `{n,m}`.
    private func isQuantifierBraces() -> Bool {
        var i = pos + 1
        func digits() -> Bool {
            let s = i
            while i < src.count, Parser.isDecimal(src[i].value) { i += 1 }
            return i > s
        }
        guard digits() else { return false }
        if i < src.count, src[i] == "," {
            i += 1
            _ = digits()
        }
        return i < src.count && src[i] == "}"
    }

    private mutating func parseDecimalSaturating() -> Int {
        var value = 0
        while let c = peek(), Parser.isDecimal(c) {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int(c - 0x30))
            value = (o1 || o2) ? Int.max : a
            pos += 1
        }
        return value
    }

    private mutating func parseQuantifier(for atom: Node, firstGroup: Int, atomStart: Int) throws(ECMAScriptPatternError) -> Node {
        guard let c = peek() else { return atom }
        let quantStart = pos
        let min: Int
        let max: Int
        switch c {
        case 0x2A: pos += 1; min = 0; max = .max
        case 0x2B: pos += 1; min = 1; max = .max
        case 0x3F: pos += 1; min = 0; max = 1
        case 0x7B:
            guard isQuantifierBraces() else {
                throw error(.invalid, "incomplete quantifier", at: quantStart)
            }
            pos += 1
            min = parseDecimalSaturating()
            if eat(",") {
                max = Parser.isDecimal(peek()) ? parseDecimalSaturating() : .max
            } else {
                max = min
            }
            pos += 1  // }
            if min > max {
                throw error(.invalid, "numbers out of order in {} quantifier", at: quantStart)
            }
        default:
            return atom
        }
        let greedy = !eat("?")
        return .quantified(
            atom, min: min, max: max, greedy: greedy,
            firstGroup: firstGroup, groupCount: groupCount - firstGroup + 1)
    }

    // MARK: Groups

    private mutating func parseLookaroundIfPresent() throws(ECMAScriptPatternError) -> Node? {
        guard peekIs("?", 1) else { return nil }
        let start = pos
        let behind: Bool
        let negated: Bool
        if peekIs("=", 2) || peekIs("!", 2) {
            behind = false
            negated = peekIs("!", 2)
            pos += 3
        } else if peekIs("<", 2) && (peekIs("=", 3) || peekIs("!", 3)) {
            behind = true
            negated = peekIs("!", 3)
            pos += 4
        } else {
            return nil
        }
        let body = try parseDisjunction()
        guard eat(")") else { throw error(.invalid, "unterminated group", at: start) }
        return .lookaround(behind: behind, negated: negated, body)
    }

    private mutating func parseGroup() throws(ECMAScriptPatternError) -> Node {
        let start = pos
        pos += 1  // (
        if !eat("?") {
            groupCount += 1
            let index = groupCount
            let body = try parseDisjunction()
            guard eat(")") else { throw error(.invalid, "unterminated group", at: start) }
            return .group(index: index, body)
        }
        if eat(":") {
            let body = try parseDisjunction()
            guard eat(")") else { throw error(.invalid, "unterminated group", at: start) }
            return body
        }
        if eat("<") {
            let nameStart = pos
            let name = try parseGroupName()
            if visibleNames.contains(name) {
                throw error(.invalid, "duplicate capture group name '\(name)'", at: nameStart)
            }
            visibleNames.insert(name)
            groupCount += 1
            let index = groupCount
            namedGroups.append((name, index))
            let body = try parseDisjunction()
            guard eat(")") else { throw error(.invalid, "unterminated group", at: start) }
            return .group(index: index, body)
        }
        return try parseModifierGroup(start: start)
    }

    /// `(?ims-ims:…)` (ES2025 pattern modifiers). `m` and `s` are honoured;
    /// adding `i` is reported as unsupported (no case folding); removing `i` is
    /// a no-op because case-insensitivity is never on.
    private mutating func parseModifierGroup(start: Int) throws(ECMAScriptPatternError) -> Node {
        var seen: Set<UInt32> = []
        var add: Set<UInt32> = []
        var remove: Set<UInt32> = []
        var removing = false
        while let c = peek(), c != 0x3A /* : */ {
            if c == 0x2D /* - */ && !removing {
                removing = true
                pos += 1
                continue
            }
            guard c == 0x69 || c == 0x6D || c == 0x73, !seen.contains(c) else {
                throw error(.invalid, "invalid group", at: start)
            }
            seen.insert(c)
            if removing { remove.insert(c) } else { add.insert(c) }
            pos += 1
        }
        guard eat(":"), !(removing && add.isEmpty && remove.isEmpty) else {
            throw error(.invalid, "invalid group", at: start)
        }
        if add.contains(0x69) {
            throw error(.unsupported, "case-insensitive modifier (?i:…) is not supported", at: start)
        }
        let saved = (dotAll, multiline)
        if add.contains(0x73) { dotAll = true }
        if remove.contains(0x73) { dotAll = false }
        if add.contains(0x6D) { multiline = true }
        if remove.contains(0x6D) { multiline = false }
        let body = try parseDisjunction()
        (dotAll, multiline) = saved
        guard eat(")") else { throw error(.invalid, "unterminated group", at: start) }
        return body
    }

    /// RegExpIdentifierName followed by `>` (the `<` is already consumed).
    private mutating func parseGroupName() throws(ECMAScriptPatternError) -> String {
        let start = pos
        var name = String.UnicodeScalarView()
        while true {
            guard let c = peek() else { throw error(.invalid, "invalid capture group name", at: start) }
            if c == 0x3E /* > */ { pos += 1; break }
            var value = c
            let charStart = pos
            if c == 0x5C /* \ */ {
                pos += 1
                guard eat("u") else { throw error(.invalid, "invalid capture group name", at: charStart) }
                value = try parseUnicodeEscapeBody(escapeStart: charStart)
            } else {
                pos += 1
            }
            guard let scalar = Unicode.Scalar(value) else {
                throw error(.invalid, "invalid capture group name", at: charStart)
            }
            let ok: Bool
            if value == 0x24 || value == 0x5F {
                ok = true
            } else if name.isEmpty {
                ok = scalar.properties.isIDStart
            } else {
                ok = scalar.properties.isIDContinue || value == 0x200C || value == 0x200D
            }
            guard ok else { throw error(.invalid, "invalid capture group name", at: charStart) }
            name.append(scalar)
        }
        if name.isEmpty { throw error(.invalid, "invalid capture group name", at: start) }
        return String(name)
    }

    // MARK: Escapes

    /// After `\` outside a class (the `\b`/`\B` assertions are handled by the caller).
    private mutating func parseAtomEscape() throws(ECMAScriptPatternError) -> Node {
        let start = pos
        pos += 1  // backslash
        guard let c = peek() else { throw error(.invalid, "\\ at end of pattern", at: start) }
        // Backreferences.
        if c >= 0x31 && c <= 0x39 {
            let n = parseDecimalSaturating()
            pendingReferences.append(.number(n, offset: start))
            return .backreference(slot: pendingReferences.count - 1)
        }
        if c == 0x6B /* k */ {
            pos += 1
            guard eat("<") else { throw error(.invalid, "invalid named reference", at: start) }
            let name = try parseGroupName()
            pendingReferences.append(.name(name, offset: start))
            return .backreference(slot: pendingReferences.count - 1)
        }
        if let set = try parseClassEscapeIfPresent() {
            return .set(set)
        }
        return .char(try parseCharacterEscape(escapeStart: start, inClass: false))
    }

    /// `\d \D \s \S \w \W \p{…} \P{…}` with `pos` at the letter; nil if the
    /// escape is something else (position unchanged).
    private mutating func parseClassEscapeIfPresent() throws(ECMAScriptPatternError) -> CharSet? {
        guard let c = peek() else { return nil }
        switch c {
        case 0x64: pos += 1; return CharSet.digit
        case 0x44: pos += 1; return CharSet.nonDigit
        case 0x73: pos += 1; return CharSet.space
        case 0x53: pos += 1; return CharSet.nonSpace
        case 0x77: pos += 1; return CharSet.word
        case 0x57: pos += 1; return CharSet.nonWord
        case 0x70, 0x50:  // p P
            let start = pos - 1
            pos += 1
            guard eat("{") else { throw error(.invalid, "invalid property name", at: start) }
            var body = ""
            while let b = peek(), b != 0x7D {
                // Name/value characters are ASCII letters, digits, '_' and one '='.
                guard Parser.isASCIILetter(b) || Parser.isDecimal(b) || b == 0x5F || b == 0x3D else {
                    throw error(.invalid, "invalid property name", at: start)
                }
                body.unicodeScalars.append(src[pos])
                pos += 1
            }
            guard eat("}") else { throw error(.invalid, "invalid property name", at: start) }
            do {
                let test = try resolveUnicodeProperty(body, negated: c == 0x50)
                return CharSet(properties: [test])
            } catch {
                switch error {
                case .invalid(let message): throw self.error(.invalid, message, at: start)
                case .unsupported(let message): throw self.error(.unsupported, message, at: start)
                }
            }
        default:
            return nil
        }
    }

    /// CharacterEscape (plus `\b` and `\-` when `inClass`), `pos` after the backslash.
    private mutating func parseCharacterEscape(escapeStart: Int, inClass: Bool) throws(ECMAScriptPatternError) -> UInt32 {
        guard let c = peek() else { throw error(.invalid, "\\ at end of pattern", at: escapeStart) }
        pos += 1
        switch c {
        case 0x74: return 0x09  // t
        case 0x6E: return 0x0A  // n
        case 0x76: return 0x0B  // v
        case 0x66: return 0x0C  // f
        case 0x72: return 0x0D  // r
        case 0x63:  // c
            guard let letter = peek(), Parser.isASCIILetter(letter) else {
                throw error(.invalid, "invalid control escape", at: escapeStart)
            }
            pos += 1
            return letter % 32
        case 0x30:  // 0
            if Parser.isDecimal(peek()) {
                throw error(.invalid, inClass ? "invalid class escape" : "invalid decimal escape", at: escapeStart)
            }
            return 0
        case 0x78:  // x
            guard let h = Parser.hexValue(peek()), let l = Parser.hexValue(peek(1)) else {
                throw error(.invalid, "invalid escape", at: escapeStart)
            }
            pos += 2
            return h * 16 + l
        case 0x75:  // u
            return try parseUnicodeEscapeBody(escapeStart: escapeStart)
        case 0x62 where inClass: return 0x08  // \b = backspace
        case 0x2D where inClass: return 0x2D  // \-
        default:
            if Parser.isIdentityEscapable(c) { return c }
            if inClass && Parser.isDecimal(c) {
                throw error(.invalid, "invalid class escape", at: escapeStart)
            }
            throw error(.invalid, "invalid escape", at: escapeStart)
        }
    }

    /// After `\u`: `XXXX` (combining an escaped surrogate pair) or `{X…}`.
    private mutating func parseUnicodeEscapeBody(escapeStart: Int) throws(ECMAScriptPatternError) -> UInt32 {
        if eat("{") {
            var value: UInt32 = 0
            var digits = 0
            while let h = Parser.hexValue(peek()) {
                value = value * 16 + h
                digits += 1
                pos += 1
                if value > 0x10FFFF { throw error(.invalid, "invalid Unicode escape", at: escapeStart) }
            }
            guard digits > 0, eat("}") else { throw error(.invalid, "invalid Unicode escape", at: escapeStart) }
            return value
        }
        guard let value = fourHex(at: pos) else {
            throw error(.invalid, "invalid Unicode escape", at: escapeStart)
        }
        pos += 4
        if (0xD800...0xDBFF).contains(value), peekIs("\\"), peekIs("u", 1),
            let trail = fourHex(at: pos + 2), (0xDC00...0xDFFF).contains(trail)
        {
            pos += 6
            return 0x10000 + ((value - 0xD800) << 10) + (trail - 0xDC00)
        }
        return value
    }

    private func fourHex(at i: Int) -> UInt32? {
        guard i + 4 <= src.count else { return nil }
        var value: UInt32 = 0
        for k in 0..<4 {
            guard let h = Parser.hexValue(src[i + k].value) else { return nil }
            value = value * 16 + h
        }
        return value
    }

    // MARK: Character classes

    private enum ClassAtom {
        case char(UInt32)
        case set(CharSet)
    }

    private mutating func parseClass() throws(ECMAScriptPatternError) -> Node {
        let start = pos
        pos += 1  // [
        var result = CharSet()
        let negated = eat("^")
        while true {
            guard let c = peek() else { throw error(.invalid, "unterminated character class", at: start) }
            if c == 0x5D { pos += 1; break }
            let atomStart = pos
            let first = try parseClassAtom(classStart: start)
            if peekIs("-"), let next = peek(1), next != 0x5D {
                pos += 1
                let second = try parseClassAtom(classStart: start)
                guard case .char(let lo) = first, case .char(let hi) = second else {
                    throw error(.invalid, "invalid character class", at: atomStart)
                }
                guard lo <= hi else {
                    throw error(.invalid, "range out of order in character class", at: atomStart)
                }
                result.formUnion(CharSet(ranges: [lo...hi]))
            } else {
                switch first {
                case .char(let c): result.formUnion(CharSet(c))
                case .set(let s): result.formUnion(s)
                }
            }
        }
        result.negated = negated
        return .set(result)
    }

    private mutating func parseClassAtom(classStart: Int) throws(ECMAScriptPatternError) -> ClassAtom {
        guard let c = peek() else { throw error(.invalid, "unterminated character class", at: classStart) }
        if c != 0x5C {
            pos += 1
            return .char(c)
        }
        let escapeStart = pos
        pos += 1
        if let set = try parseClassEscapeIfPresent() { return .set(set) }
        return .char(try parseCharacterEscape(escapeStart: escapeStart, inClass: true))
    }
}
