import ECMARegex
import FleetJSON

/// Which properties and items of one instance the subschemas applied to it have evaluated:
/// the annotations that `unevaluatedProperties` and `unevaluatedItems` read.
struct Annotations {
    var properties: Set<String> = []
    /// Items `0..<evaluatedPrefix` were evaluated (by `prefixItems`).
    var evaluatedPrefix = 0
    /// Every item was evaluated (by `items` or `unevaluatedItems`).
    var allItems = false
    /// Items matched by `contains`.
    var items: Set<Int> = []

    mutating func merge(_ other: Annotations) {
        properties.formUnion(other.properties)
        evaluatedPrefix = max(evaluatedPrefix, other.evaluatedPrefix)
        allItems = allItems || other.allItems
        items.formUnion(other.items)
    }

    func isEvaluated(item index: Int) -> Bool {
        allItems || index < evaluatedPrefix || items.contains(index)
    }
}

/// The instance location being evaluated, built only when errors are collected.
final class InstancePath {
    let parent: InstancePath?
    let token: String

    init(parent: InstancePath?, token: String) {
        self.parent = parent
        self.token = token
    }

    static func pointer(_ path: InstancePath?) -> JSONPointer {
        var tokens: [String] = []
        var current = path
        while let step = current {
            tokens.append(step.token)
            current = step.parent
        }
        return JSONPointer(tokens: tokens.reversed())
    }
}

/// The state of evaluating one node against one instance.
struct Frame {
    let node: Int
    let path: InstancePath?
    /// Whether the node must record what it evaluated (for an `unevaluated*` keyword here or
    /// above, at the same instance).
    let collect: Bool
    /// Whether values here are secrets, never to be quoted.
    let secret: Bool
    var valid = true
    var local = Annotations()
}

/// One validation run: walks the compiled graph over an instance.
///
/// With `collectsErrors` off it stops at the first failure (``JSONSchema/isValid(_:)``); with it
/// on it evaluates every keyword and records an error for each failure, in keyword order.
struct Evaluator {
    /// Deeper than this, evaluation stops with an error: only a `$ref` cycle that never moves
    /// into the instance gets here (instances themselves nest at most 512 deep).
    static let maximumDepth = 2_000

    let nodes: [CompiledNode]
    let resources: [SchemaResource]
    var collectsErrors: Bool
    var errors: [ValidationError] = []
    private var dynamicScope: [Int] = []
    private var depth = 0
    /// Read on first need: asking the system for the thread's stack bounds costs more than a
    /// whole small validation (glibc parses /proc/self/maps for the main thread), and shallow
    /// documents never need it.
    private var stack: StackGuard?
    /// Below this depth the stack is not checked: even debug frames cannot exhaust it there.
    static let uncheckedDepth = 64
    /// Set when evaluation ran out of depth or of pattern steps: the verdict is then "invalid"
    /// whatever the branches said, and this is the one error reported.
    private(set) var exhaustion: ValidationError?

    /// Steps every validation may spend in regular expressions, whatever it matches. With
    /// ``patternStepsPerCodePoint`` this bounds a validation's matching work by a line in the size
    /// of the text it matches: patterns that run in linear time never come near it, while
    /// catastrophic backtracking (`^(a+)+$` against forty `a`s and a `!`) runs out in
    /// milliseconds instead of pinning a core for hours.
    static let patternBaseSteps = 1_000_000
    /// Steps added to the budget for each code point of each text a pattern is matched against.
    static let patternStepsPerCodePoint = 64
    private var patternBudget = MatchBudget(steps: Evaluator.patternBaseSteps)
    /// Instance locations to treat as secret whatever path the evaluation took to them (a
    /// secret reached through one branch is still a secret in another's message); see
    /// ``JSONSchema/validate(_:)``.
    var secretLocations: Set<JSONPointer>?

    /// Adds ``patternStepsPerCodePoint`` steps for each code point of `text` (counted as UTF-8
    /// bytes: never fewer) to `budget`, before matching `text`.
    static func topUp(_ budget: inout MatchBudget, toMatch text: String) {
        let allowance = (text.utf8.count + 1).multipliedReportingOverflow(by: patternStepsPerCodePoint)
        let sum = budget.steps.addingReportingOverflow(allowance.partialValue)
        budget.steps = allowance.overflow || sum.overflow ? .max : sum.partialValue
    }

    init(schema: JSONSchema, collectsErrors: Bool) {
        nodes = schema.nodes
        resources = schema.resources
        self.collectsErrors = collectsErrors
    }

