/// An RFC 6901 JSON Pointer: the path to one value inside a document, such as
/// `/screensaverPlaylist/0/duration`.
///
/// Tokens are kept unescaped; ``description`` escapes `~` as `~0` and `/` as `~1`. The pointer to
/// the whole document has no tokens and is written as the empty string.
public struct JSONPointer: Sendable, Hashable, CustomStringConvertible, Comparable {
    /// The reference tokens, unescaped, outermost first.
    public private(set) var tokens: [String]

    /// The pointer to the whole document.
    public static let root = JSONPointer(tokens: [])

    /// A pointer from unescaped tokens.
    public init(tokens: [String]) {
        self.tokens = tokens
    }

    /// Parses the RFC 6901 text form (`""` or `/a/b~1c`).
    ///
    /// Returns `nil` for text that is not a pointer: a non-empty string that does not start with
    /// `/`, or a `~` not followed by `0` or `1`.
    public init?(_ text: Substring) {
        if text.isEmpty {
            self.tokens = []
            return
        }
        guard text.first == "/" else { return nil }
        var tokens: [String] = []
        for rawToken in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            guard let token = Self.unescape(rawToken) else { return nil }
            tokens.append(token)
        }
        self.tokens = tokens
    }

    /// Parses the RFC 6901 text form; see ``init(_:)-(Substring)``.
    public init?(_ text: String) {
        self.init(text[...])
    }

    /// Whether this is the pointer to the whole document.
    public var isRoot: Bool { tokens.isEmpty }

    /// This pointer extended by one token (an object key or an array index).
    public func appending(_ token: String) -> JSONPointer {
        var copy = self
        copy.tokens.append(token)
        return copy
    }

    /// This pointer extended by an array index.
    public func appending(index: Int) -> JSONPointer {
        appending(String(index))
    }

    /// The RFC 6901 text: `""` for the root, otherwise `/` before each escaped token.
    public var description: String {
        var text = ""
        for token in tokens {
            text += "/"
            text += Self.escape(token)
        }
        return text
    }

    /// The pointer as messages show it: ``description``, except that the whole document (the
    /// empty pointer, invisible in `: message`) is shown as `/`.
    public var displayText: String {
        isRoot ? "/" : description
    }

    /// Orders pointers token by token, so a document's errors can be listed in a stable order.
    public static func < (lhs: JSONPointer, rhs: JSONPointer) -> Bool {
        lhs.tokens.lexicographicallyPrecedes(rhs.tokens)
    }

    /// Escapes one token: `~` → `~0`, `/` → `~1`.
    public static func escape(_ token: String) -> String {
        guard token.contains(where: { $0 == "~" || $0 == "/" }) else { return token }
        var escaped = ""
        for character in token {
            switch character {
            case "~": escaped += "~0"
            case "/": escaped += "~1"
            default: escaped.append(character)
            }
        }
        return escaped
    }

    private static func unescape(_ token: Substring) -> String? {
        guard token.contains("~") else { return String(token) }
        var result = ""
        var iterator = token.makeIterator()
        while let character = iterator.next() {
            guard character == "~" else {
                result.append(character)
                continue
            }
            switch iterator.next() {
            case "0": result.append("~")
            case "1": result.append("/")
            default: return nil
            }
        }
        return result
    }
}

extension JSONValue {
    /// The value `pointer` refers to, or `nil` when it does not exist. Setting a value replaces
    /// the one there; where nothing is (or on setting `nil`), nothing changes.
    ///
    /// An array token must be a decimal index without leading zeros, as RFC 6901 requires.
    public subscript(pointer pointer: JSONPointer) -> JSONValue? {
        get {
            var current = self
            for token in pointer.tokens {
                switch current {
                case .object(let object):
                    guard let next = object[token] else { return nil }
                    current = next
                case .array(let elements):
                    guard let index = JSONPointer.arrayIndex(token), index < elements.count else { return nil }
                    current = elements[index]
                default:
                    return nil
                }
            }
            return current
        }
        set {
            guard let newValue else { return }
            self = replacing(pointer.tokens[...], with: newValue)
        }
    }

    /// This value with the value at `tokens` replaced, when there is one there.
    private func replacing(_ tokens: ArraySlice<String>, with replacement: JSONValue) -> JSONValue {
        guard let token = tokens.first else { return replacement }
        switch self {
        case .object(var object):
            guard let member = object[token] else { return self }
            object[token] = member.replacing(tokens.dropFirst(), with: replacement)
            return .object(object)
        case .array(var elements):
            guard let index = JSONPointer.arrayIndex(token), index < elements.count else { return self }
            elements[index] = elements[index].replacing(tokens.dropFirst(), with: replacement)
            return .array(elements)
        default:
            return self
        }
    }
}

extension JSONPointer {
    /// The array index a token denotes: decimal digits, no leading zero (except `0` itself).
    public static func arrayIndex(_ token: String) -> Int? {
        guard !token.isEmpty, token.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        guard token == "0" || token.first != "0" else { return nil }
        return Int(token)
    }
}
