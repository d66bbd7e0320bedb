/// Text that came from elsewhere (a server, a device, an app's metadata) made safe to show on a
/// terminal, and the rule for which characters such text may not hold.
///
/// A terminal obeys the control characters in what it prints: `ESC ] 52 ; c ; … BEL` writes the
/// clipboard, `ESC [ 2 K` and `CR` rewrite a line already shown, a bidirectional override makes
/// text read in another order than it is stored. Every table and line `fleetset` prints from
/// such text goes through ``escaped(_:keepingNewlinesAndTabs:)``, and the server refuses these
/// characters in what devices report (``check(_:at:allowingNewlinesAndTabs:)``).
///
/// The characters concerned (``isEscaped(_:)``):
/// - C0 controls U+0000–U+001F and DEL U+007F;
/// - C1 controls U+0080–U+009F (U+009B is CSI to terminals that read C1 in UTF-8);
/// - the bidirectional controls (Unicode's `Bidi_Control`): U+061C, U+200E, U+200F,
///   U+202A–U+202E and U+2066–U+2069.
///
/// How each is shown: `\n`, `\r`, `\t` and `\e` (ESC) by name; any other C0 control and DEL as
/// `\x` and two hex digits (`\x07`, `\x00`, `\x7F`); C1 and bidirectional controls as
/// `\u{` hex `}` (`\u{9B}`, `\u{202E}`). A backslash already in the text is left as it is, so
/// the form is for reading, not for reading back: `\e` may be an escape or the two characters.
/// Everything else, non-ASCII text included (`é`, `日本`, emoji), is shown unchanged.
public enum TerminalText {
    /// Whether `scalar` is shown as an escape: a C0 or C1 control, DEL, or a bidirectional control.
    public static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        isControl(scalar) || isBidirectionalControl(scalar)
    }

    /// `text` with every character ``isEscaped(_:)`` names shown as its visible escape (`\e`,
    /// `\x07`, `\u{202E}`, …): the one way `fleetset` shows text it did not write itself.
    ///
    /// - Parameter keepingNewlinesAndTabs: leave `\n` and `\t` as they are, for a message of
    ///   several lines shown on its own (a diagnostic, a report the agent sends); table cells
    ///   and one-line texts escape them too.
    public static func escaped(_ text: String, keepingNewlinesAndTabs: Bool = false) -> String {
        guard text.unicodeScalars.contains(where: { isShownEscaped($0, keepingNewlinesAndTabs: keepingNewlinesAndTabs) }) else {
            return text
        }
        var shown = ""
        shown.unicodeScalars.reserveCapacity(text.unicodeScalars.count + 8)
        for scalar in text.unicodeScalars {
            if isShownEscaped(scalar, keepingNewlinesAndTabs: keepingNewlinesAndTabs) {
                shown += escape(of: scalar)
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// The value as JSON text (as ``JSONValue/serialized(_:maximumLength:)`` writes it) with
    /// the C1 and bidirectional controls inside its strings written as `\u` escapes too (the
    /// writer escapes C0 and DEL already): the same JSON value, safe on a terminal.
    public static func serialized(_ value: JSONValue, _ options: JSONWriteOptions = []) -> String {
        let text = value.serialized(options)
        // The writer's own line breaks stay; what is left to escape can only be inside a string.
        let isLeftToEscape = { (scalar: Unicode.Scalar) in scalar.value >= 0x80 && isEscaped(scalar) }
        guard text.unicodeScalars.contains(where: isLeftToEscape) else { return text }
        var shown = ""
        for scalar in text.unicodeScalars {
            if isLeftToEscape(scalar) {
                shown += "\\u" + fourHexDigits(scalar)
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    /// The first character of `text` that ``isEscaped(_:)`` names (but `\n` and `\t` with
    /// `allowingNewlinesAndTabs`), with its offset in Unicode scalars from 0; `nil` when none.
    public static func firstEscaped(in text: String, allowingNewlinesAndTabs: Bool = false) -> (offset: Int, scalar: Unicode.Scalar)? {
        let found = text.unicodeScalars.enumerated().first { isShownEscaped($0.element, keepingNewlinesAndTabs: allowingNewlinesAndTabs) }
        return found.map { (offset: $0.offset, scalar: $0.element) }
    }

    /// Refuses text a device reports for people to read (its facts, its status messages) when it
    /// holds a character ``isEscaped(_:)`` names: `/machine/hostname: contains a control character
    /// (U+001B) at offset 3`, the offset in Unicode scalars from 0.
    ///
    /// - Parameter allowingNewlinesAndTabs: accept `\n` and `\t` (a message of several lines).
    public static func check(_ text: String, at location: JSONPointer, allowingNewlinesAndTabs: Bool = false) throws(DocumentError) {
        guard let (offset, scalar) = firstEscaped(in: text, allowingNewlinesAndTabs: allowingNewlinesAndTabs) else { return }
        let kind = isBidirectionalControl(scalar) ? "a bidirectional control character" : "a control character"
        throw DocumentError(at: location, "contains \(kind) (U+\(fourHexDigits(scalar))) at offset \(offset)")
    }

    // MARK: - The characters

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value)
    }

    private static func isBidirectionalControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    private static func isShownEscaped(_ scalar: Unicode.Scalar, keepingNewlinesAndTabs: Bool) -> Bool {
        isEscaped(scalar) && !(keepingNewlinesAndTabs && (scalar == "\n" || scalar == "\t"))
    }

    /// The visible form of one character ``isEscaped(_:)`` names.
    private static func escape(of scalar: Unicode.Scalar) -> String {
        switch scalar {
        case "\n": return "\\n"
        case "\r": return "\\r"
        case "\t": return "\\t"
        case "\u{1B}": return "\\e"
        default:
            let hex = String(scalar.value, radix: 16, uppercase: true)
            if scalar.value <= 0x7F { return "\\x" + (hex.count == 1 ? "0" : "") + hex }
            return "\\u{" + hex + "}"
        }
    }

    /// The code point in upper-case hex, at least four digits (`001B`, `202E`), as `U+` and
    /// JSON's `\u` write it.
    private static func fourHexDigits(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
