import FleetJSON
import Yams

/// One YAML file of a settings tree as values: a mapping of names to JSON values, with the
/// places that hold a secret reference (`!secret APP/KEYPATH`) instead of a value.
public struct TreeDocument: Sendable, Hashable {
    /// The values; each secret reference's place holds ``TreeYAML/secretPlaceholder``, the
    /// same text the server shows for a secret, so a reference compares equal to a masked value.
    public var values: JSONObject
    /// The secret references, by their place in ``values`` (a JSON pointer's text, `/pin`):
    /// what each names, `kiosk/pin`.
    public var secrets: [String: String]

    /// Creates a document.
    public init(values: JSONObject = [:], secrets: [String: String] = [:]) {
        self.values = values
        self.secrets = secrets
    }

    /// Whether the document holds nothing.
    public var isEmpty: Bool { values.isEmpty }
}

/// Where a tree file is wrong: the file (relative to the tree), and the line and column
/// (from 1) when the problem is at one place.
public struct TreeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The file, as given to the reader (relative to the tree's folder).
    public var file: String
    /// The line, from 1; `nil` when the problem is the file as a whole.
    public var line: Int?
    /// The column, from 1 (Unicode scalars); `nil` with ``line``.
    public var column: Int?
    /// What is wrong, for a person.
    public var message: String

    /// Creates an error.
    public init(file: String, line: Int? = nil, column: Int? = nil, _ message: String) {
        self.file = file
        self.line = line
        self.column = column
        self.message = message
    }

    /// `FILE:LINE:COLUMN: message`, or `FILE: message`.
    public var description: String {
        guard let line else { return "\(file): \(message)" }
        return "\(file):\(line):\(column ?? 1): \(message)"
    }
}

/// The YAML of a settings tree: written by fleetset itself, read with Yams.
///
/// **Writing** is fleetset's own, so that it is stable byte for byte (keys sorted by their UTF-8
/// bytes, two spaces of indentation, block style, `{}` and `[]` for empty collections) and can
/// write the `!secret` tag, which Yams' emitter leaves out of a scalar it resolves implicitly.
/// A string is written plain only when it cannot be read as anything else, under the YAML 1.2
/// core schema or YAML 1.1 (`no`, `on`, `12`, `1e3`, `null`, `~`, `2026-11-27`, `<<` are
/// quoted); otherwise in double quotes with JSON's escapes (control characters, C1 controls,
/// U+2028, U+2029 and U+FEFF escaped). Integers are written as integers, other numbers as
/// JSON writes them.
///
/// **Reading** uses Yams without its type rules; fleetset types plain scalars by the YAML 1.2
/// core schema: `null`, `Null`, `NULL`, `~` and nothing are null; `true` and `false` (and their
/// capitalized forms) booleans; decimal, `0o` and `0x` integers; decimal numbers with a
/// fraction or exponent. Everything else plain is a string (`yes`, `on`, `no` included), and a
/// quoted or block scalar is always a string. `!!str`, `!!int`, `!!float`, `!!bool`, `!!null`,
/// `!!map`, `!!seq` and `!secret` are the tags read; another tag, `.inf`, `.nan`, anchors and
/// aliases, and a key that is not a scalar are refused, each with its file, line and column.
public enum TreeYAML {
    /// What a secret reference's place holds in ``TreeDocument/values``: the server's mask.
    public static let secretPlaceholder: JSONValue = "********"

    /// The tag of a secret reference.
    public static let secretTag = "!secret"

    // MARK: - Writing

    /// The text of `document`: a block mapping (`{}` when empty), ending with a line break.
    public static func text(of document: TreeDocument) -> String {
        guard !document.values.isEmpty else { return "{}\n" }
        var lines: [String] = []
        appendLines(of: .object(document.values), at: .root, secrets: document.secrets, indent: 0, into: &lines)
        return lines.joined(separator: "\n") + "\n"
    }

