import ECMARegex
import FleetJSON

extension JSONSchema {
    /// Where `instance` holds secrets: the location of every value that a subschema marked
    /// `x-secret: true` applies to, at any depth (a password inside a list item, a token inside
    /// an object setting), outermost only (nothing under a secret location is listed again),
    /// sorted.
    ///
    /// The walk is conservative, because a secret shown is worse than a value hidden: every
    /// subschema that *could* apply counts, whether or not the value matches it (each branch of
    /// `anyOf`, `oneOf`, `if`/`then`/`else`, `not`, `dependentSchemas`; every `$dynamicRef`
    /// candidate; `unevaluated*` and `contains` for every member and item). A property name
    /// too expensive to match against a `patternProperties` pattern counts as matching, and a
    /// value nested too deep for the thread's stack counts as secret.
    public func secretLocations(in instance: JSONValue) -> [JSONPointer] {
        var walker = SecretWalker(nodes: nodes, resources: resources)
        var seen: Set<Int> = []
        walker.visit(root, instance, at: [], seen: &seen)
        let sorted = walker.found.sorted()
        var outermost: [JSONPointer] = []
        for location in sorted where !(outermost.last.map { location.tokens.starts(with: $0.tokens) } ?? false) {
            outermost.append(location)
        }
        return outermost
    }

    /// `instance` with the value at every secret location replaced by `mask` (see
    /// ``secretLocations(in:)``).
    public func maskingSecrets(in instance: JSONValue, with mask: JSONValue) -> JSONValue {
        var result = instance
        for location in secretLocations(in: instance) { result[pointer: location] = mask }
        return result
    }

    /// Every scalar at or below a secret location, as text: strings as they are, numbers as
    /// their JSON text. For redacting secrets from free text (a hook's output); Booleans and
    /// `null` carry nothing to redact.
    public func secretScalars(in instance: JSONValue) -> [String] {
        var found: [String] = []
        func collect(_ value: JSONValue) {
            switch value {
            case .string(let text): found.append(text)
            case .number(let number): found.append(number.description)
            case .array(let items): items.forEach(collect)
            case .object(let object): for (_, member) in object { collect(member) }
            case .bool, .null: break
            }
        }
        for location in secretLocations(in: instance) {
            if let value = instance[pointer: location] { collect(value) }
        }
        return found
    }
}

/// Walks the compiled graph over an instance, collecting where `x-secret` subschemas apply.
private struct SecretWalker {
    let nodes: [CompiledNode]
    let resources: [SchemaResource]
    var found: [JSONPointer] = []
    /// Shared by every `patternProperties` match of the walk, as in validation.
    var patternBudget = MatchBudget(steps: Evaluator.patternBaseSteps)
    /// The walk recurses as deep as the instance nests (up to the reader's 512 levels, each
    /// several frames): past ``uncheckedDepth`` levels the stack is checked, and where it runs
    /// short the rest counts as secret. Read lazily: finding the stack's bounds costs a system
    /// call that ordinary documents never need.
    var stack: StackGuard?
    /// Levels walked without looking at the stack: a few, since each level takes several large
    /// frames (a debug build on a 256 KiB thread has room for fewer than 64).
    static let uncheckedDepth = 8

    /// Visits node `index` at `instance`; `seen` holds the nodes already visited at this same
    /// instance location (so that a `$ref` cycle that does not move into the instance ends).
    mutating func visit(_ index: Int, _ instance: JSONValue, at tokens: [String], seen: inout Set<Int>) {
        let node = nodes[index].node
        if node.constant != nil { return }
        if node.isSecret || !hasStackRoom(depth: tokens.count) {
            found.append(JSONPointer(tokens: tokens))
            return
        }
        guard seen.insert(index).inserted else { return }

        // Applicators to the instance itself.
        var inPlace: [Int] = node.allOf + node.anyOf + node.oneOf
        inPlace += [node.ref, node.not, node.ifSchema, node.thenSchema, node.elseSchema].compactMap { $0 }
        inPlace += node.dependentSchemas.map(\.schema)
        if let dynamic = node.dynamicRef {
            inPlace.append(dynamic.target)
            if let anchor = dynamic.anchor {
                inPlace += resources.compactMap { $0.dynamicAnchors[anchor] }
            }
        }
        for child in inPlace { visit(child, instance, at: tokens, seen: &seen) }

        switch instance {
        case .object(let object):
            for (key, value) in object {
                var children: [Int] = []
                if let property = node.properties[key] { children.append(property) }
                for entry in node.patternProperties where matches(entry.pattern, key) { children.append(entry.schema) }
                if children.isEmpty, let additional = node.additionalProperties { children.append(additional) }
                if let unevaluated = node.unevaluatedProperties { children.append(unevaluated) }
                visitMember(children, value, at: tokens + [key])
            }
        case .array(let items):
            for (position, item) in items.enumerated() {
                var children: [Int] = []
                if position < node.prefixItems.count {
                    children.append(node.prefixItems[position])
                } else if let every = node.items {
                    children.append(every)
                }
                children += [node.contains, node.unevaluatedItems].compactMap { $0 }
                visitMember(children, item, at: tokens + [String(position)])
            }
        default:
            break
        }
    }

    private mutating func hasStackRoom(depth: Int) -> Bool {
        guard depth >= Self.uncheckedDepth else { return true }
        if stack == nil { stack = StackGuard() }
        return stack?.hasRoom() ?? true
    }

    private mutating func visitMember(_ children: [Int], _ value: JSONValue, at tokens: [String]) {
        var seen: Set<Int> = []
        for child in children { visit(child, value, at: tokens, seen: &seen) }
    }

    private mutating func matches(_ pattern: CompiledPattern, _ key: String) -> Bool {
        Evaluator.topUp(&patternBudget, toMatch: key)
        return pattern.regex.matches(key, budget: &patternBudget) != .noMatch
    }
}
