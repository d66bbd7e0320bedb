/// A JSON value, as read from a settings, metadata or schema document.
///
/// Numbers keep integers exact up to 64 bits (see ``JSONNumber``); objects keep the order their
/// members were written in (see ``JSONObject``).
///
/// Equality is JSON's, not Swift's: strings are equal when their code points are (Swift's
/// `String` equality treats `"é"` and `"e\u{301}"` as equal; JSON Schema's `const`, `enum`
/// and `uniqueItems` must not), numbers compare mathematically, objects ignore member order.
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(JSONNumber)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The JSON type name, as JSON Schema's `type` keyword spells it (`integer` for a number
    /// with no fractional part).
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number(let number): number.isInteger ? "integer" : "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// The member `key` of an object, or `nil` for a missing key or a non-object.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let object) = self else { return nil }
        return object[key]
    }

    /// The string, or `nil` when this is not a string.
    public var stringValue: String? {
        guard case .string(let value) = self else { return nil }
        return value
    }

    /// The object, or `nil` when this is not an object.
    public var objectValue: JSONObject? {
        guard case .object(let value) = self else { return nil }
        return value
    }

    /// The array, or `nil` when this is not an array.
    public var arrayValue: [JSONValue]? {
        guard case .array(let value) = self else { return nil }
        return value
    }

    /// The Boolean, or `nil` when this is not a Boolean.
    public var boolValue: Bool? {
        guard case .bool(let value) = self else { return nil }
        return value
    }

    /// The number, or `nil` when this is not a number.
    public var numberValue: JSONNumber? {
        guard case .number(let value) = self else { return nil }
        return value
    }
}

extension JSONValue {
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case (.bool(let a), .bool(let b)): a == b
        case (.number(let a), .number(let b)): a == b
        case (.string(let a), .string(let b)): a.utf8.elementsEqual(b.utf8)
        case (.array(let a), .array(let b)): a == b
        case (.object(let a), .object(let b)): a == b
        default: false
        }
    }

    /// Consistent with `==`: values equal by code points hash alike (Swift's string hash is
    /// coarser, which is allowed).
    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null: hasher.combine(0)
        case .bool(let value): hasher.combine(value)
        case .number(let value): hasher.combine(value)
        case .string(let value): hasher.combine(value)
        case .array(let value): hasher.combine(value)
        case .object(let value): hasher.combine(value)
        }
    }
}

extension JSONValue: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .number(.integer(value)) }
    public init(floatLiteral value: Double) { self = .number(.double(value)) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        var object = JSONObject()
        for (key, value) in elements { object[key] = value }
        self = .object(object)
    }
}

/// A JSON number: an exact 64-bit integer when the text is one, otherwise a `Double`.
///
/// Equality and hashing are mathematical, as JSON Schema requires: `1`, `1.0` and `1e0` are
/// equal.
public enum JSONNumber: Sendable, CustomStringConvertible {
    /// An integer written without fraction or exponent that fits in `Int64`.
    case integer(Int64)
    /// An integer written without fraction or exponent beyond `Int64`, kept exact.
    case bigInteger(BigInteger)
    /// Any other number (a fraction or an exponent).
    case double(Double)

    /// The value as a `Double` (exact for integers up to 2^53; the nearest one beyond).
    public var doubleValue: Double {
        switch self {
        case .integer(let value): Double(value)
        case .bigInteger(let value): value.doubleValue
        case .double(let value): value
        }
    }

    /// The value as an exact `Int64`, when it is a whole number in range.
    public var int64Value: Int64? {
        switch self {
        case .integer(let value): return value
        case .bigInteger(let value): return value.int64Value
        case .double(let value):
            guard value.rounded() == value, let exact = Int64(exactly: value) else { return nil }
            return exact
        }
    }

    /// The value as an exact integer of any size, when it is a whole number.
    public var exactInteger: BigInteger? {
        switch self {
        case .integer(let value): BigInteger(value)
        case .bigInteger(let value): value
        case .double(let value): BigInteger(exactly: value)
        }
    }

    /// Whether the number has no fractional part (`1.0` does not).
    public var isInteger: Bool {
        switch self {
        case .integer, .bigInteger: true
        case .double(let value): value.isFinite && value.rounded() == value
        }
    }

    /// The shortest JSON text that reads back as the same number.
    public var description: String {
        switch self {
        case .integer(let value): return String(value)
        case .bigInteger(let value): return value.description
        case .double(let value):
            if let exact = int64Value, abs(value) < 1e15 { return String(exact) }
            return String(value)  // Swift prints the shortest round-tripping form, e.g. 1e-05
        }
    }
}

extension JSONNumber: Hashable {
    /// Equal when the values are equal, exactly: `1`, `1.0` and `1e0` are one number, and so are
    /// `18446744073709551616` and `1.8446744073709552e19` (both 2^64), while
    /// `18446744073709551617` is another.
    public static func == (lhs: JSONNumber, rhs: JSONNumber) -> Bool {
        switch (lhs, rhs) {
        case (.integer(let a), .integer(let b)): a == b
        case (.double(let a), .double(let b)): a == b
        default:
            // Mixed kinds: equal only when both are whole numbers with the same exact value.
            lhs.exactInteger.map { $0 == rhs.exactInteger } ?? false
        }
    }

    public func hash(into hasher: inout Hasher) {
        if let exact = int64Value {
            hasher.combine(exact)
        } else {
            // Equal numbers have the same nearest Double.
            hasher.combine(doubleValue)
        }
    }
}

/// A JSON object: members in the order they were written, with keyed lookup.
public struct JSONObject: Sendable, Hashable, Sequence {
    /// The keys in order.
    public private(set) var keys: [String] = []
    private var values: [String: JSONValue] = [:]

    /// An empty object.
    public init() {}

    /// The number of members.
    public var count: Int { keys.count }

    /// Whether the object has no members.
    public var isEmpty: Bool { keys.isEmpty }

    /// The value of `key`. Setting a new key appends it; setting `nil` removes it.
    public subscript(key: String) -> JSONValue? {
        get { values[key] }
        set {
            switch (values[key] != nil, newValue) {
            case (false, .some(let value)):
                keys.append(key)
                values[key] = value
            case (true, .some(let value)):
                values[key] = value
            case (true, .none):
                values[key] = nil
                keys.removeAll { $0 == key }
            case (false, .none):
                break
            }
        }
    }

    /// Adds a member that is known not to exist yet (the parser checks for duplicates).
    mutating func appendNew(_ key: String, _ value: JSONValue) {
        keys.append(key)
        values[key] = value
    }

    /// Members compare as a set: `{"a":1,"b":2}` equals `{"b":2,"a":1}`.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        lhs.values == rhs.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(values)
    }

    public func makeIterator() -> some IteratorProtocol<(key: String, value: JSONValue)> {
        keys.lazy.map { key in (key: key, value: values[key]!) }.makeIterator()
    }
}

extension JSONObject: ExpressibleByDictionaryLiteral {
    /// An object with the members in the order written (a repeated key keeps the last value).
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init()
        for (key, value) in elements { self[key] = value }
    }
}
