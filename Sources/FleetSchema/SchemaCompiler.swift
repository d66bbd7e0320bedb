import ECMARegex
import FleetJSON

/// Turns a schema document (and whatever it refers to in the registry) into a graph of
/// ``SchemaNode``s.
///
/// Only subschemas reachable from the root are compiled. Nodes are allocated when first
/// referred to and filled from a work list, so recursive schemas and long `$ref` chains never
/// recurse on the stack.
struct SchemaCompiler {
    private(set) var registry: SchemaRegistry
    let options: JSONSchema.Options
    let rootDocument: Int

    private(set) var nodes: [SchemaNode] = []
    private var nodeIndex: [SchemaLocation: Int] = [:]
    private(set) var resources: [SchemaResource] = []
    private var resourceIndex: [String: Int] = [:]
    private var pending: [(index: Int, location: SchemaLocation)] = []
    private var dialects: [SchemaLocation: Vocabularies] = [:]
    /// The anchor names some `$dynamicRef` may look up in the dynamic scope.
    private var dynamicAnchorNames: Set<String> = []

    /// The base URI given to a root schema without `$id`. Relative references resolve against
    /// it, and it never collides with a registered document.
    static let defaultRootURI = "urn:fleetset:schema"

    init(schema: JSONValue, registry: SchemaRegistry, options: JSONSchema.Options) {
        var registry = registry
        rootDocument = registry.documents.count
        registry.register(schema, as: Self.defaultRootURI)
        self.registry = registry
        self.options = options
    }

    /// Compiles everything reachable from the root; returns the root node's index.
    mutating func compile() throws(SchemaError) -> Int {
        let root = try allocate(at: SchemaLocation(document: rootDocument, pointer: .root))
        repeat {
            while let (index, location) = pending.popLast() {
                try fill(index, from: location)
            }
            try allocateDynamicAnchors()
        } while !pending.isEmpty
        return root
    }

    // MARK: - Locations and references

    /// `#/properties/a` for the schema being compiled, `URI#/pointer` for other documents.
    func describe(_ location: SchemaLocation) -> String {
        let pointer = location.pointer.description
        if location.document == rootDocument { return "#" + pointer }
        return registry.documentURIs[location.document] + "#" + pointer
    }

    private mutating func allocate(at location: SchemaLocation) throws(SchemaError) -> Int {
        if let existing = nodeIndex[location] { return existing }
        let index = nodes.count
        nodes.append(SchemaNode())
        nodeIndex[location] = index
        pending.append((index, location))
        return index
    }

