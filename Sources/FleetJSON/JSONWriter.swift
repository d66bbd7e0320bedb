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
    public func serialized(_ options: JSONWriteOptions = []) -> String {
        var output = ""
        write(to: &output, options: options, indent: 0)
        return output
    }

    private func write(to output: inout String, options: JSONWriteOptions, indent: Int) {
        switch self {
        case .null: output += "null"
        case .bool(let value): output += value ? "true" : "false"
        case .number(let number): output += number.description
        case .string(let text): Self.writeString(text, to: &output)
        case .array(let elements):
            writeContainer(open: "[", close: "]", count: elements.count, to: &output, options: options, indent: indent) { index, output in
                elements[index].write(to: &output, options: options, indent: indent + 1)
            }
        case .object(let object):
            let keys = options.contains(.sortedKeys) ? object.keys.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) } : object.keys
            writeContainer(open: "{", close: "}", count: keys.count, to: &output, options: options, indent: indent) { index, output in
                Self.writeString(keys[index], to: &output)
                output += options.contains(.pretty) ? ": " : ":"
                object[keys[index]]?.write(to: &output, options: options, indent: indent + 1)
            }
        }
    }

    private func writeContainer(
        open: String, close: String, count: Int, to output: inout String, options: JSONWriteOptions, indent: Int,
        element: (Int, inout String) -> Void
    ) {
        output += open
        guard count > 0 else {
            output += close
            return
        }
        let pretty = options.contains(.pretty)
        for index in 0..<count {
            if index > 0 { output += "," }
            if pretty { output += "\n" + String(repeating: "  ", count: indent + 1) }
            element(index, &output)
        }
        if pretty { output += "\n" + String(repeating: "  ", count: indent) }
        output += close
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
