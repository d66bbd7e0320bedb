// Backtracking virtual machine implementing the ECMA-262 matcher semantics
// (§22.2.2 "Pattern Semantics").
//
// The syntax tree is compiled to a small instruction list; matching keeps an
// explicit backtrack stack on the heap (choice points plus an undo log for
// captures and loop registers), so the native call stack does not grow with
// the input. Only lookarounds recurse (one level per syntactic nesting).

/// One VM instruction. Matching instructions carry their direction:
/// forward normally, backward inside lookbehinds.
enum Instruction: Sendable {
    case char(UInt32, forward: Bool)
    case set(Int, forward: Bool)
    /// Try `preferred` first; on failure resume at `alternative`.
    case split(preferred: Int, alternative: Int)
    case jump(Int)
    case lineStart(multiline: Bool)
    case lineEnd(multiline: Bool)
    case wordBoundary(negated: Bool)
    /// Remember the position where a capturing group's body starts.
    case groupEnter(register: Int)
    /// Record capture `group` from the remembered position to here.
    case groupExit(group: Int, register: Int, forward: Bool)
    case backreference(slot: Int, forward: Bool)
    /// Run the body at the next instruction as an atomic sub-match; continue at `end`.
    case lookaround(negated: Bool, end: Int)
    /// Success of a lookaround body.
    case lookaroundEnd
    /// Quantifier over a single code point matcher (`a*`, `[a-z]{1,63}`, `.+?`).
    case simpleRepeat(SingleMatcher, min: Int, max: Int, greedy: Bool, forward: Bool)
    /// General quantifier: `repeatStart`, `repeatLoop`, `repeatBody`, body, `repeatIterationEnd`.
    case repeatStart(counter: Int)
    case repeatLoop(counter: Int, min: Int, max: Int, greedy: Bool, body: Int, exit: Int)
    case repeatBody(start: Int, firstGroup: Int, groupCount: Int)
    case repeatIterationEnd(counter: Int, start: Int, min: Int, loop: Int)
    case match
}

/// Single code point test used by `.simpleRepeat`.
enum SingleMatcher: Sendable {
    case char(UInt32)
    case set(Int)
}

/// Compiled form of a `Program`.
struct Bytecode: Sendable {
    var code: [Instruction] = []
    var sets: [CharSet] = []
    var registerCount = 0

    init(_ program: Program) {
        emit(program.root, forward: true)
        code.append(.match)
    }

    private mutating func newRegister() -> Int {
        registerCount += 1
        return registerCount - 1
    }

    private mutating func emit(_ node: Node, forward: Bool) {
        switch node {
        case .char(let c):
            code.append(.char(c, forward: forward))
        case .set(let s):
            sets.append(s)
            code.append(.set(sets.count - 1, forward: forward))
        case .sequence(let items):
            // Inside lookbehinds, terms are matched right to left.
            for item in forward ? items : items.reversed() { emit(item, forward: forward) }
        case .alternation(let alternatives):
            var jumps: [Int] = []
            for (i, alternative) in alternatives.enumerated() {
                if i == alternatives.count - 1 {
                    emit(alternative, forward: forward)
                    break
                }
                let split = code.count
                code.append(.split(preferred: split + 1, alternative: -1))
                emit(alternative, forward: forward)
                jumps.append(code.count)
                code.append(.jump(-1))
                code[split] = .split(preferred: split + 1, alternative: code.count)
            }
            for j in jumps { code[j] = .jump(code.count) }
        case .group(let index, let body):
            let register = newRegister()
            code.append(.groupEnter(register: register))
            emit(body, forward: forward)
            code.append(.groupExit(group: index, register: register, forward: forward))
        case .quantified(let body, let min, let max, let greedy, let firstGroup, let groupCount):
            if max == 0 { return }  // the atom is never attempted
            if groupCount == 0, let single = singleMatcher(body) {
                code.append(.simpleRepeat(single, min: min, max: max, greedy: greedy, forward: forward))
                return
            }
            let counter = newRegister()
            let start = newRegister()
            code.append(.repeatStart(counter: counter))
            let loop = code.count
            code.append(.repeatLoop(counter: counter, min: min, max: max, greedy: greedy, body: loop + 1, exit: -1))
            code.append(.repeatBody(start: start, firstGroup: firstGroup, groupCount: groupCount))
            emit(body, forward: forward)
            code.append(.repeatIterationEnd(counter: counter, start: start, min: min, loop: loop))
            code[loop] = .repeatLoop(counter: counter, min: min, max: max, greedy: greedy, body: loop + 1, exit: code.count)
        case .backreference(let slot):
            code.append(.backreference(slot: slot, forward: forward))
        case .lineStart(let multiline):
            code.append(.lineStart(multiline: multiline))
        case .lineEnd(let multiline):
            code.append(.lineEnd(multiline: multiline))
        case .wordBoundary(let negated):
            code.append(.wordBoundary(negated: negated))
        case .lookaround(let behind, let negated, let body):
            let start = code.count
            code.append(.lookaround(negated: negated, end: -1))
            emit(body, forward: !behind)
            code.append(.lookaroundEnd)
            code[start] = .lookaround(negated: negated, end: code.count)
        }
    }