    /// Evaluates node `index` against `instance`; when `collecting`, adds what it evaluated to
    /// `annotations` (only if it is valid: a failing schema's annotations are dropped).
    mutating func evaluate(
        _ index: Int, _ instance: JSONValue, at path: InstancePath?, annotations: inout Annotations, collecting: Bool,
        secret: Bool
    ) -> Bool {
        if let constant = nodes[index].node.constant {
            if !constant { report(at: path, keywordLocation: nodes[index].node.location, "no value is allowed here") }
            return constant
        }
        depth += 1
        defer { depth -= 1 }
        guard depth <= Self.maximumDepth, depth < Self.uncheckedDepth || hasStackRoom() else {
            if exhaustion == nil {
                exhaustion = ValidationError(
                    instanceLocation: InstancePath.pointer(path), keywordLocation: nodes[index].node.location,
                    message: "evaluation nests too deeply here (\(depth) levels; a $ref cycle that never moves into the instance?)")
            }
            return false
        }
        let resource = nodes[index].node.resource
        let entersResource = dynamicScope.last != resource
        if entersResource { dynamicScope.append(resource) }
        defer { if entersResource { dynamicScope.removeLast() } }

        let markedSecret = secretLocations.map { $0.contains(InstancePath.pointer(path)) } ?? false
        var frame = Frame(
            node: index, path: path, collect: collecting || nodes[index].node.needsAnnotations,
            secret: secret || nodes[index].node.isSecret || markedSecret
        )
        guard evaluateKeywords(&frame, instance) else { return false }
        if frame.valid && collecting { annotations.merge(frame.local) }
        return frame.valid
    }

    /// Evaluates every keyword of the frame's node, in a fixed order. Returns false when it
    /// stopped early (a failure while errors are not collected).
    private mutating func evaluateKeywords(_ frame: inout Frame, _ instance: JSONValue) -> Bool {
        let secret = frame.secret
        let compiled = nodes[frame.node]
        if let ref = compiled.node.ref, apply(&frame, ref, instance) { return false }
        if let dynamic = compiled.node.dynamicRef, apply(&frame, resolve(dynamic), instance) { return false }

        if let types = compiled.node.types, !types.admits(instance),
            fail(&frame, "type", "must be \(types.phrase) (got \(instance.typeName)\(Self.quoted(instance, secret: secret, prefix: " ")))")
        {
            return false
        }
        if let allowed = compiled.node.enumValues, !allowed.contains(instance),
            fail(&frame, "enum", "must be one of \(Self.list(allowed, secret: secret))\(Self.got(instance, secret: secret))")
        {
            return false
        }
        if let constant = compiled.node.constValue, constant != instance,
            fail(&frame, "const", "must be \(Self.quoted(constant, secret: secret))\(Self.got(instance, secret: secret))")
        {
            return false
        }

        switch instance {
        case .number(let number):
            if !evaluateNumber(&frame, compiled, number) { return false }
        case .string(let text):
            if !evaluateString(&frame, compiled, text) { return false }
        case .array(let elements):
            if !evaluateArray(&frame, compiled, elements) { return false }
        case .object(let object):
            if !evaluateObject(&frame, compiled, object) { return false }
        default:
            break
        }

        if !evaluateLogic(&frame, compiled, instance) { return false }
        return evaluateUnevaluated(&frame, compiled, instance)
    }

    // MARK: - Keyword groups

    private mutating func evaluateNumber(_ frame: inout Frame, _ compiled: CompiledNode, _ number: JSONNumber) -> Bool {
        let secret = frame.secret
        for bound in compiled.node.bounds where !bound.admits(number) {
            if fail(&frame, bound.keyword, "must be \(bound.phrase)\(Self.got(.number(number), secret: secret))") { return false }
        }
        if let divisor = compiled.node.multipleOf, !NumericBound.isMultiple(number, of: divisor),
            fail(&frame, "multipleOf", "must be a multiple of \(divisor)\(Self.got(.number(number), secret: secret))")
        {
            return false
        }
        return true
    }

    private mutating func evaluateString(_ frame: inout Frame, _ compiled: CompiledNode, _ text: String) -> Bool {
        let secret = frame.secret
        if compiled.node.minLength != nil || compiled.node.maxLength != nil {
            let length = text.unicodeScalars.count
            if let minimum = compiled.node.minLength, length < minimum,
                fail(&frame, "minLength", "must be at least \(Self.plural(minimum, "character")) long (got \(length))")
            {
                return false
            }
            if let maximum = compiled.node.maxLength, length > maximum,
                fail(&frame, "maxLength", "must be at most \(Self.plural(maximum, "character")) long (got \(length))")
            {
                return false
            }
        }
        if let pattern = compiled.node.pattern {
            guard
                let matches = self.matches(pattern, text, at: frame.path, keywordLocation: compiled.node.location + "/pattern", "the value")
            else {
                frame.valid = false
                return false
            }
            if !matches,
                fail(&frame, "pattern", "must match the pattern \(pattern.source)\(Self.got(.string(text), secret: secret))")
            {
                return false
            }
        }
        return true
    }

