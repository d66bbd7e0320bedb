import FleetProtocol

/// A request the server refuses, with the HTTP status, a stable code and a sentence: the HTTP
/// layer turns it into an ``ErrorBody`` answer as it is.
public struct ServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status code.
    public let status: Int
    /// The machine-readable code (`stale-revision`, …).
    public let code: String
    /// For a person.
    public let message: String
    /// Per-key or per-value reasons.
    public let details: [ErrorBody.Detail]

    public init(_ status: Int, _ code: String, _ message: String, details: [ErrorBody.Detail] = []) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
    }

    /// The answer's body.
    public var body: ErrorBody { ErrorBody(error: code, message: message, details: details) }

    public var description: String { "\(status) \(code): \(message)" }

    static func badRequest(_ message: String) -> ServiceError { ServiceError(400, "bad-request", message) }
    static func badParameter(_ message: String) -> ServiceError { ServiceError(400, "bad-parameter", message) }
    static func unknownApp(_ app: String) -> ServiceError {
        ServiceError(404, "unknown-app", "no metadata is stored for app \"\(app)\"")
    }
    static let deviceDisabled = ServiceError(
        401, "device-disabled", "this device is disabled; an admin can enable it again, or re-enroll it with a new enrollment token")
    static func unknownDevice(_ id: String) -> ServiceError {
        ServiceError(404, "unknown-device", "no device \"\(id)\" is enrolled")
    }
}