    /// The node for the subschema at `keyword` below `location`, which must be a schema.
    private mutating func subschema(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> Int {
        switch value {
        case .object, .bool: return try allocate(at: location)
        default: throw SchemaError(.invalid, at: describe(location), "must be a schema (an object or a Boolean)")
        }
    }

    private func baseURI(of location: SchemaLocation) -> URIReference {
        if let known = registry.baseURIs[location] { return URIReference(known) }
        // Reached through a JSON pointer into a place the index did not walk (say, under an
        // unknown keyword): inherit from the nearest indexed ancestor, then apply its own `$id`.
        var tokens = location.pointer.tokens
        var base = URIReference(registry.documentURIs[location.document])
        while !tokens.isEmpty {
            tokens.removeLast()
            if let known = registry.baseURIs[SchemaLocation(document: location.document, pointer: JSONPointer(tokens: tokens))] {
                base = URIReference(known)
                break
            }
        }
        if case .string(let id)? = registry.documents[location.document][pointer: location.pointer]?["$id"] {
            base = base.resolving(id).withoutFragment
        }
        return base
    }

    /// Where a `$ref` or `$dynamicRef` value points, resolved against `base`.
    private func resolve(_ reference: String, base: URIReference, at keywordLocation: SchemaLocation) throws(SchemaError)
        -> SchemaLocation
    {
        let target = base.resolving(reference)
        let resourceURI = target.withoutFragment.description
        guard let resource = registry.resources[resourceURI] else {
            if base.description == Self.defaultRootURI && !target.withoutFragment.description.hasPrefix(Self.defaultRootURI) {
                throw SchemaError(
                    .invalid, at: describe(keywordLocation),
                    "\"\(reference)\" is relative, but the schema has no \"$id\" to resolve it against (fleetset never downloads schemas: register the document and refer to it by its URI)"
                )
            }
            throw SchemaError(
                .invalid, at: describe(keywordLocation),
                "\"\(reference)\" refers to \"\(resourceURI)\", which is not a known schema (fleetset never downloads schemas: register the document)"
            )
        }
        let fragment = Self.percentDecoded(target.fragment ?? "")
        if fragment.isEmpty { return resource }
        if fragment.hasPrefix("/") {
            guard let pointer = JSONPointer(fragment) else {
                throw SchemaError(.invalid, at: describe(keywordLocation), "\"\(reference)\" has a malformed JSON pointer")
            }
            let location = SchemaLocation(
                document: resource.document, pointer: JSONPointer(tokens: resource.pointer.tokens + pointer.tokens))
            guard registry.documents[location.document][pointer: location.pointer] != nil else {
                throw SchemaError(.invalid, at: describe(keywordLocation), "\"\(reference)\" points to nothing")
            }
            return location
        }
        guard let anchored = registry.anchors[resourceURI + "#" + fragment] else {
            throw SchemaError(
                .invalid, at: describe(keywordLocation), "\"\(reference)\": no \"$anchor\" named \"\(fragment)\" in \"\(resourceURI)\"")
        }
        return anchored
    }

    private static func percentDecoded(_ text: String) -> String {
        guard text.contains("%") else { return text }
        var bytes: [UInt8] = []
        var utf8 = Array(text.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "%"), utf8.count >= 2,
                let value = UInt8(String(decoding: utf8.prefix(2), as: UTF8.self), radix: 16)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private mutating func resourceNumber(_ uri: String) -> Int {
        if let existing = resourceIndex[uri] { return existing }
        resources.append(SchemaResource(uri: uri))
        resourceIndex[uri] = resources.count - 1
        return resources.count - 1
    }

    /// The vocabularies in force at `location`: those of the `$schema` of the nearest enclosing
    /// resource root that names one; 2020-12 when none does.
    private mutating func vocabularies(at location: SchemaLocation) throws(SchemaError) -> Vocabularies {
        var tokens = location.pointer.tokens
        while true {
            let candidate = SchemaLocation(document: location.document, pointer: JSONPointer(tokens: tokens))
            if let cached = dialects[candidate] { return cached }
            if registry.baseURIs[candidate] != nil,
                case .object(let object)? = registry.documents[candidate.document][pointer: candidate.pointer],
                tokens.isEmpty || object["$id"] != nil, let declared = object["$schema"]
            {
                guard case .string(let uri) = declared else {
                    throw SchemaError(.invalid, at: describe(candidate.appending("$schema")), "must be a URI string")
                }
                let vocabularies = try Vocabularies.dialect(uri, registry: registry, at: describe(candidate.appending("$schema")))
                dialects[candidate] = vocabularies
                return vocabularies
            }
            if tokens.isEmpty { return .all }
            tokens.removeLast()
        }
    }

    // MARK: - Compiling one subschema

    private mutating func fill(_ index: Int, from location: SchemaLocation) throws(SchemaError) {
        guard let value = registry.documents[location.document][pointer: location.pointer] else {
            preconditionFailure("node allocated for a location that does not exist")
        }
        var node = SchemaNode()
        node.location = describe(location)
        let base = baseURI(of: location)
        node.resource = resourceNumber(base.description)
        switch value {
        case .bool(let constant):
            node.constant = constant
        case .object(let object):
            let vocabularies = try vocabularies(at: location)
            for (keyword, member) in object {
                try read(keyword, member, into: &node, at: location, base: base, vocabularies: vocabularies)
            }
            if node.minContains != nil || node.maxContains != nil, node.contains == nil {
                node.minContains = nil
                node.maxContains = nil
            }
        default:
            throw SchemaError(.invalid, at: describe(location), "must be a schema (an object or a Boolean)")
        }
        nodes[index] = node
    }

    private mutating func read(
        _ keyword: String, _ value: JSONValue, into node: inout SchemaNode, at schemaLocation: SchemaLocation,
        base: URIReference, vocabularies: Vocabularies
    ) throws(SchemaError) {
        let location = schemaLocation.appending(keyword)
        let applicator = vocabularies.contains(.applicator)
        let validation = vocabularies.contains(.validation)
        switch keyword {
        case "$ref":
            node.ref = try allocate(at: resolve(try string(value, at: location), base: base, at: location))
        case "$dynamicRef":
            node.dynamicRef = try dynamicReference(try string(value, at: location), base: base, at: location)
        case "$id", "$schema", "$anchor", "$dynamicAnchor", "$comment":
            _ = try string(value, at: location)
        case "$defs", "$vocabulary":
            guard case .object = value else { throw SchemaError(.invalid, at: describe(location), "must be an object") }
        case "x-secret":
            node.isSecret = value == .bool(true)

        case "allOf" where applicator: node.allOf = try schemaArray(value, at: location)
        case "anyOf" where applicator: node.anyOf = try schemaArray(value, at: location)
        case "oneOf" where applicator: node.oneOf = try schemaArray(value, at: location)
        case "not" where applicator: node.not = try subschema(value, at: location)
        case "if" where applicator: node.ifSchema = try subschema(value, at: location)
        case "then" where applicator: node.thenSchema = try subschema(value, at: location)
        case "else" where applicator: node.elseSchema = try subschema(value, at: location)
        case "dependentSchemas" where applicator:
            node.dependentSchemas = try schemaMap(value, at: location).map { (name: $0.0, schema: $0.1) }
        case "prefixItems" where applicator: node.prefixItems = try schemaArray(value, at: location)
        case "items" where applicator: node.items = try subschema(value, at: location)
        case "contains" where applicator: node.contains = try subschema(value, at: location)
        case "properties" where applicator:
            node.properties = Dictionary(uniqueKeysWithValues: try schemaMap(value, at: location))
        case "patternProperties" where applicator:
            node.patternProperties = try schemaMap(value, at: location).map { (name, schema) throws(SchemaError) in
                (pattern: try compilePattern(name, at: location.appending(name)), schema: schema)
            }
        case "additionalProperties" where applicator: node.additionalProperties = try subschema(value, at: location)
        case "propertyNames" where applicator: node.propertyNames = try subschema(value, at: location)

        case "unevaluatedItems" where vocabularies.contains(.unevaluated):
            node.unevaluatedItems = try subschema(value, at: location)
        case "unevaluatedProperties" where vocabularies.contains(.unevaluated):
            node.unevaluatedProperties = try subschema(value, at: location)

        case "type" where validation: node.types = try typeSet(value, at: location)
        case "enum" where validation:
            guard case .array(let values) = value else { throw SchemaError(.invalid, at: describe(location), "must be an array") }
            node.enumValues = values
        case "const" where validation: node.constValue = value
        case "minimum" where validation: node.bounds.append(NumericBound(kind: .minimum, limit: try number(value, at: location)))
        case "maximum" where validation: node.bounds.append(NumericBound(kind: .maximum, limit: try number(value, at: location)))
        case "exclusiveMinimum" where validation:
            node.bounds.append(NumericBound(kind: .exclusiveMinimum, limit: try number(value, at: location)))
        case "exclusiveMaximum" where validation:
            node.bounds.append(NumericBound(kind: .exclusiveMaximum, limit: try number(value, at: location)))
        case "multipleOf" where validation:
            let divisor = try number(value, at: location)
            guard divisor.doubleValue > 0 else { throw SchemaError(.invalid, at: describe(location), "must be greater than 0") }
            node.multipleOf = divisor
        case "minLength" where validation: node.minLength = try count(value, at: location)
        case "maxLength" where validation: node.maxLength = try count(value, at: location)
        case "pattern" where validation: node.pattern = try compilePattern(try string(value, at: location), at: location)
        case "minItems" where validation: node.minItems = try count(value, at: location)
        case "maxItems" where validation: node.maxItems = try count(value, at: location)
        case "uniqueItems" where validation:
            guard case .bool(let unique) = value else { throw SchemaError(.invalid, at: describe(location), "must be a Boolean") }
            node.uniqueItems = unique
        case "minContains" where validation: node.minContains = try count(value, at: location)
        case "maxContains" where validation: node.maxContains = try count(value, at: location)
        case "minProperties" where validation: node.minProperties = try count(value, at: location)
        case "maxProperties" where validation: node.maxProperties = try count(value, at: location)
        case "required" where validation: node.required = try stringArray(value, at: location)
        case "dependentRequired" where validation:
            guard case .object(let members) = value else { throw SchemaError(.invalid, at: describe(location), "must be an object") }
            node.dependentRequired = try members.map { (name, names) throws(SchemaError) in
                (name: name, required: try stringArray(names, at: location.appending(name)))
            }

        case "dependencies" where applicator && validation:
            // Draft 7's keyword, split in 2019-09: honoured rather than silently ignored.
            guard case .object(let members) = value else { throw SchemaError(.invalid, at: describe(location), "must be an object") }
            for (name, dependency) in members {
                if case .array = dependency {
                    node.dependentRequired.append((name: name, required: try stringArray(dependency, at: location.appending(name))))
                } else {
                    node.dependentSchemas.append((name: name, schema: try subschema(dependency, at: location.appending(name))))
                }
            }
        case "format":
            _ = try string(value, at: location)  // An annotation: recorded by the metadata layer, never asserted.
        default:
            try acceptUnknown(keyword, at: location, vocabularies: vocabularies)
        }
    }

    /// Keywords with no assertion meaning: annotations, and keywords of vocabularies the
    /// dialect leaves out. With ``JSONSchema/Options/rejectsUnknownKeywords``, anything else that
    /// is not an `x-` extension is reported as unsupported rather than silently ignored (draft 7's
    /// `definitions` excepted: it only holds subschemas for `$ref`, so ignoring it loses nothing).
    private func acceptUnknown(_ keyword: String, at location: SchemaLocation, vocabularies: Vocabularies) throws(SchemaError) {
        guard options.rejectsUnknownKeywords, !keyword.hasPrefix("x-"), keyword != "definitions",
            SchemaKeywords.isTwentyTwentyKeyword(keyword) == false
        else { return }
        let hint =
            switch keyword {
            case "additionalItems": " (in 2020-12, \"items\" after \"prefixItems\" does this)"
            case "$recursiveRef", "$recursiveAnchor": " (in 2020-12, use \"$dynamicRef\" and \"$dynamicAnchor\")"
            case "id": " (the 2020-12 keyword is \"$id\")"
            default: ""
            }
        throw SchemaError(
            .unsupported, at: describe(location),
            "\"\(keyword)\" is not a JSON Schema 2020-12 keyword, so fleetset cannot honour it\(hint); extensions must start with \"x-\""
        )
    }

    private mutating func dynamicReference(_ reference: String, base: URIReference, at location: SchemaLocation) throws(SchemaError)
        -> DynamicReference
    {
        let target = try resolve(reference, base: base, at: location)
        let fragment = URIReference(reference).fragment ?? ""
        let targetNode = try allocate(at: target)
        // The dynamic behaviour applies only when the static target itself declares a matching
        // `$dynamicAnchor` (the "bookending" rule); otherwise `$dynamicRef` is a plain `$ref`.
        guard !fragment.isEmpty, !fragment.hasPrefix("/"),
            registry.documents[target.document][pointer: target.pointer]?["$dynamicAnchor"] == .string(fragment)
        else { return DynamicReference(target: targetNode, anchor: nil) }
        dynamicAnchorNames.insert(fragment)
        return DynamicReference(target: targetNode, anchor: fragment)
    }

    /// Compiles the `$dynamicAnchor`s a `$dynamicRef` may land on: those with a name some
    /// `$dynamicRef` uses, in resources that have compiled nodes (only those can be in the
    /// dynamic scope). Returns with new nodes pending when it allocated any.
    private mutating func allocateDynamicAnchors() throws(SchemaError) {
        guard !dynamicAnchorNames.isEmpty else { return }
        for number in resources.indices {
            guard let declared = registry.dynamicAnchors[resources[number].uri] else { continue }
            for name in dynamicAnchorNames where resources[number].dynamicAnchors[name] == nil {
                guard let location = declared[name] else { continue }
                resources[number].dynamicAnchors[name] = try allocate(at: location)
            }
        }
    }

    // MARK: - Keyword value readers

    private func string(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> String {
        guard case .string(let text) = value else { throw SchemaError(.invalid, at: describe(location), "must be a string") }
        return text
    }

    private func number(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> JSONNumber {
        guard case .number(let number) = value else { throw SchemaError(.invalid, at: describe(location), "must be a number") }
        return number
    }

    private func count(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> Int {
        guard case .number(let number) = value, number.isInteger, number.doubleValue >= 0 else {
            throw SchemaError(.invalid, at: describe(location), "must be a non-negative integer")
        }
        return number.int64Value.map { Int($0) } ?? Int.max
    }

    private func stringArray(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> [String] {
        guard case .array(let elements) = value else { throw SchemaError(.invalid, at: describe(location), "must be an array of strings") }
        var seen: Set<String> = []
        return try elements.map { element throws(SchemaError) in
            guard case .string(let text) = element else {
                throw SchemaError(.invalid, at: describe(location), "must be an array of strings")
            }
            guard seen.insert(text).inserted else {
                throw SchemaError(.invalid, at: describe(location), "lists \"\(text)\" twice")
            }
            return text
        }
    }

    private func typeSet(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> JSONTypeSet {
        let names: [JSONValue]
        switch value {
        case .string: names = [value]
        case .array(let elements): names = elements
        default: throw SchemaError(.invalid, at: describe(location), "must be a type name or an array of type names")
        }
        var types: JSONTypeSet = []
        for name in names {
            guard case .string(let text) = name, let type = JSONTypeSet(name: text) else {
                throw SchemaError(
                    .invalid, at: describe(location),
                    "\(name.serialized()) is not a type; use null, boolean, object, array, number, string or integer")
            }
            types.insert(type)
        }
        return types
    }

    private mutating func schemaArray(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> [Int] {
        guard case .array(let elements) = value, !elements.isEmpty else {
            throw SchemaError(.invalid, at: describe(location), "must be a non-empty array of schemas")
        }
        var indices: [Int] = []
        for (position, element) in elements.enumerated() {
            indices.append(try subschema(element, at: location.appending(String(position))))
        }
        return indices
    }

    private mutating func schemaMap(_ value: JSONValue, at location: SchemaLocation) throws(SchemaError) -> [(String, Int)] {
        guard case .object(let members) = value else {
            throw SchemaError(.invalid, at: describe(location), "must be an object whose values are schemas")
        }
        var result: [(String, Int)] = []
        for (name, member) in members {
            result.append((name, try subschema(member, at: location.appending(name))))
        }
        return result
    }

    private func compilePattern(_ source: String, at location: SchemaLocation) throws(SchemaError) -> CompiledPattern {
        do {
            return CompiledPattern(source: source, regex: try ECMAScriptPattern(source))
        } catch {
            let kind: SchemaError.Kind = error.kind == .unsupported ? .unsupported : .invalid
            // Quoted in part only: an attack can be hundreds of kilobytes long.
            let shown = source.unicodeScalars.count > 80 ? String(String.UnicodeScalarView(source.unicodeScalars.prefix(80))) + "…" : source
            throw SchemaError(
                kind, at: describe(location), "the regular expression \(JSONValue.string(shown).serialized()): \(error.message)")
        }
    }
}

extension SchemaKeywords {
    /// Whether `keyword` belongs to one of the 2020-12 vocabularies (core, applicator,
    /// unevaluated, validation, meta-data, format, content).
    static func isTwentyTwentyKeyword(_ keyword: String) -> Bool {
        twentyTwentyKeywords.contains(keyword)
    }

    private static let twentyTwentyKeywords: Set<String> = [
        "$schema", "$id", "$ref", "$anchor", "$dynamicRef", "$dynamicAnchor", "$vocabulary", "$comment", "$defs",
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "dependentSchemas", "prefixItems", "items", "contains",
        "properties", "patternProperties", "additionalProperties", "propertyNames", "unevaluatedItems",
        "unevaluatedProperties", "type", "enum", "const", "multipleOf", "maximum", "exclusiveMaximum", "minimum",
        "exclusiveMinimum", "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "maxContains",
        "minContains", "maxProperties", "minProperties", "required", "dependentRequired", "title", "description",
        "default", "deprecated", "readOnly", "writeOnly", "examples", "format", "contentEncoding", "contentMediaType",
        "contentSchema",
    ]
}
