/// A key path: the slash-separated path to a value inside settings, `playlist/0/content`, with
/// JSON Pointer semantics (RFC 6901): each part is an object member or an array index, `~1`
/// stands for a `/` inside a name and `~0` for a `~`. A leading `/` is allowed (it is then a
/// JSON pointer as written). The first part names the top-level setting.
extension JSONPointer {
    /// Reads a key path; `nil` for an empty one or a bad `~` escape.
    public init?(keyPath: String) {
        guard !keyPath.isEmpty, keyPath != "/" else { return nil }
        self.init(keyPath.hasPrefix("/") ? keyPath : "/" + keyPath)
    }

    /// The key path of URL path segments (each percent-decoded already): a segment's `~1` and
    /// `~0` are escapes, and a `/` it holds (sent as `%2F`) is part of its name.
    public init?(segments: [String]) {
        var tokens: [String] = []
        for segment in segments {
            guard
                let token = JSONPointer("/" + segment.split(separator: "/", omittingEmptySubsequences: false).joined(separator: "~1"))?
                    .tokens.first
            else { return nil }
            tokens.append(token)
        }
        guard !tokens.isEmpty else { return nil }
        self.init(tokens: tokens)
    }

    /// The path as a key path is written: `playlist/0/content`.
    public var keyPath: String { String(description.dropFirst()) }

    /// The top-level setting the path is inside.
    public var topLevelKey: String? { tokens.first }
}

/// Why a value cannot be set or removed at a key path.
public struct KeyPathError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why.
    public enum Kind: Sendable, Hashable {
        /// Nothing is where the path points (removing, or going through a missing element).
        case missing
        /// The path does not fit the value: through a value that is not an object or an array,
        /// or an index that is not one.
        case mismatch
    }

    /// The part of the path where it failed.
    public let location: JSONPointer
    public let kind: Kind
    public let message: String

    public init(at location: JSONPointer, _ kind: Kind, _ message: String) {
        self.location = location
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(location.keyPath): \(message)" }
}

extension JSONValue {
    /// This value with `newValue` at `path` below it, or with the value there removed (`nil`).
    ///
    /// Objects on the way that do not exist are made; an array index must name an element, or
    /// be the array's length or `-` to append. Removing an array element moves the later ones up.
    ///
    /// - Throws: ``KeyPathError`` when the path goes through a value that is neither an object
    ///   nor an array, names an index out of range, or removes what is not there.
    public func setting(_ newValue: JSONValue?, at path: JSONPointer) throws(KeyPathError) -> JSONValue {
        guard let result = try Self.setting(self, newValue, path.tokens[...], done: .root) else {
            throw KeyPathError(at: .root, .mismatch, "the whole document cannot be removed")
        }
        return result
    }

    /// `current` (`nil`: nothing there yet) with `tokens` set to `newValue`; `nil` when removed.
    private static func setting(
        _ current: JSONValue?, _ newValue: JSONValue?, _ tokens: ArraySlice<String>, done: JSONPointer
    ) throws(KeyPathError) -> JSONValue? {
        guard let token = tokens.first else { return newValue }
        let location = done.appending(token)
        let rest = tokens.dropFirst()
        switch current {
        case .array(var elements):
            let index = token == "-" ? elements.count : JSONPointer.arrayIndex(token)
            guard let index, index <= elements.count else {
                throw KeyPathError(at: location, .mismatch, "is not an index of the array (0 to \(elements.count), or - to append)")
            }
            // (Not a ternary: its `nil` would become JSON's null, which JSONValue takes as a literal.)
            var existing: JSONValue?
            if index < elements.count { existing = elements[index] }
            if existing == nil, newValue == nil || !rest.isEmpty {
                throw KeyPathError(at: location, .missing, "there is no element \(index)")
            }
            if let updated = try setting(existing, newValue, rest, done: location) {
                if index < elements.count { elements[index] = updated } else { elements.append(updated) }
            } else {
                elements.remove(at: index)
            }
            return .array(elements)
        case .object(var members):
            let existing = members[token]
            if existing == nil, newValue == nil { throw KeyPathError(at: location, .missing, "there is no value here") }
            members[token] = try setting(existing, newValue, rest, done: location)
            return .object(members)
        case nil:
            guard newValue != nil else { throw KeyPathError(at: location, .missing, "there is no value here") }
            var members = JSONObject()
            members[token] = try setting(nil, newValue, rest, done: location)
            return .object(members)
        case let value?:
            throw KeyPathError(
                at: done, .mismatch,
                "holds \(value.typeName == "integer" || value.typeName == "array" || value.typeName == "object" ? "an" : "a") \(value.typeName), not an object or an array"
            )
        }
    }
}
