import FleetJSON

/// A compiled JSON Schema 2020-12 schema, ready to validate instances.
///
/// ```swift
/// let schema = try JSONSchema(try JSONParser.parse(schemaText))
/// for error in schema.validate(try JSONParser.parse(settingsText)) {
///     print(error)  // /duration: must be one of "1", "2" (got "5")
/// }
/// ```
///
/// Every keyword of the core, applicator, unevaluated, validation, meta-data, format-annotation
/// and content vocabularies is implemented; `format` and `content*` are annotations and never
/// fail a value. Draft 7's `dependencies` is honoured too (as `dependentRequired` and
/// `dependentSchemas`), so that a schema carried over from an older draft is not half-checked.
/// `pattern` follows ECMA-262. Remote `$ref`s resolve only through the
/// ``SchemaRegistry``. A schema that is malformed or asks for what the validator cannot honour
/// throws ``SchemaError`` when it is compiled — it is never half-checked.
///
/// Compiling is done once; validating is thread-safe and allocation-light on the success path.
public struct JSONSchema: Sendable {
    /// How strictly a schema is read.
    public struct Options: Sendable, Hashable {
        /// Report keywords that are not part of 2020-12 (and do not start with `x-`) as
        /// unsupported instead of ignoring them.
        ///
        /// The specification says unknown keywords are annotations and must be ignored, so this is
        /// off for standard use. fleetset's metadata turns it on: an admin who writes
        /// `"additionalItems"` or misspells `"maxLenght"` expects it to be enforced, and a silently
        /// ignored constraint is the half-checking fleetset promises never to do.
        public var rejectsUnknownKeywords: Bool

        /// Creates options.
        public init(rejectsUnknownKeywords: Bool = false) {
            self.rejectsUnknownKeywords = rejectsUnknownKeywords
        }

        /// The specification's behaviour.
        public static let standard = Options()
        /// As ``standard``, but unknown keywords are unsupported.
        public static let strict = Options(rejectsUnknownKeywords: true)
    }

    let nodes: [CompiledNode]
    let resources: [SchemaResource]
    let root: Int

    /// Compiles `schema`, resolving references through `registry`.
    ///
    /// - Throws: ``SchemaError`` when the schema is invalid or unsupported.
    public init(_ schema: JSONValue, registry: SchemaRegistry = SchemaRegistry(), options: Options = .standard) throws(SchemaError) {
        var compiler = SchemaCompiler(schema: schema, registry: registry, options: options)
        root = try compiler.compile()
        nodes = compiler.nodes.map(CompiledNode.init)
        resources = compiler.resources
    }

    /// All the ways `instance` fails the schema, in a stable order (empty when it is valid).
    ///
    /// No message quotes a value that is or is inside a secret, however the evaluation reached it:
    /// when an error lies at or under a secret location (``secretLocations(in:)``), the errors
    /// are made again with those locations marked secret.
    public func validate(_ instance: JSONValue) -> [ValidationError] {
        let errors = validate(instance, secretLocations: nil)
        guard !errors.isEmpty else { return errors }
        let secrets = secretLocations(in: instance)
        let touchesSecret = errors.contains { error in secrets.contains { error.instanceLocation.tokens.starts(with: $0.tokens) } }
        return touchesSecret ? validate(instance, secretLocations: Set(secrets)) : errors
    }

    private func validate(_ instance: JSONValue, secretLocations: Set<JSONPointer>?) -> [ValidationError] {
        var evaluator = Evaluator(schema: self, collectsErrors: true)
        evaluator.secretLocations = secretLocations
        var annotations = Annotations()
        _ = evaluator.evaluate(root, instance, at: nil, annotations: &annotations, collecting: false, secret: false)
        if let exhaustion = evaluator.exhaustion { return [exhaustion] }
        return evaluator.errors
    }

    /// Whether `instance` is valid; stops at the first failure.
    public func isValid(_ instance: JSONValue) -> Bool {
        var evaluator = Evaluator(schema: self, collectsErrors: false)
        var annotations = Annotations()
        let valid = evaluator.evaluate(root, instance, at: nil, annotations: &annotations, collecting: false, secret: false)
        return valid && evaluator.exhaustion == nil
    }
}

extension JSONSchema {
    /// Calls `body` with the JSON pointer and members of every object subschema of `document`
    /// reachable through the 2020-12 applicator keywords and `$defs` (the root included), in
    /// document order. References are not followed.
    public static func forEachSubschema(of document: JSONValue, _ body: (JSONPointer, JSONObject) -> Void) {
        func visit(_ value: JSONValue, _ pointer: JSONPointer) {
            guard case .object(let object) = value else { return }
            body(pointer, object)
            SchemaKeywords.forEachSubschema(of: object) { tokens, member in
                visit(member, JSONPointer(tokens: pointer.tokens + tokens))
            }
        }
        visit(document, .root)
    }
}
