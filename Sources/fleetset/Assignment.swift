import ArgumentParser

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
