import FleetJSON
import FleetSchema

/// An app's metadata: which settings it has, their types, defaults, who may change them, and
/// how a generated view lays them out.
///
/// ```json
/// { "app": "kiosk", "version": 3,
///   "schema": { "type": "object", "properties": {
///       "duration": { "type": "string", "enum": ["1", "2"], "default": "2", "x-writable": true },
///       "adminPassword": { "type": "string", "default": "", "x-secret": true } } },
///   "layout": [ { "group": "Home Screen", "items": [ { "setting": "duration" } ] } ] }
/// ```
///
/// - `app`: the app's id, 1–64 characters of `a-z 0-9 . _ -`, starting with a letter or digit.
/// - `version`: a positive integer that increases with every change of the schema.
/// - `schema`: a JSON Schema 2020-12 schema for the settings object. Its root must be an object
///   schema; every top-level property is one setting. Keywords that are not 2020-12 and not `x-`
///   extensions make the metadata *unsupported* (never half-checked).
/// - `x-writable: true` on a top-level property: devices and apps may change that setting
///   (everything else is admin-only). `x-secret: true`: the value is masked in logs and output.
/// - `default`: each must be valid against its own subschema.
/// - `layout` (optional): see ``LayoutItem``.
public struct Metadata: Sendable {
    /// The app's id.
    public let app: String
    /// The schema version.
    public let version: Int
    /// The schema as written.
    public let schemaDocument: JSONValue
    /// The compiled schema, for validating settings values.
    public let schema: JSONSchema
    /// The layout, in order (empty when the document has none).
    public let layout: [LayoutItem]
    /// The whole document as read.
    public let document: JSONValue

    /// The settings devices and apps may change: top-level properties with `x-writable: true`.
    public let writableKeys: Set<String>
    /// The settings whose values are never shown: top-level properties with `x-secret: true`.
    public let secretKeys: Set<String>
    /// The top-level settings, in the order the schema lists them.
    public let settingKeys: [String]

    /// Reads and checks a metadata document.
    ///
    /// - Throws: ``MetadataError`` listing every problem found, each with the JSON pointer of
    ///   the bad place in the document.
    public init(_ document: JSONValue) throws(MetadataError) {
        var problems = MetadataProblems()
        guard case .object(let object) = document else {
            throw MetadataError(problems: [.init(.root, "a metadata document must be an object with app, version and schema")])
        }
        for key in object.keys where !["app", "version", "schema", "layout", "title", "description"].contains(key) && !key.hasPrefix("x-") {
            problems.add(JSONPointer.root.appending(key), "unknown member; a metadata document has app, version, schema and layout")
        }
        app = Self.readApp(object["app"], &problems)
        version = Self.readVersion(object["version"], &problems)
        self.document = document
        schemaDocument = object["schema"] ?? .null

        let schemaPointer = JSONPointer.root.appending("schema")
        var settingKeys: [String] = []
        var writable: Set<String> = []
        var secret: Set<String> = []
        switch object["schema"] {
        case nil:
            problems.add(schemaPointer, "is missing; it must be a JSON Schema for the settings object")
        case .object(let schemaObject)?:
            if schemaObject["type"] != .string("object") {
                problems.add(schemaPointer.appending("type"), "must be \"object\": settings are an object of named values")
            }
            if case .object(let properties)? = schemaObject["properties"] {
                for (key, property) in properties {
                    settingKeys.append(key)
                    let pointer = schemaPointer.appending("properties").appending(key)
                    if KeyPathValues.isKeyPath(key) {
                        problems.add(
                            pointer, "a setting's name cannot begin with /: a device's values at a key path are kept under such names")
                    }
                    if Self.flag("x-writable", of: property, at: pointer, &problems) { writable.insert(key) }
                    if Self.flag("x-secret", of: property, at: pointer, &problems) { secret.insert(key) }
                }
            }
        case .some:
            problems.add(schemaPointer, "must be an object (a JSON Schema whose root is an object schema)")
        }
        self.settingKeys = settingKeys
        writableKeys = writable
        secretKeys = secret

        var compiled: JSONSchema?
        if case .object = schemaDocument {
            do {
                compiled = try JSONSchema(schemaDocument, options: .strict)
            } catch {
                problems.add(schemaError: error, under: schemaPointer)
            }
        }
        layout = LayoutItem.read(object["layout"], settings: schemaDocument, at: JSONPointer.root.appending("layout"), &problems)
        if compiled != nil {
            Self.checkDefaults(of: schemaDocument, at: schemaPointer, &problems)
        }
        if let error = problems.error { throw error }
        guard let compiled else { preconditionFailure("a schema that did not compile was not reported") }
        schema = compiled
    }

    /// Reads a metadata document from JSON text (duplicate keys refused, as everywhere).
    public init(json bytes: [UInt8]) throws(MetadataError) {
        let document: JSONValue
        do {
            document = try JSONParser.parse(bytes)
        } catch {
            throw MetadataError(problems: [.init(.root, "not JSON: \(error)")])
        }
        try self.init(document)
    }

