import FleetJSON

/// Why a protocol message was refused: the JSON pointer of the bad member and the reason.
public struct WireError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where in the message.
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

/// Reads members of a JSON object, each failure naming the member.
struct MemberReader {
    let object: JSONObject
    let location: JSONPointer

    init(_ value: JSONValue, at location: JSONPointer = .root, allowed: Set<String>) throws(WireError) {
        guard case .object(let object) = value else { throw WireError(at: location, "must be an object") }
        for key in object.keys where !allowed.contains(key) {
            throw WireError(at: location.appending(key), "is not a member of this message")
        }
        self.object = object
        self.location = location
    }

    func string(_ key: String, maximumLength: Int = 4096) throws(WireError) -> String {
        guard case .string(let text)? = object[key] else { throw missingOr(key, "must be a string") }
        guard text.utf8.count <= maximumLength else {
            throw WireError(at: location.appending(key), "must be at most \(maximumLength) bytes long")
        }
        return text
    }

    func optionalString(_ key: String, maximumLength: Int = 4096) throws(WireError) -> String? {
        guard object[key] != nil, object[key] != .null else { return nil }
        return try string(key, maximumLength: maximumLength)
    }

    func count(_ key: String) throws(WireError) -> Int64 {
        guard case .number(let number)? = object[key], number.isInteger, let value = number.int64Value, value >= 0 else {
            throw missingOr(key, "must be a non-negative integer")
        }
        return value
    }

    func values(_ key: String) throws(WireError) -> JSONObject {
        guard case .object(let values)? = object[key] else { throw missingOr(key, "must be an object") }
        return values
    }

    func oneOf<Choice: RawRepresentable & CaseIterable>(_ key: String, _ type: Choice.Type) throws(WireError) -> Choice
    where Choice.RawValue == String {
        let text = try string(key)
        guard let choice = Choice(rawValue: text) else {
            let allowed = Choice.allCases.map { "\"\($0.rawValue)\"" }.joined(separator: ", ")
            throw WireError(at: location.appending(key), "must be one of \(allowed) (got \(JSONValue.string(text).serialized()))")
        }
        return choice
    }

    private func missingOr(_ key: String, _ message: String) -> WireError {
        WireError(at: location.appending(key), object[key] == nil ? "is missing" : message)
    }
}
