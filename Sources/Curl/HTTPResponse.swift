extension HTTPClient {
    /// The HTTP version a response arrived with.
    public enum Version: Sendable, Equatable {
        case http1_0, http1_1, http2, http3
        /// A version libcurl reported that this client does not know.
        case other(Int)
    }
}

/// How a transfer went: what the connection cost and how long it took.
public struct TransferMetrics: Sendable, Equatable {
    /// New connections libcurl opened for this request: 0 when a kept-alive connection was reused.
    public var newConnections: Int
    /// Time from start to the last byte.
    public var totalTime: Duration
}

extension HTTPClient {
    /// A complete HTTP response.
    public struct Response: Sendable {
        /// The status code, for example 200 or 304.
        public var status: Int
        /// The response headers of the final response (interim `1xx` responses are dropped).
        public var headers: HTTPClient.Headers
        /// The body, decoded from its `Content-Encoding`.
        public var body: [UInt8]
        /// The HTTP version the response came over.
        public var httpVersion: HTTPClient.Version
        /// The URL that answered, after any same-origin redirects.
        public var url: String
        /// Connection and timing figures.
        public var metrics: TransferMetrics
        /// How many `304 Not Modified` answers the client took itself, by
        /// ``HTTPClient/Request/notModifiedRepeats``, before this answer; 0 without repeats.
        public var notModifiedAnswersBefore: Int = 0

        /// The `ETag` header, quotes and any `W/` prefix included, exactly as sent.
        public var etag: String? { headers["ETag"] }

        /// The delay the server asked for in `Retry-After`, as seconds or an HTTP date,
        /// converted by libcurl to a delay from now; `nil` without the header.
        public var retryAfter: Duration?

        /// The body as UTF-8 text (invalid sequences replaced).
        public var bodyText: String { String(decoding: body, as: UTF8.self) }
    }
}