    /// The errors of a settings values object against this metadata (empty when valid).
    public func validate(values: JSONValue) -> [ValidationError] {
        schema.validate(values)
    }

    // MARK: - Reading members

    /// Every `default` in the schema must be valid against the subschema it sits in.
    private static func checkDefaults(of schema: JSONValue, at schemaPointer: JSONPointer, _ problems: inout MetadataProblems) {
        let documentURI = "urn:fleetset:metadata:schema"
        var registry = SchemaRegistry()
        registry.register(schema, as: documentURI)
        JSONSchema.forEachSubschema(of: schema) { pointer, subschema in
            guard let value = subschema["default"] else { return }
            let location = JSONPointer(tokens: schemaPointer.tokens + pointer.tokens + ["default"])
            do {
                let check = try JSONSchema(["$ref": .string(documentURI + "#" + pointer.description)], registry: registry)
                for error in check.validate(value) {
                    let inside = error.instanceLocation.isRoot ? "" : "at \(error.instanceLocation): "
                    problems.add(location, "the default is not valid: \(inside)\(error.message)")
                }
            } catch {
                problems.add(location, "cannot be checked: \(error)")
            }
        }
    }

    private static func readApp(_ value: JSONValue?, _ problems: inout MetadataProblems) -> String {
        let pointer = JSONPointer.root.appending("app")
        guard case .string(let app)? = value else {
            problems.add(pointer, value == nil ? "is missing" : "must be a string")
            return ""
        }
        if !isValidAppID(app) {
            problems.add(
                pointer,
                "\(JSONValue.string(app).serialized()) is not an app id: use 1 to 64 of a-z, 0-9, '.', '_', '-', starting with a letter or digit"
            )
        }
        return app
    }

    /// Whether `id` is a valid app id (it names directories on devices, so it is restricted).
    public static func isValidAppID(_ id: String) -> Bool {
        let bytes = Array(id.utf8)
        guard (1...64).contains(bytes.count) else { return false }
        func isAlphanumeric(_ byte: UInt8) -> Bool { (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte) }
        return isAlphanumeric(bytes[0]) && bytes.allSatisfy { isAlphanumeric($0) || $0 == 0x2E || $0 == 0x5F || $0 == 0x2D }
    }

    private static func readVersion(_ value: JSONValue?, _ problems: inout MetadataProblems) -> Int {
        let pointer = JSONPointer.root.appending("version")
        guard case .number(let number)? = value, let version = number.int64Value, number.isInteger, version >= 1 else {
            problems.add(pointer, value == nil ? "is missing" : "must be a positive integer (got \(value?.serialized() ?? ""))")
            return 0
        }
        return Int(version)
    }

    private static func flag(_ name: String, of property: JSONValue, at pointer: JSONPointer, _ problems: inout MetadataProblems) -> Bool {
        switch property[name] {
        case nil: return false
        case .bool(let value)?: return value
        case .some(let other): problems.add(pointer.appending(name), "must be true or false (got \(other.serialized()))")
        }
        return false
    }
}

/// Why a metadata document was refused: every problem, each with its JSON pointer.
public struct MetadataError: Error, Sendable, CustomStringConvertible {
    /// One problem.
    public struct Problem: Sendable, Hashable, CustomStringConvertible {
        /// Where in the metadata document.
        public let location: JSONPointer
        /// What is wrong.
        public let message: String
        /// Whether the problem is something fleetset does not support (rather than an error).
        public let isUnsupported: Bool

        /// Creates a problem.
        public init(_ location: JSONPointer, _ message: String, unsupported: Bool = false) {
            self.location = location
            self.message = message
            self.isUnsupported = unsupported
        }

        /// `/schema/properties/duration/default: must be one of "1", "2" (got "5")`.
        public var description: String {
            location.displayText + ": " + (isUnsupported ? "unsupported: " : "") + message
        }
    }

    /// The problems, in document order of discovery.
    public let problems: [Problem]

    /// Whether every problem is an unsupported feature (the agent reports `unsupported`, not
    /// `error`).
    public var isUnsupported: Bool { !problems.isEmpty && problems.allSatisfy(\.isUnsupported) }

    /// One problem per line.
    public var description: String { problems.map(\.description).joined(separator: "\n") }
}

/// Collects problems while a document is read.
struct MetadataProblems {
    private(set) var list: [MetadataError.Problem] = []

    mutating func add(_ location: JSONPointer, _ message: String, unsupported: Bool = false) {
        list.append(.init(location, message, unsupported: unsupported))
    }

    /// Adds a schema compilation error, its location turned into a pointer in the metadata.
    mutating func add(schemaError error: SchemaError, under schemaPointer: JSONPointer) {
        var location = schemaPointer
        if error.location.hasPrefix("#"), let inner = JSONPointer(String(error.location.dropFirst())) {
            location = JSONPointer(tokens: schemaPointer.tokens + inner.tokens)
        }
        let message = error.location.hasPrefix("#") ? error.message : "\(error.location): \(error.message)"
        add(location, message, unsupported: error.kind == .unsupported)
    }

    var error: MetadataError? { list.isEmpty ? nil : MetadataError(problems: list) }
}
