/// How ``JSONValue/serialized(_:)`` lays out its text.
public struct JSONWriteOptions: Sendable, OptionSet {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Two-space indentation, one member or element per line, a space after `:`.
    public static let pretty = JSONWriteOptions(rawValue: 1)
    /// Object members sorted by key (byte order), for stable output; otherwise written order.
    public static let sortedKeys = JSONWriteOptions(rawValue: 2)
}

extension JSONValue {
    /// The value as JSON text that ``JSONParser`` reads back to an equal value.
    ///
    /// The writer keeps its own stack, so the deepest document the reader accepts is written
    /// on any thread. With `maximumLength`, writing stops soon after that many UTF-8 bytes (for
    /// quoting a value in a message without writing all of a large one).
    public func serialized(_ options: JSONWriteOptions = [], maximumLength: Int? = nil) -> String {
        var output = ""
        let pretty = options.contains(.pretty)
        let limit = maximumLength ?? Int.max
        var steps: [WriteStep] = [.value(self, indent: 0)]
        func newline(_ indent: Int) -> String {
            pretty ? "\n" + String(repeating: "  ", count: indent) : ""
        }
        while let step = steps.popLast(), output.utf8.count < limit {
            switch step {
            case .text(let text):
                output += text
            case .value(.null, _): output += "null"
            case .value(.bool(let value), _): output += value ? "true" : "false"
            case .value(.number(let number), _): output += number.description
            case .value(.string(let text), _): Self.writeString(text, to: &output)
            case .value(.array(let elements), let indent):
                guard !elements.isEmpty else {
                    output += "[]"
                    continue
                }
                output += "["
                steps.append(.text(newline(indent) + "]"))
                for index in elements.indices.reversed() {
                    steps.append(.value(elements[index], indent: indent + 1))
                    steps.append(.text((index > 0 ? "," : "") + newline(indent + 1)))
                }
            case .value(.object(let object), let indent):
                guard !object.isEmpty else {
                    output += "{}"
                    continue
                }
                let keys =
                    options.contains(.sortedKeys) ? object.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } : object.keys
                output += "{"
                steps.append(.text(newline(indent) + "}"))
                for index in keys.indices.reversed() {
                    steps.append(.value(object[keys[index]] ?? .null, indent: indent + 1))
                    var key = (index > 0 ? "," : "") + newline(indent + 1)
                    Self.writeString(keys[index], to: &key)
                    key += pretty ? ": " : ":"
                    steps.append(.text(key))
                }
            }
        }
        return output
    }

    private static func writeString(_ text: String, to output: inout String) {
        output += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": output += "\\\""
            case "\\": output += "\\\\"
            case "\n": output += "\\n"
            case "\r": output += "\\r"
            case "\t": output += "\\t"
            case "\u{08}": output += "\\b"
            case "\u{0C}": output += "\\f"
            case "\u{00}"..."\u{1F}", "\u{7F}":
                let hex = String(scalar.value, radix: 16, uppercase: true)
                output += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: output.unicodeScalars.append(scalar)
            }
        }
        output += "\""
    }
}

/// One piece of work for the writer's explicit stack.
private enum WriteStep {
    case value(JSONValue, indent: Int)
    case text(String)
}
