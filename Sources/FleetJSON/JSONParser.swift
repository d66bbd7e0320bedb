/// Why a document is not JSON, and where: 1-based line and column (columns count Unicode
/// scalars, so they match what an editor shows).
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, for a person: `expected ',' or '}' after an object member`.
    public let message: String
    /// The 1-based line of the offending byte.
    public let line: Int
    /// The 1-based column of the offending byte.
    public let column: Int
    /// The 0-based byte offset of the offending byte.
    public let offset: Int

    public var description: String { "line \(line), column \(column): \(message)" }
}

/// A strict RFC 8259 JSON reader for settings, metadata and schemas.
///
/// Strict where it matters for settings: duplicate object keys are an error (a settings file
/// with two `duration` keys is ambiguous), as are invalid UTF-8, lone surrogates, a byte-order
/// mark, numbers too large for a `Double`, and nesting deeper than ``defaultMaximumDepth``.
/// Integers without fraction or exponent that fit in 64 bits stay exact.
public enum JSONParser {
    /// What to do with a key that appears twice in one object.
    public enum DuplicateKeyPolicy: Sendable {
        /// Refuse the document, naming both places (the default: settings must be unambiguous).
        case reject
        /// Keep the last value, as RFC 8259 permits (its grammar allows duplicate names; it only
        /// says they SHOULD be unique). For reading third-party documents, never settings.
        case keepLast
    }

    /// The deepest nesting of arrays and objects accepted: 512. Settings need a handful; the
    /// limit keeps hostile input from exhausting the stack.
    public static let defaultMaximumDepth = 512

    /// Parses a whole document.
    public static func parse(
        _ bytes: [UInt8], maximumDepth: Int = defaultMaximumDepth, duplicateKeys: DuplicateKeyPolicy = .reject
    ) throws(JSONParseError) -> JSONValue {
        let result: Result<JSONValue, JSONParseError> = bytes.withUnsafeBufferPointer { buffer in
            var reader = Reader(bytes: buffer, maximumDepth: maximumDepth, duplicateKeys: duplicateKeys)
            return Result { () throws(JSONParseError) in try reader.document() }
        }
        return try result.get()
    }

    /// Parses a whole document given as text.
    public static func parse(
        _ text: String, maximumDepth: Int = defaultMaximumDepth, duplicateKeys: DuplicateKeyPolicy = .reject
    ) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maximumDepth: maximumDepth, duplicateKeys: duplicateKeys)
    }
}

private struct Reader {
    let bytes: UnsafeBufferPointer<UInt8>
    let maximumDepth: Int
    let duplicateKeys: JSONParser.DuplicateKeyPolicy
    var index = 0
    var depth = 0