    private mutating func singleMatcher(_ node: Node) -> SingleMatcher? {
        switch node {
        case .char(let c): return .char(c)
        case .set(let s):
            sets.append(s)
            return .set(sets.count - 1)
        default: return nil
        }
    }
}

/// Per-match mutable state. Created fresh for every match, so the compiled
/// program stays immutable and shareable across threads.
struct MatchState: ~Copyable {
    private enum Backtrack {
        /// Choice point: resume at `pc` with `pos`.
        case branch(pc: Int, pos: Int)
        /// Undo-log entries.
        case capture(Int, old: Int)
        case register(Int, old: Int)
        case captures([Int])
        /// Greedy `.simpleRepeat`: give back one code point (down to `limit`).
        case giveBack(pc: Int, pos: Int, limit: Int, forward: Bool)
        /// Lazy `.simpleRepeat` at `pc`: take one more code point.
        case takeMore(pc: Int, pos: Int, count: Int)
    }

    private let input: ContiguousArray<UInt32>
    private let program: Program
    private let bytecode: Bytecode
    /// `captures[2*i]`, `captures[2*i+1]`: start/end of group i, -1 if undefined.
    private var captures: [Int]
    private var registers: [Int]
    private var stack: [Backtrack] = []
    /// Steps the match may still take: one per instruction executed, per code point a simple
    /// repeat consumes or gives back, and per start position tried.
    private(set) var stepsLeft: Int
    /// Set when `stepsLeft` ran out; every run then fails at once and `search` gives up.
    private(set) var outOfSteps = false

    init(input: ContiguousArray<UInt32>, program: Program, bytecode: Bytecode, steps: Int) {
        self.input = input
        self.program = program
        self.bytecode = bytecode
        self.stepsLeft = steps
        self.captures = Array(repeating: -1, count: 2 * (program.groupCount + 1))
        self.registers = Array(repeating: -1, count: bytecode.registerCount)
    }

    /// Tries every start position (like `RegExp.prototype.test` without `g`/`y`).
    mutating func search() -> Bool {
        let count = input.count
        var start = 0
        while start <= count {
            if let first = program.firstCharacters {
                // Skip start positions that cannot begin a match.
                while start < count && !first.contains(input[start]) { start += 1 }
                if start == count { return false }
            }
            if run(0, start) { return true }
            if outOfSteps || program.anchoredAtStart { return false }
            start += 1
        }
        return false
    }

    /// Takes `count` steps from the budget; false (and `outOfSteps`) when there are not enough.
    @inline(__always)
    private mutating func spend(_ count: Int) -> Bool {
        stepsLeft -= count
        if stepsLeft >= 0 { return true }
        outOfSteps = true
        return false
    }