    private static func appendLines(
        of value: JSONValue, at pointer: JSONPointer, secrets: [String: String], indent: Int, into lines: inout [String]
    ) {
        let pad = String(repeating: " ", count: indent)
        switch value {
        case .object(let object):
            for key in object.keys.sorted(by: { $0.utf8.lexicographicallyPrecedes($1.utf8) }) {
                let place = pointer.appending(key)
                let child = object[key] ?? .null
                let head = pad + scalarText(key) + ":"
                if let inline = inlineText(child, at: place, secrets: secrets) {
                    lines.append(head + " " + inline)
                } else {
                    lines.append(head)
                    appendLines(of: child, at: place, secrets: secrets, indent: indent + 2, into: &lines)
                }
            }
        case .array(let items):
            for (index, item) in items.enumerated() {
                let place = pointer.appending(index: index)
                if let inline = inlineText(item, at: place, secrets: secrets) {
                    lines.append(pad + "- " + inline)
                    continue
                }
                // The item's first line goes after the dash; the rest keep its indentation.
                var nested: [String] = []
                appendLines(of: item, at: place, secrets: secrets, indent: indent + 2, into: &nested)
                for (offset, line) in nested.enumerated() {
                    lines.append(offset == 0 ? pad + "- " + line.dropFirst(indent + 2) : line)
                }
            }
        default:
            lines.append(pad + (inlineText(value, at: pointer, secrets: secrets) ?? ""))
        }
    }

    /// The text of a value that fits on its key's line: a scalar, a secret reference, `{}` or
    /// `[]`; `nil` for a collection with members.
    private static func inlineText(_ value: JSONValue, at pointer: JSONPointer, secrets: [String: String]) -> String? {
        if let reference = secrets[pointer.description] { return secretTag + " " + scalarText(reference) }
        switch value {
        case .null: return "null"
        case .bool(let flag): return flag ? "true" : "false"
        case .number(let number): return number.description
        case .string(let text): return scalarText(text)
        case .array(let items): return items.isEmpty ? "[]" : nil
        case .object(let object): return object.isEmpty ? "{}" : nil
        }
    }

    /// `text` plain when that reads back as the same string under every YAML reading, else in
    /// double quotes.
    public static func scalarText(_ text: String) -> String {
        isPlainSafe(text) ? text : quoted(text)
    }