    init(bytes: UnsafeBufferPointer<UInt8>, maximumDepth: Int, duplicateKeys: JSONParser.DuplicateKeyPolicy) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
        self.duplicateKeys = duplicateKeys
    }

    mutating func document() throws(JSONParseError) -> JSONValue {
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { throw error("a byte-order mark is not allowed before JSON", at: 0) }
        skipWhitespace()
        let value = try value()
        skipWhitespace()
        guard index == bytes.count else { throw error("unexpected \(describeByte(at: index)) after the JSON value", at: index) }
        return value
    }

    // MARK: Values

    mutating func value() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of input, expected a value", at: index) }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try number())
        default: throw error("unexpected \(describeByte(at: index)), expected a value", at: index)
        }
    }

    mutating func literal(_ word: StaticString, _ value: JSONValue) throws(JSONParseError) -> JSONValue {
        let count = word.utf8CodeUnitCount
        let matches =
            index + count <= bytes.count
            && UnsafeBufferPointer(start: word.utf8Start, count: count).elementsEqual(bytes[index..<index + count])
        guard matches else { throw error("invalid literal, expected \(word)", at: index) }
        index += count
        return value
    }

    mutating func object() throws(JSONParseError) -> JSONValue {
        var object = JSONObject()
        var keyOffsets: [Int] = []
        try container(close: UInt8(ascii: "}"), kind: "an object", part: "an object member") { reader throws(JSONParseError) in
            guard reader.bytes[reader.index] == UInt8(ascii: "\"") else {
                throw reader.error("expected a string key, found \(reader.describeByte(at: reader.index))", at: reader.index)
            }
            let keyOffset = reader.index
            let key = try reader.string()
            let isDuplicate = object[key] != nil
            if isDuplicate, reader.duplicateKeys == .reject, let first = object.keys.firstIndex(of: key) {
                let (line, column) = reader.position(of: keyOffsets[first])
                throw reader.error("duplicate key \"\(key)\" (first at line \(line), column \(column))", at: keyOffset)
            }
            reader.skipWhitespace()
            guard reader.index < reader.bytes.count, reader.bytes[reader.index] == UInt8(ascii: ":") else {
                throw reader.error("expected ':' after the key \"\(key)\"", at: reader.index)
            }
            reader.index += 1
            reader.skipWhitespace()
            let member = try reader.value()
            if isDuplicate {
                object[key] = member
            } else {
                object.appendNew(key, member)
                keyOffsets.append(keyOffset)
            }
        }
        return .object(object)
    }

    mutating func array() throws(JSONParseError) -> JSONValue {
        var elements: [JSONValue] = []
        try container(close: UInt8(ascii: "]"), kind: "an array", part: "an array element") { reader throws(JSONParseError) in
            elements.append(try reader.value())
        }
        return .array(elements)
    }

    /// Reads a container from its opening bracket to `close`, calling `part` for each member
    /// or element with the reader on its first byte.
    mutating func container(
        close: UInt8, kind: String, part: String, _ readPart: (inout Reader) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        try enterContainer(at: index)
        index += 1  // the opening bracket
        skipWhitespace()
        if index < bytes.count, bytes[index] == close {
            index += 1
            depth -= 1
            return
        }
        while true {
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside \(kind)", at: index) }
            try readPart(&self)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input inside \(kind)", at: index) }
            switch bytes[index] {
            case UInt8(ascii: ","):
                index += 1
            case close:
                index += 1
                depth -= 1
                return
            default:
                let expected = "',' or '\(Character(Unicode.Scalar(close)))'"
                throw error("expected \(expected) after \(part), found \(describeByte(at: index))", at: index)
            }
        }
    }

    mutating func enterContainer(at offset: Int) throws(JSONParseError) {
        depth += 1
        guard depth <= maximumDepth else { throw error("nesting deeper than \(maximumDepth) levels", at: offset) }
    }

    // MARK: Strings

    mutating func string() throws(JSONParseError) -> String {
        let start = index
        index += 1  // opening quote
        let contentStart = index
        // Fast path: no escapes.
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = try decodeUTF8(bytes[contentStart..<index], stringStart: start)
                index += 1
                return text
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw controlCharacter(at: index) }
            index += 1
        }
        var decoded = Array(bytes[contentStart..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                let text = try decodeUTF8(decoded[...], stringStart: start)
                index += 1
                return text
            case UInt8(ascii: "\\"):
                try escape(into: &decoded)
            case ..<0x20:
                throw controlCharacter(at: index)
            default:
                decoded.append(byte)
                index += 1
            }
        }
        throw error("unexpected end of input inside a string", at: start)
    }

    mutating func escape(into decoded: inout [UInt8]) throws(JSONParseError) {
        let escapeStart = index
        index += 1  // backslash
        guard index < bytes.count else { throw error("unexpected end of input inside a string", at: escapeStart) }
        let simple: UInt8?
        switch bytes[index] {
        case UInt8(ascii: "\""): simple = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): simple = UInt8(ascii: "\\")
        case UInt8(ascii: "/"): simple = UInt8(ascii: "/")
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"): simple = nil
        default: throw error("invalid escape \\\(describeRaw(bytes[index])) in a string", at: escapeStart)
        }
        if let simple {
            decoded.append(simple)
            index += 1
            return
        }
        index += 1  // u
        var scalar = try hexQuad(escapeStart: escapeStart)
        if (0xD800...0xDBFF).contains(scalar) {
            // A high surrogate must be followed by an escaped low surrogate.
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                throw error("lone surrogate \\u\(hex(scalar)) in a string", at: escapeStart)
            }
            index += 2
            let low = try hexQuad(escapeStart: index - 2)
            guard (0xDC00...0xDFFF).contains(low) else { throw error("lone surrogate \\u\(hex(scalar)) in a string", at: escapeStart) }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw error("lone surrogate \\u\(hex(scalar)) in a string", at: escapeStart)
        }
        guard let unicode = Unicode.Scalar(scalar) else { throw error("invalid \\u escape", at: escapeStart) }
        decoded.append(contentsOf: String(Character(unicode)).utf8)
    }

    mutating func hexQuad(escapeStart: Int) throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("\\u must be followed by four hex digits", at: escapeStart) }
        var value: UInt32 = 0
        for byte in bytes[index..<index + 4] {
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("\\u must be followed by four hex digits", at: escapeStart)
            }
            value = value << 4 | UInt32(digit)
        }
        index += 4
        return value
    }

    func decodeUTF8<Bytes: Collection<UInt8>>(_ bytes: Bytes, stringStart: Int) throws(JSONParseError) -> String {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw error("invalid UTF-8 in a string", at: stringStart)
        }
        return text
    }

    func controlCharacter(at offset: Int) -> JSONParseError {
        error("control character U+\(hex(UInt32(bytes[offset]))) must be escaped in a string", at: offset)
    }

    // MARK: Numbers

    mutating func number() throws(JSONParseError) -> JSONNumber {
        let start = index
        let negative = bytes[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits after '-'", at: start) }
        if bytes[index] == UInt8(ascii: "0"), index + 1 < bytes.count, isDigit(bytes[index + 1]) {
            throw error("leading zeros are not allowed in numbers", at: start)
        }
        // Integer part, accumulated as a negative value so that Int64.min fits.
        var accumulated: Int64 = 0
        var exact = true
        while index < bytes.count, isDigit(bytes[index]) {
            if exact {
                let (shifted, overflow1) = accumulated.multipliedReportingOverflow(by: 10)
                let (next, overflow2) = shifted.subtractingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
                if overflow1 || overflow2 { exact = false } else { accumulated = next }
            }
            index += 1
        }
        var isIntegerText = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isIntegerText = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits after '.'", at: start) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isIntegerText = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("a number needs digits in its exponent", at: start) }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if isIntegerText, exact {
            if negative { return .integer(accumulated) }
            if accumulated != .min { return .integer(-accumulated) }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw error("number \(text) is out of range", at: start)
        }
        if isIntegerText, let exact = BigInteger(decimal: text) { return .bigInteger(exact) }
        return .double(value)
    }

    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    // MARK: Whitespace and errors

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    func error(_ message: String, at offset: Int) -> JSONParseError {
        let (line, column) = position(of: offset)
        return JSONParseError(message: message, line: line, column: column, offset: offset)
    }

    /// 1-based line and column of a byte offset; columns count scalars, not bytes.
    func position(of offset: Int) -> (line: Int, column: Int) {
        var line = 1
        var column = 1
        for byte in bytes[..<min(offset, bytes.count)] {
            if byte == 0x0A {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {
                column += 1
            }
        }
        return (line, column)
    }

    func describeByte(at offset: Int) -> String {
        offset < bytes.count ? "character \(describeRaw(bytes[offset]))" : "end of input"
    }

    func describeRaw(_ byte: UInt8) -> String {
        (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(hex(UInt32(byte), digits: 2))"
    }

    func hex(_ value: UInt32, digits: Int = 4) -> String {
        let text = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, digits - text.count)) + text
    }
}