    /// Whether `text` matches `pattern`, within the validation's pattern budget; nil when the
    /// budget ran out, which ends the validation with one error naming the keyword.
    private mutating func matches(
        _ pattern: CompiledPattern, _ text: String, at path: InstancePath?, keywordLocation: @autoclosure () -> String, _ what: String
    ) -> Bool? {
        guard exhaustion == nil else { return nil }
        Self.topUp(&patternBudget, toMatch: text)
        switch pattern.regex.matches(text, budget: &patternBudget) {
        case .match: return true
        case .noMatch: return false
        case .outOfSteps:
            exhaustion = ValidationError(
                instanceLocation: InstancePath.pointer(path), keywordLocation: keywordLocation(),
                message: "\(what) is too expensive to check against \(keywordLocation()): the regular expression backtracks too much")
            return nil
        }
    }

    private mutating func evaluateArray(_ frame: inout Frame, _ compiled: CompiledNode, _ elements: [JSONValue]) -> Bool {
        if let minimum = compiled.node.minItems, elements.count < minimum,
            fail(&frame, "minItems", "must have at least \(Self.plural(minimum, "item")) (got \(elements.count))")
        {
            return false
        }
        if let maximum = compiled.node.maxItems, elements.count > maximum,
            fail(&frame, "maxItems", "must have at most \(Self.plural(maximum, "item")) (got \(elements.count))")
        {
            return false
        }
        if compiled.node.uniqueItems, let (first, second) = Self.firstDuplicate(elements),
            fail(&frame, "uniqueItems", "items \(first) and \(second) are equal; every item must be unique")
        {
            return false
        }
        let prefixCount = min(compiled.node.prefixItems.count, elements.count)
        for position in 0..<prefixCount {
            if apply(&frame, compiled.node.prefixItems[position], elements[position], child: String(position)) { return false }
        }
        if frame.collect { frame.local.evaluatedPrefix = max(frame.local.evaluatedPrefix, prefixCount) }
        if let items = compiled.node.items {
            for position in prefixCount..<elements.count {
                let stop = apply(
                    &frame, items, elements[position], child: String(position),
                    forbidden: (
                        "items", "no item is allowed at this position (at most \(Self.plural(compiled.node.prefixItems.count, "item")))"
                    ))
                if stop { return false }
            }
            if frame.collect { frame.local.allItems = true }
        }
        if let contains = compiled.node.contains {
            var matching: [Int] = []
            let secret = frame.secret
            silently { evaluator in
                for (position, element) in elements.enumerated() {
                    var ignored = Annotations()
                    if evaluator.evaluate(contains, element, at: nil, annotations: &ignored, collecting: false, secret: secret) {
                        matching.append(position)
                    }
                }
            }
            let minimum = compiled.node.minContains ?? 1
            if matching.count < minimum,
                fail(
                    &frame, compiled.node.minContains == nil ? "contains" : "minContains",
                    "must contain at least \(Self.plural(minimum, "item")) matching contains (found \(matching.count))")
            {
                return false
            }
            if let maximum = compiled.node.maxContains, matching.count > maximum,
                fail(
                    &frame, "maxContains",
                    "must contain at most \(Self.plural(maximum, "item")) matching contains (found \(matching.count))")
            {
                return false
            }
            if frame.collect { frame.local.items.formUnion(matching) }
        }
        return true
    }

