import FleetProtocol
import HTTPTypes

/// A request the server refuses, with the HTTP status, a stable code and a sentence: the HTTP
/// layer turns it into an ``ErrorBody`` answer as it is.
public struct ServiceError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status.
    public let status: HTTPResponse.Status
    /// The machine-readable code (``ErrorCode/staleRevision``, …).
    public let code: ErrorCode
    /// For a person.
    public let message: String
    /// Per-key or per-value reasons.
    public let details: [ErrorBody.Detail]
    /// Whole seconds to wait before trying again (`Retry-After`), for 429 and 503.
    public let retryAfterSeconds: Int?
    /// For a 401 of a credential the server knows (an expired or revoked API token, a disabled
    /// account): whose it is, for the audit trail. Never in the answer.
    public var refusedCaller: RefusedCaller?

    /// The account and credential of a refused request (see ``refusedCaller``).
    public struct RefusedCaller: Sendable, Hashable {
        public var account: String
        public var credential: String

        public init(account: String, credential: String) {
            self.account = account
            self.credential = credential
        }
    }

    public init(
        _ status: HTTPResponse.Status, _ code: ErrorCode, _ message: String, details: [ErrorBody.Detail] = [], retryAfterSeconds: Int? = nil
    ) {
        self.status = status
        self.code = code
        self.message = message
        self.details = details
        self.retryAfterSeconds = retryAfterSeconds
    }

    /// 429 `rate-limited`: the caller sent more than it may; `Retry-After` says when to go on.
    /// How long a device whose long-poll was shed is asked to wait.
    public static let sheddingRetryAfterSeconds = 10

    /// 503 `overloaded`: the server holds as many long-polls as it may (``ChangeNotifier/capacity``).
    public static func overloaded(held: Int) -> ServiceError {
        ServiceError(
            503, .overloaded,
            "the server holds as many long-polls as it may (\(held)); retry after \(sheddingRetryAfterSeconds) s",
            retryAfterSeconds: sheddingRetryAfterSeconds)
    }

    public static func rateLimited(_ who: String, retryAfter: Duration) -> ServiceError {
        let seconds = max(1, Int((Double(retryAfter.components.seconds) + Double(retryAfter.components.attoseconds) / 1e18).rounded(.up)))
        return ServiceError(
            429, .rateLimited, "\(who) sent more requests than the server allows; retry after \(seconds) s", retryAfterSeconds: seconds)
    }

    /// The answer's body.
    public var body: ErrorBody { ErrorBody(error: code, message: message, details: details) }

    public var description: String { "\(status.code) \(code): \(message)" }

    static func badRequest(_ message: String) -> ServiceError { ServiceError(400, .badRequest, message) }
    static func badParameter(_ message: String) -> ServiceError { ServiceError(400, .badParameter, message) }
    static func unknownApp(_ app: String) -> ServiceError {
        ServiceError(404, .unknownApp, "no metadata is stored for app \"\(app)\"")
    }
    static let deviceDisabled = ServiceError(
        401, .deviceDisabled, "this device is disabled; an admin can enable it again, or re-enroll it with a new enrollment token")
    public static func unknownDevice(_ id: String) -> ServiceError {
        ServiceError(404, .unknownDevice, "no device \"\(id)\" is enrolled")
    }
}
