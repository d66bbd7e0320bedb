import FleetJSON

/// A status report carried on the device's next settings request instead of a `POST
/// …/status` of its own: the `Fleetset-Status` request header (``FleetHeader/status``).
///
/// The value is the report's compact JSON (``StatusReport/json``) encoded base64url without
/// padding (``Base64URL``): header values must be ASCII, and a report's message may be any
/// Unicode. It is at most ``maximumLength`` characters; a longer report goes by `POST` as
/// before. A server that records it says so on every settings answer with `Fleetset-Accepts:
/// status` (``FleetHeader/accepts``), and records it exactly as a `POST` before it looks at the
/// long-poll. Servers from before ignore the header, so agents send it only to a server that
/// said it accepts it.
public enum StatusOnPoll {
    /// The longest value, in characters: 4,096 (a report of about 3,000 bytes of JSON). Proxies
    /// commonly refuse a header line over 8 KiB (nginx's `large_client_header_buffers`), and the
    /// request has other headers besides.
    public static let maximumLength = 4096

    /// The token of ``FleetHeader/accepts`` that says the server takes ``FleetHeader/status``.
    public static let acceptsToken = "status"

    /// The header value that carries `report`.
    ///
    /// - Throws: ``StatusOnPollError/Problem/tooLong`` when it would be longer than
    ///   ``maximumLength``: send that report with `POST` instead.
    public static func headerValue(for report: StatusReport) throws(StatusOnPollError) -> String {
        let value = Base64URL.encoded(Array(report.json.serialized().utf8))
        guard value.utf8.count <= maximumLength else { throw .tooLong(value.utf8.count) }
        return value
    }

    /// A report ready to ride on a settings request: the report and its header value, encoded
    /// once, when the agent decides to carry it. Only a report that fits the header makes one;
    /// any other goes by `POST`.
    public struct Carried: Sendable, Hashable {
        /// The report carried.
        public let report: StatusReport
        /// Its ``FleetHeader/status`` value (``StatusOnPoll/headerValue(for:)``).
        public let headerValue: String

        /// The report with its header value; `nil` when it does not fit (send it by `POST`).
        public init?(_ report: StatusReport) {
            guard let value = try? StatusOnPoll.headerValue(for: report) else { return nil }
            self.report = report
            self.headerValue = value
        }
    }

    /// The report a header value carries, read as strictly as the body of `POST …/status`
    /// (unknown members refused, control characters in the message refused).
    ///
    /// - Throws: ``StatusOnPollError`` naming what is wrong: too long, not base64url, not JSON,
    ///   or not a status report (with the member).
    public static func report(fromHeaderValue value: String) throws(StatusOnPollError) -> StatusReport {
        guard value.utf8.count <= maximumLength else { throw .tooLong(value.utf8.count) }
        guard !value.isEmpty else { throw StatusOnPollError(.notBase64URL, "is empty") }
        let bytes: [UInt8]
        do {
            bytes = try Base64URL.decoded(value)
        } catch {
            throw StatusOnPollError(.notBase64URL, "is not base64url: \(error)")
        }
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            throw StatusOnPollError(.notJSON, "does not encode JSON (a status report's compact JSON): \(error)")
        }
        do {
            return try StatusReport(json: json)
        } catch {
            throw StatusOnPollError(.notAReport, "is not a status report: \(error)")
        }
    }

    /// Whether a settings answer's ``FleetHeader/accepts`` value (`nil`: absent) says the server
    /// takes ``FleetHeader/status``: one of its comma-separated tokens is `status`, in any case.
    public static func isAccepted(byAnswerHeader value: String?) -> Bool {
        guard let value else { return false }
        if value == acceptsToken { return true }  // what this release's servers send
        return value.split(separator: ",").contains { $0.trimmingSpaces().lowercased() == acceptsToken }
    }
}

/// Why a `Fleetset-Status` value cannot be read (or made): what a server's 400
/// `bad-status-header` says.
public struct StatusOnPollError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, for code that acts on it.
    public enum Problem: Sendable, Hashable {
        /// Longer than ``StatusOnPoll/maximumLength``.
        case tooLong
        /// Not base64url without padding (or empty).
        case notBase64URL
        /// The bytes are not JSON.
        case notJSON
        /// JSON, but not a status report (the message names the member).
        case notAReport
    }

    public let problem: Problem
    /// What is wrong, without the header's name.
    public let reason: String

    init(_ problem: Problem, _ reason: String) {
        self.problem = problem
        self.reason = reason
    }

    static func tooLong(_ length: Int) -> StatusOnPollError {
        StatusOnPollError(
            .tooLong, "is \(length) characters, more than \(StatusOnPoll.maximumLength); send such a report with POST /v1/apps/{app}/status"
        )
    }

    /// `Fleetset-Status is not base64url: …`: the header's name, then what is wrong.
    public var description: String { "\(FleetHeader.status) \(reason)" }
}
