/// Why a JSON document (a protocol message, a file on the device) was refused: the JSON pointer
/// of the bad member and the reason.
public struct DocumentError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the document.
    public let location: JSONPointer
    /// What is wrong.
    public let message: String

    /// Creates an error.
    public init(at location: JSONPointer, _ message: String) {
        self.location = location
        self.message = message
    }

    /// `/revision: must be a non-negative integer`.
    public var description: String { "\(location.displayText): \(message)" }
}

/// Reads members of a JSON object strictly, each failure a ``DocumentError`` naming the member by
/// its JSON pointer. The protocol's messages, the agent's configuration and the device's own
/// files are each read with it; none of them depends on another's reader.
public struct ObjectReader {
    /// The object being read.
    public let object: JSONObject
    /// Where the object is in its document.
    public let location: JSONPointer

    /// Starts reading `value`, which must be an object whose members are all in `allowed`.
    ///
    /// - Parameter unknownMember: what is said of a member that is not allowed.
    public init(
        _ value: JSONValue, at location: JSONPointer = .root, allowed: Set<String>,
        unknownMember: String = "is not a member of this message"
    ) throws(DocumentError) {
        guard case .object(let object) = value else { throw DocumentError(at: location, "must be an object") }
        for key in object.keys where !allowed.contains(key) {
            throw DocumentError(at: location.appending(key), unknownMember)
        }
        self.object = object
        self.location = location
    }

    /// A string of at most `maximumLength` characters (Unicode scalars).
    public func string(_ key: String, maximumLength: Int = 4096) throws(DocumentError) -> String {
        guard case .string(let text)? = object[key] else { throw missingOr(key, "must be a string") }
        guard text.unicodeScalars.count <= maximumLength else {
            throw DocumentError(at: location.appending(key), "must be at most \(maximumLength) characters long")
        }
        return text
    }

    /// A string that may be absent.
    public func optionalString(_ key: String, maximumLength: Int = 4096) throws(DocumentError) -> String? {
        guard object[key] != nil else { return nil }
        return try string(key, maximumLength: maximumLength)
    }

    /// A non-negative integer.
    public func count(_ key: String) throws(DocumentError) -> Int64 {
        guard case .number(let number)? = object[key], number.isInteger, let value = number.int64Value, value >= 0 else {
            throw missingOr(key, "must be a non-negative integer")
        }
        return value
    }

    /// A non-negative integer that may be `null` or absent.
    public func nullableCount(_ key: String) throws(DocumentError) -> Int64? {
        guard let value = object[key], value != .null else { return nil }
        return try count(key)
    }

    /// An integer in `range`, or `defaultValue` when absent.
    public func integer(_ key: String, in range: ClosedRange<Int64>, default defaultValue: Int64) throws(DocumentError) -> Int64 {
        guard let value = object[key] else { return defaultValue }
        guard case .number(let number) = value, number.isInteger, let integer = number.int64Value, range.contains(integer) else {
            throw DocumentError(at: location.appending(key), "must be an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return integer
    }

    /// An RFC 3339 UTC timestamp, as seconds since the epoch.
    public func timestamp(_ key: String) throws(DocumentError) -> Int64 {
        guard let seconds = Timestamp.parse(try string(key, maximumLength: 64)) else {
            throw DocumentError(at: location.appending(key), "must be an RFC 3339 UTC timestamp like 2026-11-22T10:00:00Z")
        }
        return seconds
    }

    /// A timestamp that may be `null` or absent.
    public func nullableTimestamp(_ key: String) throws(DocumentError) -> Int64? {
        guard let value = object[key], value != .null else { return nil }
        return try timestamp(key)
    }

    /// An array of strings, each 1 to `maximumLength` characters long, without duplicates.
    public func names(_ key: String, maximumCount: Int, maximumLength: Int = 128) throws(DocumentError) -> [String]? {
        guard let value = object[key] else { return nil }
        guard case .array(let elements) = value, elements.count <= maximumCount else {
            throw DocumentError(at: location.appending(key), "must be an array of at most \(maximumCount) strings")
        }
        var names: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let name) = element, (1...maximumLength).contains(name.unicodeScalars.count), !names.contains(name) else {
                throw DocumentError(
                    at: location.appending(key).appending(index: index),
                    "must be a string of 1 to \(maximumLength) characters, not repeated")
            }
            names.append(name)
        }
        return names
    }

    /// An array member whose elements `each` reads, each at its own pointer.
    public func array<Element>(
        _ key: String, each: (JSONValue, JSONPointer) throws(DocumentError) -> Element
    ) throws(DocumentError) -> [Element] {
        guard case .array(let elements)? = object[key] else { throw missingOr(key, "must be an array") }
        var result: [Element] = []
        result.reserveCapacity(elements.count)
        for (index, element) in elements.enumerated() {
            result.append(try each(element, location.appending(key).appending(index: index)))
        }
        return result
    }

    /// A Boolean that may be absent.
    public func optionalBool(_ key: String) throws(DocumentError) -> Bool? {
        guard let value = object[key] else { return nil }
        guard case .bool(let flag) = value else { throw DocumentError(at: location.appending(key), "must be true or false") }
        return flag
    }

    /// An object member.
    public func values(_ key: String) throws(DocumentError) -> JSONObject {
        guard case .object(let values)? = object[key] else { throw missingOr(key, "must be an object") }
        return values
    }

    /// One of an enumeration's raw values.
    public func oneOf<Choice: RawRepresentable & CaseIterable>(_ key: String, _ type: Choice.Type) throws(DocumentError) -> Choice
    where Choice.RawValue == String {
        let text = try string(key)
        guard let choice = Choice(rawValue: text) else {
            let allowed = Choice.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw DocumentError(at: location.appending(key), "must be one of \(allowed) (got \(JSONValue.string(text).serialized()))")
        }
        return choice
    }

    /// "is missing" when the member is absent, else `message`.
    public func missingOr(_ key: String, _ message: String) -> DocumentError {
        DocumentError(at: location.appending(key), object[key] == nil ? "is missing" : message)
    }
}
