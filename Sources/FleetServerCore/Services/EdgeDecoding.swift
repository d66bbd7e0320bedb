import FleetJSON
import FleetProtocol

/// What the HTTP layer decodes before it calls a service: wire messages, merge patches and
/// scope parameters, each refused with a 400 that says what was wrong and where.
extension ServiceError {
    /// Reads a wire message, turning its error into a 400 that names the member.
    public static func decode<Message>(_ body: JSONValue, as make: (JSONValue) throws(DocumentError) -> Message) throws(ServiceError)
        -> Message
    {
        do {
            return try make(body)
        } catch {
            throw ServiceError.badRequest("\(error.location.displayText): \(error.message)")
        }
    }

    /// `body` as the JSON object a merge patch is.
    ///
    /// - Throws: 400 saying `what` must be an object.
    public static func object(_ body: JSONValue, what: String) throws(ServiceError) -> JSONObject {
        guard case .object(let object) = body else { throw ServiceError.badRequest("\(what) must be a JSON object") }
        return object
    }
}

extension Scope {
    /// The scope an admin names (`?scope=`, a rollout's or a revert's `scope`); `defaults` is
    /// not one (defaults live in the metadata).
    ///
    /// - Throws: 400 `bad-parameter` for a missing or malformed scope.
    public static func named(_ parameter: String?) throws(ServiceError) -> Scope {
        guard let parameter else { throw ServiceError.badParameter("add ?scope=app, ?scope=group:NAME or ?scope=device:ID") }
        guard let scope = Scope(parameter: parameter) else {
            throw ServiceError.badParameter(
                "scope must be app, group:NAME or device:ID (names: 1 to 128 characters, no control characters)")
        }
        return scope
    }
}
