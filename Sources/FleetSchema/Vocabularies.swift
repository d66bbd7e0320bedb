import FleetJSON

/// The 2020-12 vocabularies a schema's dialect enables. Keywords of a vocabulary that is not
/// enabled are ignored, as the specification says.
struct Vocabularies: OptionSet, Sendable, Hashable {
    let rawValue: UInt8

    static let applicator = Vocabularies(rawValue: 1 << 0)
    static let unevaluated = Vocabularies(rawValue: 1 << 1)
    static let validation = Vocabularies(rawValue: 1 << 2)
    static let metaData = Vocabularies(rawValue: 1 << 3)
    static let formatAnnotation = Vocabularies(rawValue: 1 << 4)
    static let content = Vocabularies(rawValue: 1 << 5)

    static let all: Vocabularies = [.applicator, .unevaluated, .validation, .metaData, .formatAnnotation, .content]

    static let metaSchemaURI = "https://json-schema.org/draft/2020-12/schema"

    private static let prefix = "https://json-schema.org/draft/2020-12/vocab/"
    private static let known: [String: Vocabularies] = [
        prefix + "core": [],
        prefix + "applicator": .applicator,
        prefix + "unevaluated": .unevaluated,
        prefix + "validation": .validation,
        prefix + "meta-data": .metaData,
        prefix + "format-annotation": .formatAnnotation,
        prefix + "content": .content,
    ]

    /// The vocabularies of the dialect a `$schema` URI names.
    ///
    /// - The 2020-12 meta-schema: all of them.
    /// - Another meta-schema in the registry: the ones its `$vocabulary` lists. A vocabulary it
    ///   requires (`true`) that fleetset does not implement, `format-assertion` included, makes
    ///   the schema unsupported; optional ones (`false`) are skipped.
    /// - An earlier draft, or a meta-schema not in the registry: unsupported.
    static func dialect(
        _ uri: String, registry: SchemaRegistry, at location: String, depth: Int = 0
    ) throws(SchemaError) -> Vocabularies {
        let normalized = URIReference(uri).withoutFragment.description
        if normalized == metaSchemaURI { return .all }
        if let draft = earlierDraftName(normalized) {
            throw SchemaError(
                .unsupported, at: location,
                "the schema is written for \(draft) (\"$schema\": \"\(uri)\"); fleetset validates JSON Schema 2020-12 only")
        }
        guard let root = registry.resources[normalized], depth < 8,
            case .object(let metaSchema)? = registry.documents[root.document][pointer: root.pointer]
        else {
            throw SchemaError(
                .unsupported, at: location, "the meta-schema \"\(uri)\" is not in the registry, so its dialect is unknown")
        }
        guard case .object(let declared)? = metaSchema["$vocabulary"] else {
            guard case .string(let parent)? = metaSchema["$schema"], parent != uri else { return .all }
            return try dialect(parent, registry: registry, at: location, depth: depth + 1)
        }
        var enabled: Vocabularies = []
        for (vocabulary, requiredValue) in declared {
            if let known = known[vocabulary] {
                enabled.formUnion(known)
            } else if requiredValue == .bool(true) {
                throw SchemaError(
                    .unsupported, at: location,
                    "the meta-schema \"\(uri)\" requires the vocabulary \"\(vocabulary)\", which fleetset does not implement")
            }
        }
        return enabled
    }

    private static func earlierDraftName(_ uri: String) -> String? {
        let drafts = [
            ("json-schema.org/draft-03/", "draft 3"), ("json-schema.org/draft-04/", "draft 4"),
            ("json-schema.org/draft-06/", "draft 6"), ("json-schema.org/draft-07/", "draft 7"),
            ("json-schema.org/draft/2019-09/", "draft 2019-09"),
        ]
        return drafts.first { uri.contains($0.0) }?.1
    }
}