    @inline(__always)
    private func matchSingle(_ m: SingleMatcher, _ pos: Int, _ forward: Bool) -> Int? {
        let index = forward ? pos : pos - 1
        guard index >= 0 && index < input.count else { return nil }
        let c = input[index]
        switch m {
        case .char(let expected): if c != expected { return nil }
        case .set(let s): if !bytecode.sets[s].contains(c) { return nil }
        }
        return forward ? pos + 1 : pos - 1
    }

    /// Runs from `pc` at `pos` until `.match`/`.lookaroundEnd` (true) or until
    /// every choice point pushed by this run is exhausted (false). On success
    /// the run's choice points are dropped but its capture changes are kept.
    private mutating func run(_ startPC: Int, _ startPos: Int) -> Bool {
        let base = stack.count
        var pc = startPC
        var pos = startPos
        let code = bytecode.code
        while true {
            guard spend(1) else {
                _ = backtrack(to: base)  // out of steps: drops this run's entries
                return false
            }
            var failed = false
            switch code[pc] {
            case .char(let c, let forward):
                if let next = matchSingle(.char(c), pos, forward) { pos = next; pc += 1 } else { failed = true }

            case .set(let s, let forward):
                if let next = matchSingle(.set(s), pos, forward) { pos = next; pc += 1 } else { failed = true }

            case .split(let preferred, let alternative):
                stack.append(.branch(pc: alternative, pos: pos))
                pc = preferred

            case .jump(let target):
                pc = target

            case .lineStart(let multiline):
                if pos == 0 || (multiline && CharSet.isLineTerminator(input[pos - 1])) { pc += 1 } else { failed = true }

            case .lineEnd(let multiline):
                if pos == input.count || (multiline && CharSet.isLineTerminator(input[pos])) { pc += 1 } else { failed = true }

            case .wordBoundary(let negated):
                let before = pos > 0 && CharSet.isWordChar(input[pos - 1])
                let after = pos < input.count && CharSet.isWordChar(input[pos])
                if (before != after) != negated { pc += 1 } else { failed = true }

            case .groupEnter(let register):
                setRegister(register, pos)
                pc += 1

            case .groupExit(let group, let register, let forward):
                let entry = registers[register]
                setCapture(2 * group, forward ? entry : pos)
                setCapture(2 * group + 1, forward ? pos : entry)
                pc += 1

            case .backreference(let slot, let forward):
                // Comparing costs what it compares, whether it matches or not.
                let (next, compared) = matchBackreference(slot, pos, forward)
                if spend(compared), let next {
                    pos = next
                    pc += 1
                } else {
                    failed = true
                }

            case .lookaround(let negated, let end):
                guard spend(captures.count / 2) else {  // the copy of the captures
                    failed = true
                    break
                }
                let saved = captures
                let found = run(pc + 1, pos)
                if outOfSteps {
                    failed = true
                } else if negated {
                    if found {
                        captures = saved
                        failed = true
                    } else {
                        pc = end
                    }
                } else if found {
                    // Captures from a positive lookaround persist, but it is
                    // atomic: backtracking past it only restores them.
                    if program.groupCount > 0 { stack.append(.captures(saved)) }
                    pc = end
                } else {
                    failed = true
                }

            case .match, .lookaroundEnd:
                stack.removeSubrange(base...)
                return true

            case .simpleRepeat(let single, let min, let max, let greedy, let forward):
                var count = 0
                var p = pos
                while count < min, let next = matchSingle(single, p, forward) {
                    p = next
                    count += 1
                }
                // The code points tried count even when the minimum is not met (`[0-9]{20000}`
                // against runs one short would otherwise compare for free).
                if count < min {
                    _ = spend(count)
                    failed = true
                    break
                }
                let minimumEnd = p
                if greedy {
                    while count < max, let next = matchSingle(single, p, forward) {
                        p = next
                        count += 1
                    }
                }
                // One step per code point taken (giving one back is a step of its own, later).
                if !spend(count) {
                    failed = true
                    break
                }
                if greedy {
                    if p != minimumEnd { stack.append(.giveBack(pc: pc + 1, pos: p, limit: minimumEnd, forward: forward)) }
                } else if count < max {
                    stack.append(.takeMore(pc: pc, pos: p, count: count))
                }
                pos = p
                pc += 1

            case .repeatStart(let counter):
                setRegister(counter, 0)
                pc += 1

            case .repeatLoop(let counter, let min, let max, let greedy, let body, let exit):
                let count = registers[counter]
                if count < min {
                    pc = body
                } else if count >= max {
                    pc = exit
                } else if greedy {
                    stack.append(.branch(pc: exit, pos: pos))
                    pc = body
                } else {
                    stack.append(.branch(pc: body, pos: pos))
                    pc = exit
                }

            case .repeatBody(let start, let firstGroup, let groupCount):
                guard spend(groupCount) else {  // resetting the iteration's captures
                    failed = true
                    break
                }
                setRegister(start, pos)
                // Each iteration starts with the atom's captures undefined.
                for i in (2 * firstGroup)..<(2 * (firstGroup + groupCount)) where captures[i] != -1 {
                    setCapture(i, -1)
                }
                pc += 1

            case .repeatIterationEnd(let counter, let start, let min, let loop):
                let count = registers[counter]
                // Once the minimum is met, an iteration matching the empty
                // string fails (this is what stops `(a*)*` from looping).
                if count >= min && pos == registers[start] {
                    failed = true
                } else {
                    setRegister(counter, count + 1)
                    pc = loop
                }
            }

            if failed {
                guard let (nextPC, nextPos) = backtrack(to: base) else { return false }
                pc = nextPC
                pos = nextPos
            }
        }
    }