    private mutating func evaluateObject(_ frame: inout Frame, _ compiled: CompiledNode, _ object: JSONObject) -> Bool {
        if let minimum = compiled.node.minProperties, object.count < minimum,
            fail(&frame, "minProperties", "must have at least \(Self.plural(minimum, "property", "properties")) (got \(object.count))")
        {
            return false
        }
        if let maximum = compiled.node.maxProperties, object.count > maximum,
            fail(&frame, "maxProperties", "must have at most \(Self.plural(maximum, "property", "properties")) (got \(object.count))")
        {
            return false
        }
        for name in compiled.node.required where object[name] == nil {
            if fail(&frame, "required", "missing required property \(Self.quoted(.string(name), secret: false))") { return false }
        }
        for dependency in compiled.node.dependentRequired where object[dependency.name] != nil {
            for name in dependency.required where object[name] == nil {
                let message =
                    "missing property \(Self.quoted(.string(name), secret: false)), required when \(Self.quoted(.string(dependency.name), secret: false)) is present"
                if fail(&frame, "dependentRequired", message) { return false }
            }
        }
        if let names = compiled.node.propertyNames {
            for key in object.keys {
                let mark = errors.count
                var ignored = Annotations()
                if evaluate(names, .string(key), at: frame.path, annotations: &ignored, collecting: false, secret: false) { continue }
                let reasons = errors[mark...].map(\.message).joined(separator: "; ")
                errors.removeSubrange(mark...)
                let because = reasons.isEmpty ? "" : ": " + reasons
                if fail(
                    &frame, "propertyNames", at: childPath(frame.path, key),
                    "the property name \(Self.quoted(.string(key), secret: false)) is not allowed\(because)")
                {
                    return false
                }
            }
        }
        guard !compiled.node.properties.isEmpty || !compiled.node.patternProperties.isEmpty || compiled.node.additionalProperties != nil
        else { return true }
        for (key, value) in object {
            var matched = false
            if let schema = compiled.node.properties[key] {
                matched = true
                if apply(&frame, schema, value, child: key) { return false }
            }
            for entry in compiled.node.patternProperties {
                let location = compiled.node.location + "/patternProperties/" + JSONPointer.escape(entry.pattern.source)
                guard
                    let matches = self.matches(
                        entry.pattern, key, at: childPath(frame.path, key), keywordLocation: location, "the property name")
                else {
                    frame.valid = false
                    return false
                }
                guard matches else { continue }
                matched = true
                if apply(&frame, entry.schema, value, child: key) { return false }
            }
            if !matched, let additional = compiled.node.additionalProperties {
                matched = true
                if apply(&frame, additional, value, child: key, forbidden: ("additionalProperties", Self.unknownProperty(key))) {
                    return false
                }
            }
            if matched && frame.collect { frame.local.properties.insert(key) }
        }
        return true
    }

    private mutating func evaluateLogic(_ frame: inout Frame, _ compiled: CompiledNode, _ instance: JSONValue) -> Bool {
        for branch in compiled.node.allOf where apply(&frame, branch, instance) { return false }
        if !compiled.node.anyOf.isEmpty {
            let mark = errors.count
            var matched = 0
            for branch in compiled.node.anyOf
            where evaluate(branch, instance, at: frame.path, annotations: &frame.local, collecting: frame.collect, secret: frame.secret) {
                matched += 1
                if !frame.collect { break }  // With annotations, every matching branch counts.
            }
            errors.removeSubrange(mark...)
            if matched == 0, fail(&frame, "anyOf", "must match at least one of the \(compiled.node.anyOf.count) schemas in anyOf") {
                return false
            }
        }
        if !compiled.node.oneOf.isEmpty {
            let mark = errors.count
            var matches: [Int] = []
            for (position, branch) in compiled.node.oneOf.enumerated()
            where evaluate(branch, instance, at: frame.path, annotations: &frame.local, collecting: frame.collect, secret: frame.secret) {
                matches.append(position)
            }
            errors.removeSubrange(mark...)
            if matches.count != 1 {
                let detail = matches.isEmpty ? "it matches none" : "it matches \(matches.map(String.init).joined(separator: " and "))"
                if fail(&frame, "oneOf", "must match exactly one of the \(compiled.node.oneOf.count) schemas in oneOf (\(detail))") {
                    return false
                }
            }
        }
        if let negated = compiled.node.not {
            let secret = frame.secret
            let path = frame.path
            let matches = silently { evaluator in
                var ignored = Annotations()
                return evaluator.evaluate(negated, instance, at: path, annotations: &ignored, collecting: false, secret: secret)
            }
            if matches, fail(&frame, "not", "must not match the schema in not") { return false }
        }
        if let condition = compiled.node.ifSchema {
            let saved = collectsErrors
            collectsErrors = false
            let holds = evaluate(
                condition, instance, at: frame.path, annotations: &frame.local, collecting: frame.collect, secret: frame.secret)
            collectsErrors = saved
            if holds, let then = compiled.node.thenSchema, apply(&frame, then, instance) { return false }
            if !holds, let otherwise = compiled.node.elseSchema, apply(&frame, otherwise, instance) { return false }
        }
        if case .object(let object) = instance {
            for dependent in compiled.node.dependentSchemas where object[dependent.name] != nil {
                if apply(&frame, dependent.schema, instance) { return false }
            }
        }
        return true
    }

