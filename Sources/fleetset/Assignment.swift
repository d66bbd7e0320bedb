import ArgumentParser
import FleetJSON

/// One `KEY=VALUE` argument of `fleetset set` and `fleetset admin set`, split at the first `=`.
/// Both read the value text the same way (``ValueTyping``): by the schema of the place it goes.
struct Assignment: Sendable, Equatable {
    let key: String
    let valueText: String

    /// Reads `KEY=VALUE`; a missing `=` or an empty key is a usage error that quotes the argument.
    static func parse(_ argument: String) throws -> Assignment {
        guard let equals = argument.firstIndex(of: "="), equals != argument.startIndex else {
            throw ValidationError("\"\(argument)\" is not KEY=VALUE")
        }
        return Assignment(key: String(argument[..<equals]), valueText: String(argument[argument.index(after: equals)...]))
    }

    /// Where the KEY points: ``KeyPath/location(of:)``.
    func location() throws(KeyPath.Malformed) -> JSONPointer { try KeyPath.location(of: key) }
}

/// The KEY of `get`, `set`, `admin set` and `admin unset`: a setting's name, or a key path into
/// one (`playlist/0/content`, JSON Pointer without its leading slash: `~1` for a `/` in a name,
/// `~0` for a `~`).
enum KeyPath {
    /// A KEY that is no key path, for every command's message alike.
    struct Malformed: Error, CustomStringConvertible {
        let text: String
        var description: String { "\"\(text)\" is not a key path (~1 for a / in a name, ~0 for a ~)" }
    }

    /// The place `key` names: a setting when it has no `/` (taken as written), else the key path.
    static func location(of key: String) throws(Malformed) -> JSONPointer {
        guard key.contains("/") else { return JSONPointer.root.appending(key) }
        guard let path = JSONPointer(keyPath: key) else { throw Malformed(text: key) }
        return path
    }
}

/// How `fleetset set` and `fleetset admin set` read a VALUE: one rule for both sides
/// (`Metadata.readValue(_:at:)`), told the same way in both commands' help.
enum ValueTyping {
    static let help = """
        Each VALUE is read by the schema of the setting (or of the place inside it) it goes to: \
        7 is an integer for an integer setting and the text "7" for a string one, an enum of \
        strings included; true/false (yes/no, on/off) for booleans; JSON for numbers, arrays and \
        objects; null where null is allowed; JSON, else text, where the schema names no type. \
        A VALUE in double quotes as JSON ('"7"', '"true"') is always that text.
        """
}
