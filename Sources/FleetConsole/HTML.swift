/// A piece of HTML text. Written as a string literal, what is interpolated is escaped unless it
/// is ``HTML`` itself, so that a value from a device, a schema or an admin can never become
/// markup: `"<td>\(device.id)</td>" as HTML`.
public struct HTML: Sendable, Hashable, ExpressibleByStringInterpolation, CustomStringConvertible {
    /// The markup.
    public private(set) var text: String

    /// Markup as it is (only for text fleetset wrote itself).
    public init(raw text: String) { self.text = text }

    public init(stringLiteral value: String) { text = value }

    public init(stringInterpolation: Interpolation) { text = stringInterpolation.text }

    /// No markup at all.
    public static let empty = HTML(raw: "")

    public var description: String { text }

    /// The pieces one after another.
    public static func joined(_ pieces: some Sequence<HTML>, separator: HTML = .empty) -> HTML {
        HTML(raw: pieces.map(\.text).joined(separator: separator.text))
    }

    public static func + (lhs: HTML, rhs: HTML) -> HTML { HTML(raw: lhs.text + rhs.text) }

    /// Escapes text for element content and for attribute values in double quotes.
    public static func escape(_ text: String) -> String {
        var output = ""
        output.reserveCapacity(text.utf8.count)
        for character in text.unicodeScalars {
            switch character {
            case "&": output += "&amp;"
            case "<": output += "&lt;"
            case ">": output += "&gt;"
            case "\"": output += "&quot;"
            case "'": output += "&#39;"
            default: output.unicodeScalars.append(character)
            }
        }
        return output
    }

    /// Builds the text of an interpolated literal, escaping every interpolated string.
    public struct Interpolation: StringInterpolationProtocol {
        var text = ""

        public init(literalCapacity: Int, interpolationCount: Int) {
            text.reserveCapacity(literalCapacity + interpolationCount * 16)
        }

        public mutating func appendLiteral(_ literal: String) { text += literal }

        /// Text, escaped.
        public mutating func appendInterpolation(_ value: some StringProtocol) { text += HTML.escape(String(value)) }

        /// A number.
        public mutating func appendInterpolation(_ value: some BinaryInteger) { text += String(value) }

        /// Markup, as it is.
        public mutating func appendInterpolation(_ html: HTML) { text += html.text }

        /// Markup, or nothing.
        public mutating func appendInterpolation(_ html: HTML?) { text += html?.text ?? "" }

        /// ` name="value"` when `value` is given, nothing otherwise (for optional attributes).
        public mutating func appendInterpolation(attribute name: String, _ value: String?) {
            guard let value else { return }
            text += " \(name)=\"\(HTML.escape(value))\""
        }

        /// ` name` when `present` (a boolean attribute such as `checked`).
        public mutating func appendInterpolation(flag name: String, _ present: Bool) {
            if present { text += " " + name }
        }
    }
}
