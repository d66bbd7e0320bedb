import ECMARegex
import FleetJSON

/// The JSON types a `type` keyword can name; `integer` is a subset of `number`.
struct JSONTypeSet: OptionSet, Sendable {
    let rawValue: UInt8

    static let null = JSONTypeSet(rawValue: 1 << 0)
    static let boolean = JSONTypeSet(rawValue: 1 << 1)
    static let object = JSONTypeSet(rawValue: 1 << 2)
    static let array = JSONTypeSet(rawValue: 1 << 3)
    static let number = JSONTypeSet(rawValue: 1 << 4)
    static let string = JSONTypeSet(rawValue: 1 << 5)
    static let integer = JSONTypeSet(rawValue: 1 << 6)

    static let names: [(String, JSONTypeSet)] = [
        ("null", .null), ("boolean", .boolean), ("object", .object), ("array", .array), ("number", .number),
        ("string", .string), ("integer", .integer),
    ]

    init(rawValue: UInt8) { self.rawValue = rawValue }

    init?(name: String) {
        guard let match = Self.names.first(where: { $0.0 == name }) else { return nil }
        self = match.1
    }

    func admits(_ value: JSONValue) -> Bool {
        switch value {
        case .null: contains(.null)
        case .bool: contains(.boolean)
        case .object: contains(.object)
        case .array: contains(.array)
        case .string: contains(.string)
        case .number(let number): contains(.number) || (contains(.integer) && number.isInteger)
        }
    }

    /// `string`, `string or null`, `integer, string or null`.
    var phrase: String {
        let listed = Self.names.filter { contains($0.1) }.map(\.0)
        guard listed.count > 1 else { return listed.first ?? "nothing" }
        return listed.dropLast().joined(separator: ", ") + " or " + listed[listed.count - 1]
    }
}

/// A numeric bound keyword: `minimum`, `exclusiveMaximum` and so on.
struct NumericBound: Sendable {
    enum Kind: Sendable {
        case minimum, exclusiveMinimum, maximum, exclusiveMaximum
    }
    var kind: Kind
    var limit: JSONNumber
}

/// A compiled `pattern` or `patternProperties` entry.
struct CompiledPattern: Sendable {
    var source: String
    var regex: ECMAScriptPattern
}

/// One compiled subschema. Subschemas refer to each other by index into
/// ``CompiledSchemaGraph/nodes``, so recursive schemas are plain cycles of indices.
struct SchemaNode: Sendable {
    /// Where the subschema is, for error messages: `#/properties/duration`.
    var location: String = ""
    /// The schema resource the node belongs to (index into the graph's resources).
    var resource: Int = 0
    /// `true` or `false` for a Boolean schema, `nil` for an object schema.
    var constant: Bool?
    /// Set by `x-secret: true`: values here and below are never quoted in messages.
    var isSecret = false

    // Core applicators.
    var ref: Int?
    var dynamicRef: DynamicReference?

    // Applicator vocabulary.
    var allOf: [Int] = []
    var anyOf: [Int] = []
    var oneOf: [Int] = []
    var not: Int?
    var ifSchema: Int?
    var thenSchema: Int?
    var elseSchema: Int?
    var dependentSchemas: [(name: String, schema: Int)] = []
    var prefixItems: [Int] = []
    var items: Int?
    var contains: Int?
    var properties: [String: Int] = [:]
    var patternProperties: [(pattern: CompiledPattern, schema: Int)] = []
    var additionalProperties: Int?
    var propertyNames: Int?

    // Unevaluated vocabulary.
    var unevaluatedItems: Int?
    var unevaluatedProperties: Int?

    // Validation vocabulary.
    var types: JSONTypeSet?
    var enumValues: [JSONValue]?
    var constValue: JSONValue?
    var bounds: [NumericBound] = []
    var multipleOf: JSONNumber?
    var minLength: Int?
    var maxLength: Int?
    var pattern: CompiledPattern?
    var minItems: Int?
    var maxItems: Int?
    var uniqueItems = false
    var minContains: Int?
    var maxContains: Int?
    var minProperties: Int?
    var maxProperties: Int?
    var required: [String] = []
    var dependentRequired: [(name: String, required: [String])] = []

    /// Whether evaluating this node must collect which properties and items it evaluated.
    var needsAnnotations: Bool { unevaluatedItems != nil || unevaluatedProperties != nil }

    /// Whether the node applies other schemas to the same instance (so it can contribute
    /// annotations to an `unevaluated*` keyword above it).
    var hasInPlaceApplicators: Bool {
        ref != nil || dynamicRef != nil || !allOf.isEmpty || !anyOf.isEmpty || !oneOf.isEmpty || ifSchema != nil
            || !dependentSchemas.isEmpty
    }
}

/// A finished node, shared by reference: evaluation reads its fields in place instead of
/// copying a struct of some thirty fields (and retaining each) at every step.
final class CompiledNode: Sendable {
    let node: SchemaNode

    init(_ node: SchemaNode) {
        self.node = node
    }
}

/// A compiled `$dynamicRef`: where it points statically, and the anchor name to look for in
/// the dynamic scope when the static target declares a matching `$dynamicAnchor`.
struct DynamicReference: Sendable {
    var target: Int
    var anchor: String?
}

/// A schema resource (a document root or a subschema with `$id`), with its dynamic anchors.
struct SchemaResource: Sendable {
    var uri: String
    var dynamicAnchors: [String: Int] = [:]
}