    /// Pops the backtrack stack down to the next choice point above `base`,
    /// undoing logged changes on the way.
    private mutating func backtrack(to base: Int) -> (Int, Int)? {
        if outOfSteps {
            // Out of steps: nothing is tried again, and nothing needs restoring.
            stack.removeSubrange(base...)
            return nil
        }
        while stack.count > base {
            switch stack.removeLast() {
            case .branch(let pc, let pos):
                return (pc, pos)
            case .capture(let i, let old):
                captures[i] = old
            case .register(let i, let old):
                registers[i] = old
            case .captures(let saved):
                captures = saved
            case .giveBack(let pc, let pos, let limit, let forward):
                let previous = forward ? pos - 1 : pos + 1
                if previous != limit {
                    stack.append(.giveBack(pc: pc, pos: previous, limit: limit, forward: forward))
                }
                return (pc, previous)
            case .takeMore(let pc, let pos, let count):
                guard case .simpleRepeat(let single, _, let max, _, let forward) = bytecode.code[pc],
                    let next = matchSingle(single, pos, forward)
                else { continue }
                if count + 1 < max { stack.append(.takeMore(pc: pc, pos: next, count: count + 1)) }
                return (pc + 1, next)
            }
        }
        return nil
    }

    @inline(__always)
    private mutating func setCapture(_ i: Int, _ value: Int) {
        stack.append(.capture(i, old: captures[i]))
        captures[i] = value
    }

    @inline(__always)
    private mutating func setRegister(_ i: Int, _ value: Int) {
        stack.append(.register(i, old: registers[i]))
        registers[i] = value
    }

    /// Where the backreference's text ends when it matches at `pos` (`nil` when not), and how
    /// many code points were compared to find out.
    private func matchBackreference(_ slot: Int, _ pos: Int, _ forward: Bool) -> (next: Int?, compared: Int) {
        var start = -1, end = -1
        // With duplicate named groups, at most one of the candidates participated.
        for g in program.backreferences[slot] where captures[2 * g] >= 0 {
            start = captures[2 * g]
            end = captures[2 * g + 1]
            break
        }
        if start < 0 { return (pos, 0) }  // an undefined group matches the empty string
        let length = end - start
        let from = forward ? pos : pos - length
        guard from >= 0 && from + length <= input.count else { return (nil, 0) }
        for i in 0..<length where input[start + i] != input[from + i] { return (nil, i + 1) }
        return (forward ? pos + length : pos - length, length)
    }
}
