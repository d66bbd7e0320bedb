import FleetJSON

/// The schema documents a ``JSONSchema`` may refer to, keyed by URI.
///
/// JSON Schema identifies documents by URI, and `$ref` may point into another document. The
/// validator never fetches anything: every document a schema refers to must be registered here
/// first. A new registry already holds the JSON Schema 2020-12 meta-schemas, so
/// `"$ref": "https://json-schema.org/draft/2020-12/schema"` works out of the box.
///
/// Registering a document also indexes the resources (`$id`), anchors (`$anchor`) and dynamic
/// anchors (`$dynamicAnchor`) embedded in it.
public struct SchemaRegistry: Sendable {
    var documents: [JSONValue] = []
    /// The URI each document was registered under (its retrieval URI).
    var documentURIs: [String] = []
    /// Schema resource URI (no fragment) → where its root is.
    var resources: [String: SchemaLocation] = [:]
    /// `resource#name` → the subschema that declares `$anchor` or `$dynamicAnchor` `name`.
    var anchors: [String: SchemaLocation] = [:]
    /// Resource URI → dynamic anchor name → the subschema that declares it.
    var dynamicAnchors: [String: [String: SchemaLocation]] = [:]
    /// The base URI in effect at each indexed subschema.
    var baseURIs: [SchemaLocation: String] = [:]

    /// A registry with the JSON Schema 2020-12 meta-schema and its vocabulary meta-schemas.
    public init() {
        self = Self.withMetaSchemas
    }

    /// A registry that starts empty when `includingMetaSchemas` is false.
    public init(includingMetaSchemas: Bool) {
        self = includingMetaSchemas ? Self.withMetaSchemas : SchemaRegistry(empty: ())
    }

    private init(empty: ()) {}

    /// The meta-schemas, parsed and indexed once per process.
    private static let withMetaSchemas: SchemaRegistry = {
        var registry = SchemaRegistry(empty: ())
        for text in MetaSchemas.documents {
            // The embedded documents are generated from the official files and read in the tests.
            guard let document = try? JSONParser.parse(text), let id = document["$id"]?.stringValue else {
                preconditionFailure("embedded 2020-12 meta-schema does not parse")
            }
            registry.register(document, as: id)
        }
        return registry
    }()

    /// Adds `document` under the absolute URI it would be retrieved from (for the official test
    /// suite's remotes, `http://localhost:1234/<path>`).
    ///
    /// An `$id` inside the document takes precedence for the resources it declares; the
    /// retrieval URI stays a second name for the document root.
    public mutating func register(_ document: JSONValue, as uri: String) {
        let documentIndex = documents.count
        documents.append(document)
        documentURIs.append(uri)
        let base = URIReference(uri).withoutFragment
        let root = SchemaLocation(document: documentIndex, pointer: .root)
        resources[base.description] = root
        index(document, at: root, base: base)
    }

    /// Whether a document or embedded resource is known under `uri`.
    public func contains(_ uri: String) -> Bool {
        resources[URIReference(uri).withoutFragment.description] != nil
    }

    /// Walks the subschemas of `value`, recording resources, anchors and base URIs.
    ///
    /// Only keywords whose values are schemas are entered: an `$id` inside `enum`, `const` or an
    /// unknown keyword is data, not an identifier.
    private mutating func index(_ value: JSONValue, at location: SchemaLocation, base inherited: URIReference) {
        guard case .object(let object) = value else {
            baseURIs[location] = inherited.description
            return
        }
        var base = inherited
        if case .string(let id) = object["$id"] {
            base = inherited.resolving(id).withoutFragment
            resources[base.description] = location
        }
        let baseText = base.description
        baseURIs[location] = baseText
        if case .string(let name) = object["$anchor"] {
            anchors[baseText + "#" + name] = location
        }
        if case .string(let name) = object["$dynamicAnchor"] {
            anchors[baseText + "#" + name] = location
            dynamicAnchors[baseText, default: [:]][name] = location
        }
        SchemaKeywords.forEachSubschema(of: object) { tokens, member in
            index(
                member, at: SchemaLocation(document: location.document, pointer: JSONPointer(tokens: location.pointer.tokens + tokens)),
                base: base)
        }
    }
}

/// A place in one of the registry's documents: the document and a JSON pointer into it.
struct SchemaLocation: Hashable, Sendable {
    var document: Int
    var pointer: JSONPointer

    func appending(_ token: String) -> SchemaLocation {
        SchemaLocation(document: document, pointer: pointer.appending(token))
    }
}

/// What the 2020-12 keywords hold, for walking a schema without compiling it.
enum SchemaKeywords {
    enum Shape {
        case schema, schemaArray, schemaMap, other
    }

    static func shape(of keyword: String) -> Shape {
        switch keyword {
        case "additionalProperties", "propertyNames", "items", "contains", "not", "if", "then", "else",
            "unevaluatedItems", "unevaluatedProperties", "contentSchema":
            .schema
        case "allOf", "anyOf", "oneOf", "prefixItems":
            .schemaArray
        case "properties", "patternProperties", "$defs", "dependentSchemas":
            .schemaMap
        default:
            .other
        }
    }

    /// Calls `body` with the relative path (the keyword, plus an index or a name) and value of
    /// every direct subschema of `object`, in written order. Only keywords whose values are
    /// schemas are entered: data under `enum`, `const` or an unknown keyword is not a schema.
    static func forEachSubschema(of object: JSONObject, _ body: ([String], JSONValue) -> Void) {
        for (keyword, member) in object {
            switch shape(of: keyword) {
            case .schema:
                body([keyword], member)
            case .schemaArray:
                for (position, element) in (member.arrayValue ?? []).enumerated() { body([keyword, String(position)], element) }
            case .schemaMap:
                for (name, element) in member.objectValue ?? JSONObject() { body([keyword, name], element) }
            case .other:
                continue
            }
        }
    }
}