    /// `unevaluatedItems` and `unevaluatedProperties`: last, once every other keyword has
    /// recorded what it evaluated.
    private mutating func evaluateUnevaluated(_ frame: inout Frame, _ compiled: CompiledNode, _ instance: JSONValue) -> Bool {
        if let unevaluated = compiled.node.unevaluatedItems, case .array(let elements) = instance {
            for (position, element) in elements.enumerated() where !frame.local.isEvaluated(item: position) {
                if apply(
                    &frame, unevaluated, element, child: String(position),
                    forbidden: ("unevaluatedItems", "no item is allowed at this position"))
                {
                    return false
                }
            }
            frame.local.allItems = true
        }
        if let unevaluated = compiled.node.unevaluatedProperties, case .object(let object) = instance {
            for (key, value) in object where !frame.local.properties.contains(key) {
                if apply(&frame, unevaluated, value, child: key, forbidden: ("unevaluatedProperties", Self.unknownProperty(key))) {
                    return false
                }
            }
            frame.local.properties.formUnion(object.keys)
        }
        return true
    }

    // MARK: - Helpers

    /// Records a failure of `keyword`; returns true when evaluation should stop (the first
    /// failure is enough when errors are not collected).
    private mutating func fail(
        _ frame: inout Frame, _ keyword: String, at location: InstancePath?? = nil, _ message: @autoclosure () -> String
    ) -> Bool {
        frame.valid = false
        guard collectsErrors else { return true }
        errors.append(
            ValidationError(
                instanceLocation: InstancePath.pointer(location ?? frame.path),
                keywordLocation: nodes[frame.node].node.location + "/" + keyword,
                message: message()))
        return false
    }

    /// Applies `child` to the instance itself (in place: its annotations count here); returns
    /// true when evaluation should stop.
    private mutating func apply(_ frame: inout Frame, _ child: Int, _ instance: JSONValue) -> Bool {
        if evaluate(child, instance, at: frame.path, annotations: &frame.local, collecting: frame.collect, secret: frame.secret) {
            return false
        }
        frame.valid = false
        return !collectsErrors
    }

    /// Applies `child` to a member or item of the instance; returns true when evaluation should
    /// stop.
    ///
    /// `forbidden` gives the keyword and message to report when `child` is the `false` schema
    /// (an item past `items: false`, a property refused by `additionalProperties: false`), which
    /// says more than the `false` schema's own "no value is allowed here". The message is only
    /// built when it is reported.
    private mutating func apply(
        _ frame: inout Frame, _ child: Int, _ value: JSONValue, child token: String,
        forbidden: @autoclosure () -> (keyword: String, message: String)? = nil
    ) -> Bool {
        if nodes[child].node.constant == false, let forbidden = forbidden() {
            return fail(&frame, forbidden.keyword, at: childPath(frame.path, token), forbidden.message)
        }
        var ignored = Annotations()
        if evaluate(child, value, at: childPath(frame.path, token), annotations: &ignored, collecting: false, secret: frame.secret) {
            return false
        }
        frame.valid = false
        return !collectsErrors
    }

    /// `unknown property "colour"`.
    private static func unknownProperty(_ key: String) -> String {
        "unknown property \(quoted(.string(key), secret: false))"
    }

    /// Runs `body` with error collection off (for subschemas whose failing is not itself an
    /// error: `not` and `contains`).
    private mutating func silently<Result>(_ body: (inout Evaluator) -> Result) -> Result {
        let saved = collectsErrors
        collectsErrors = false
        defer { collectsErrors = saved }
        return body(&self)
    }

    private func childPath(_ path: InstancePath?, _ token: String) -> InstancePath? {
        collectsErrors ? InstancePath(parent: path, token: token) : nil
    }

    private func resolve(_ reference: DynamicReference) -> Int {
        guard let anchor = reference.anchor else { return reference.target }
        for resource in dynamicScope {
            if let target = resources[resource].dynamicAnchors[anchor] { return target }
        }
        return reference.target
    }

    private mutating func hasStackRoom() -> Bool {
        if stack == nil { stack = StackGuard() }
        return stack?.hasRoom() ?? true
    }

    /// Records a failure that belongs to a whole subschema (a `false` schema, the depth guard).
    private mutating func report(at path: InstancePath?, keywordLocation: String, _ message: String) {
        guard collectsErrors else { return }
        errors.append(ValidationError(instanceLocation: InstancePath.pointer(path), keywordLocation: keywordLocation, message: message))
    }

    private static func firstDuplicate(_ elements: [JSONValue]) -> (Int, Int)? {
        var seen: [JSONValue: Int] = [:]
        for (position, element) in elements.enumerated() {
            if let earlier = seen.updateValue(position, forKey: element) { return (earlier, position) }
        }
        return nil
    }
}
