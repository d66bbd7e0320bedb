import FleetJSON

/// Why a schema cannot be used to validate anything.
///
/// A schema is either *invalid* (it breaks the JSON Schema 2020-12 rules: `"minimum": "ten"`, a
/// `$ref` to nothing, a malformed pattern) or *unsupported* (it is well-formed, but asks for
/// something fleetset does not honour: another dialect, a required unknown vocabulary, a regular
/// expression feature we cannot match exactly). Either way, nothing is validated with it: a
/// schema is never half-checked.
public struct SchemaError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The two reasons a schema is refused.
    public enum Kind: Sendable, Hashable {
        /// The schema is malformed.
        case invalid
        /// The schema is well-formed but asks for what the validator cannot honour.
        case unsupported
    }

    /// Whether the schema is invalid or unsupported.
    public let kind: Kind
    /// Where in the schema: `#/properties/duration/minimum`, or `URI#/pointer` for a schema in
    /// another registered document.
    public let location: String
    /// What is wrong, for a person.
    public let message: String

    /// Creates an error.
    public init(_ kind: Kind, at location: String, _ message: String) {
        self.kind = kind
        self.location = location
        self.message = message
    }

    /// `#/properties/a/minimum: must be a number` (prefixed with `unsupported: ` for that kind).
    public var description: String {
        (kind == .unsupported ? "unsupported: " : "") + "\(location): \(message)"
    }
}

/// One way an instance fails its schema.
public struct ValidationError: Sendable, Hashable, CustomStringConvertible {
    /// Where in the instance (settings values): `/screensaverPlaylist/0/duration`.
    public let instanceLocation: JSONPointer
    /// Where in the schema the failing keyword is: `#/properties/duration/enum`.
    public let keywordLocation: String
    /// What is wrong, for a person: `must be one of "1", "2" (got "5")`. Values of settings
    /// marked `x-secret` are never quoted.
    public let message: String

    /// Creates an error.
    public init(instanceLocation: JSONPointer, keywordLocation: String, message: String) {
        self.instanceLocation = instanceLocation
        self.keywordLocation = keywordLocation
        self.message = message
    }

    /// `/duration: must be one of "1", "2" (got "5")`; the whole document is shown as `/`.
    public var description: String {
        "\(instanceLocation.displayText): \(message)"
    }
}
