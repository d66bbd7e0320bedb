import FleetProtocol

/// A failed request as the agent's loop sees it: classified once, here, and carried as a value.
///
/// The rules:
/// - fleetset's server explains every refusal with its JSON error body. A 4xx *without* that
///   body comes from something between agent and server (a proxy's HTML 403, 404 or 413, a
///   captive portal) and is transient: it never ends a queued change or drops a report.
/// - 429 is throttling whoever sent it; `Retry-After` is honoured on every failure.
/// - 5xx, 408, network failures and answers that do not match protocol v1 are transient.
/// - With fleetset's body: 401 is an authentication failure, 409 a conflict (the change was
///   based on an old revision), any other 4xx final (the request itself is wrong; sending it
///   again cannot help).
public struct SyncFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// What the failure means for the request that met it.
    public enum Kind: Sendable, Equatable {
        /// Retrying cannot help: the change ends, the report is dropped.
        case final
        /// Retry after backoff.
        case transient
        /// The server refused the device's token.
        case authentication
        /// The change was based on a revision the server has moved past.
        case conflict
        /// Too many requests: wait (at least `retryAfter`, when given) before the next.
        case throttled
    }

    public var kind: Kind
    /// fleetset's error code (`stale-revision`, `bad-parameter`, …), when the server sent its body.
    public var code: ErrorCode?
    /// The delay the answer asked for with `Retry-After`.
    public var retryAfter: Duration?
    /// One line for logs and `status.json`.
    public var summary: String

    public init(kind: Kind, code: ErrorCode? = nil, retryAfter: Duration? = nil, summary: String) {
        self.kind = kind
        self.code = code
        self.retryAfter = retryAfter
        self.summary = summary
    }

    /// A refusal with HTTP `status`; `code` is fleetset's error code, `nil` when the answer
    /// carried no fleetset error body.
    public static func refusal(status: Int, code: ErrorCode?, retryAfter: Duration?, summary: String) -> SyncFailure {
        SyncFailure(kind: kind(status: status, fleetsetCode: code), code: code, retryAfter: retryAfter, summary: summary)
    }

    /// A failure before any answer (connection, TLS, timeout) or an answer outside protocol v1.
    public static func transient(_ summary: String) -> SyncFailure { SyncFailure(kind: .transient, summary: summary) }

    /// The classification of an HTTP refusal.
    public static func kind(status: Int, fleetsetCode: ErrorCode?) -> Kind {
        if status == 429 { return .throttled }
        guard (400..<500).contains(status), fleetsetCode != nil else { return .transient }
        switch status {
        case 401: return .authentication
        case 408: return .transient
        case 409: return .conflict
        default: return .final
        }
    }

    /// The server refuses the long-poll's `wait` parameter: poll on the timer instead.
    public var refusesLongPoll: Bool { kind == .final && code == .badParameter }

    public var description: String { summary }
}
