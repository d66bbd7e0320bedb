import ArgumentParser

/// One `KEY=VALUE` argument of `fleetset set` and `fleetset admin set`, split at the first `=`.
/// What the value text means is the command's to say: the setting's schema type on the device,
/// JSON (or else a string) for the admin.
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