    /// Characters a plain scalar may hold here (a conservative set: letters, digits and a few
    /// marks that mean nothing to YAML inside a word).
    private static func isPlainCharacter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar {
        case "a"..."z", "A"..."Z", "0"..."9", " ", "_", "-", ".", "/", "+", "=", "(", ")", "@", "$", "^", ";", "!", "~": true
        default: false
        }
    }

    private static func isPlainSafe(_ text: String) -> Bool {
        guard let first = text.unicodeScalars.first, let last = text.unicodeScalars.last else { return false }
        guard first != " ", last != " ", first != "-", first != "+", first != ".", first != "/", first != "@", first != "!", first != "~",
            text.unicodeScalars.allSatisfy(isPlainCharacter)
        else { return false }
        // Whatever any YAML reader could take for another type is quoted: the core schema's
        // forms, YAML 1.1's booleans (y, n, yes, on, …), numbers, timestamps, merge keys.
        if case .string = coreScalar(text) {} else { return false }
        if Resolver.default.resolveTag(of: Node(text)) != .str { return false }
        return !["y", "Y", "n", "N"].contains(text)
    }

    /// `text` in double quotes: JSON's string (its escapes are YAML's too), with the characters
    /// YAML wants escaped besides (C1 controls, U+2028, U+2029, U+FEFF) as `\u` escapes.
    static func quoted(_ text: String) -> String {
        var result = ""
        for scalar in JSONValue.string(text).serialized().unicodeScalars {
            let value = scalar.value
            if (0x80...0x9F).contains(value) || value == 0x2028 || value == 0x2029 || value == 0xFEFF {
                let hex = String(value, radix: 16, uppercase: true)
                result += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    // MARK: - Reading

    /// Reads one tree file: a mapping (an empty file is an empty mapping).
    ///
    /// - Parameters:
    ///   - file: the file's name in errors.
    ///   - allowSecrets: whether `!secret` may appear (values files); elsewhere it is refused.
    /// - Throws: ``TreeError`` naming the file, with the line and column of the problem.
    public static func document(_ text: String, file: String, allowSecrets: Bool = true) throws(TreeError) -> TreeDocument {
        guard text.utf8.count <= maximumFileSize else {
            throw TreeError(file: file, line: nil, column: nil, "is larger than \(maximumFileSize >> 20) MiB")
        }
        // Refused before Yams composes the document: it expands every alias, and a few nested
        // ones make a file of a few lines cost hours (a "billion laughs").
        if let (line, column) = anchorOrAlias(in: text) {
            throw TreeError(
                file: file, line: line, column: column, "anchors and aliases are not read in a settings tree: write each value out")
        }
        let root: Node?
        let parser: Parser
        do {
            parser = try Parser(yaml: text, resolver: .basic)
            root = try parser.singleRoot()
        } catch {
            throw treeError(error, file: file)
        }
        guard let root else { return TreeDocument() }
        var secrets: [String: String] = [:]
        // The parser holds the anchors (nodes refer to them weakly): kept while the nodes are read.
        let value = try withExtendedLifetime(parser) { () throws(TreeError) -> JSONValue in
            try read(root, at: .root, file: file, allowSecrets: allowSecrets, secrets: &secrets)
        }
        guard case .object(let object) = value else {
            throw TreeError(
                file: file, line: root.mark?.line, column: root.mark?.column, "must be a mapping of names to values, not \(value.typeName)")
        }
        return TreeDocument(values: object, secrets: secrets)
    }

    /// The largest tree file read.
    public static let maximumFileSize = 4 << 20

    /// Where `text` has a YAML anchor (`&name`) or alias (`*name`), as a 1-based line and column;
    /// `nil` when it has none. A token starts a node only at the start of a line (after its
    /// indentation) or after `- `, `? `, `: `, `[`, `{` or `,`; quoted scalars and comments are
    /// skipped. A `&` or `*` starting a word where a node starts counts even inside a block
    /// scalar (`|`, `>`), which fleetset never writes: such a value is refused, to be quoted.
    static func anchorOrAlias(in text: String) -> (line: Int, column: Int)? {
        enum Quote { case none, single, double }
        var quote = Quote.none
        var line = 1
        var column = 0
        var nodeStart = true  // at a place where a node may start
        var previous: Character = "\n"
        var escaped = false
        var inComment = false
        let characters = Array(text)
        for (index, character) in characters.enumerated() {
            column += 1
            defer { previous = character }
            if character == "\n" {
                line += 1
                column = 0
                inComment = false
                if quote == .none { nodeStart = true }
                continue
            }
            if inComment { continue }
            switch quote {
            case .double:
                if escaped {
                    escaped = false
                } else if character == "\\" {
                    escaped = true
                } else if character == "\"" {
                    quote = .none
                }
                continue
            case .single:
                if character == "'" { quote = .none }  // '' inside reads as two quotes: the same
                continue
            case .none:
                break
            }
            switch character {
            case " ", "\t":
                continue
            case "#" where previous == " " || previous == "\t" || previous == "\n":
                inComment = true
            case "\"" where nodeStart:
                quote = .double
                nodeStart = false
            case "'" where nodeStart:
                quote = .single
                nodeStart = false
            case "[", "{", ",":
                nodeStart = true
            case "-", "?", ":":
                let next = index + 1 < characters.count ? characters[index + 1] : "\n"
                nodeStart = next == " " || next == "\t" || next == "\n" || (character == ":" && (next == "," || next == "]" || next == "}"))
            case "&" where nodeStart, "*" where nodeStart:
                let next = index + 1 < characters.count ? characters[index + 1] : "\n"
                if next != " " && next != "\t" && next != "\n" { return (line, column) }
                nodeStart = false
            default:
                nodeStart = false
            }
        }
        return nil
    }

    private static func read(
        _ node: Node, at pointer: JSONPointer, file: String, allowSecrets: Bool, secrets: inout [String: String]
    ) throws(TreeError) -> JSONValue {
        let fail = { (message: String) -> TreeError in TreeError(file: file, line: node.mark?.line, column: node.mark?.column, message) }
        // Yams puts an alias's node in its place; the anchor tells.
        if node.anchor != nil { throw fail("anchors and aliases are not read in a settings tree: write each value out") }
        switch node {
        case .scalar(let scalar):
            let tag = scalar.tag.rawValue
            switch tag {
            case secretTag:
                guard allowSecrets else { throw fail("a secret reference (!secret) belongs only in a values file") }
                guard !pointer.isRoot, !scalar.string.isEmpty, scalar.string.contains("/") else {
                    throw fail("!secret names the secret as APP/KEYPATH, e.g. !secret kiosk/operatorPassword")
                }
                secrets[pointer.description] = scalar.string
                return secretPlaceholder
            case "", "!":
                // Untagged: a plain scalar is typed by the core schema, a quoted one is text.
                guard tag == "", scalar.style == .plain || scalar.style == .any else { return .string(scalar.string) }
                if let problem = unsupportedPlain(scalar.string) { throw fail(problem) }
                return coreScalar(scalar.string)
            case Tag.Name.str.rawValue:
                return .string(scalar.string)
            case Tag.Name.null.rawValue, Tag.Name.bool.rawValue, Tag.Name.int.rawValue, Tag.Name.float.rawValue:
                let value = coreScalar(scalar.string)
                let expected = [Tag.Name.null.rawValue: "null", Tag.Name.bool.rawValue: "boolean"][tag] ?? "number"
                switch (value, expected) {
                case (.null, "null"), (.bool, "boolean"), (.number, "number"): return value
                default: throw fail("\(scalarText(scalar.string)) is not a \(expected), as its tag \(tag) says")
                }
            default:
                throw fail("the tag \(tag) is not one fleetset reads (only !secret and the standard !!str, !!int, !!float, !!bool, !!null)")
            }
        case .mapping(let mapping):
            guard [Tag.Name.implicit.rawValue, "!", Tag.Name.map.rawValue].contains(mapping.tag.rawValue) else {
                throw fail("the tag \(mapping.tag.rawValue) is not one fleetset reads on a mapping")
            }
            var object = JSONObject()
            for (key, value) in mapping {
                guard case .scalar(let keyScalar) = key else {
                    throw TreeError(file: file, line: key.mark?.line, column: key.mark?.column, "a key must be a name, not a collection")
                }
                guard keyScalar.tag.rawValue != secretTag else {
                    throw TreeError(file: file, line: key.mark?.line, column: key.mark?.column, "a key cannot be a secret reference")
                }
                object[keyScalar.string] = try read(
                    value, at: pointer.appending(keyScalar.string), file: file, allowSecrets: allowSecrets, secrets: &secrets)
            }
            return .object(object)
        case .sequence(let sequence):
            guard [Tag.Name.implicit.rawValue, "!", Tag.Name.seq.rawValue].contains(sequence.tag.rawValue) else {
                throw fail("the tag \(sequence.tag.rawValue) is not one fleetset reads on a sequence")
            }
            var items: [JSONValue] = []
            for (index, item) in sequence.enumerated() {
                items.append(try read(item, at: pointer.appending(index: index), file: file, allowSecrets: allowSecrets, secrets: &secrets))
            }
            return .array(items)
        case .alias:
            throw fail("anchors and aliases are not read in a settings tree: write each value out")
        }
    }

    /// Why a plain scalar cannot be a JSON value (`.inf`, `.nan`), or `nil`.
    private static func unsupportedPlain(_ text: String) -> String? {
        let lowered = text.lowercased()
        guard [".inf", "+.inf", "-.inf", ".nan"].contains(lowered) else { return nil }
        return "\(text) is not a JSON number: write a finite number, or quote it for the text"
    }

    /// A plain scalar typed by the YAML 1.2 core schema.
    static func coreScalar(_ text: String) -> JSONValue {
        switch text {
        case "", "~", "null", "Null", "NULL": return .null
        case "true", "True", "TRUE": return .bool(true)
        case "false", "False", "FALSE": return .bool(false)
        default: break
        }
        let bytes = Array(text.utf8)
        let isDigit = { (byte: UInt8) in byte >= 0x30 && byte <= 0x39 }
        var body = bytes[...]
        var negative = false
        if let sign = body.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
            negative = sign == UInt8(ascii: "-")
            body = body.dropFirst()
        }
        // Integers: [-+]?[0-9]+ (decimal), 0o[0-7]+, 0x[0-9a-fA-F]+.
        if !body.isEmpty, body.allSatisfy(isDigit) {
            if let parsed = try? JSONParser.parse(Array((negative ? "-" : "").utf8) + body.drop(while: { $0 == 0x30 }).nonEmpty),
                case .number = parsed
            {
                return parsed
            }
        }
        if bytes.count > 2, bytes[0] == 0x30, bytes[1] == UInt8(ascii: "o") || bytes[1] == UInt8(ascii: "x") {
            let digits = String(decoding: bytes[2...], as: UTF8.self)
            if let value = Int64(digits, radix: bytes[1] == UInt8(ascii: "o") ? 8 : 16) { return .number(.integer(value)) }
        }
        // Numbers: [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?
        var index = body.startIndex
        var mantissaDigits = 0
        while index < body.endIndex, isDigit(body[index]) {
            index += 1
            mantissaDigits += 1
        }
        if index < body.endIndex, body[index] == UInt8(ascii: ".") {
            index += 1
            while index < body.endIndex, isDigit(body[index]) {
                index += 1
                mantissaDigits += 1
            }
        }
        guard mantissaDigits > 0 else { return .string(text) }
        if index < body.endIndex, body[index] == UInt8(ascii: "e") || body[index] == UInt8(ascii: "E") {
            index += 1
            if index < body.endIndex, body[index] == UInt8(ascii: "-") || body[index] == UInt8(ascii: "+") { index += 1 }
            let exponentStart = index
            while index < body.endIndex, isDigit(body[index]) { index += 1 }
            guard index > exponentStart else { return .string(text) }
        }
        guard index == body.endIndex, let value = Double(text), value.isFinite else { return .string(text) }
        return .number(.double(value))
    }

    /// A Yams error as a ``TreeError`` with its place.
    static func treeError(_ error: any Error, file: String) -> TreeError {
        guard let yaml = error as? YamlError else { return TreeError(file: file, "\(error)") }
        switch yaml {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _), .composer(_, let problem, let mark, _):
            return TreeError(file: file, line: mark.line, column: mark.column, "not YAML: \(problem)")
        case .duplicatedKeysInMapping(let duplicates, let context):
            return TreeError(
                file: file, line: context.mark.line, column: context.mark.column,
                "a key is written twice in one mapping: \(duplicates.joined(separator: ", "))")
        case .reader(let problem, _, _, _):
            return TreeError(file: file, "not YAML: \(problem)")
        default:
            return TreeError(file: file, "not YAML: \(yaml)")
        }
    }
}

extension ArraySlice where Element == UInt8 {
    /// The slice, or a single `0` when it is empty (what is left of `000` without its zeros).
    fileprivate var nonEmpty: [UInt8] { isEmpty ? [0x30] : Array(self) }
}
