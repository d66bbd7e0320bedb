extension HTTPClient {
    /// An HTTP request method.
    public struct Method: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        public static let get = HTTPClient.Method(rawValue: "GET")
        public static let head = HTTPClient.Method(rawValue: "HEAD")
        public static let post = HTTPClient.Method(rawValue: "POST")
        public static let put = HTTPClient.Method(rawValue: "PUT")
        public static let patch = HTTPClient.Method(rawValue: "PATCH")
        public static let delete = HTTPClient.Method(rawValue: "DELETE")

        public var description: String { rawValue }
    }
}

/// Time and size limits for one transfer.
///
/// The client's ``HTTPClient/Configuration/limits`` apply to every request that does not set
/// its own ``HTTPClient.Request/limits``. A long-poll sets a total timeout above its wait and turns the
/// low-speed limit off, since a held request legitimately transfers nothing.
public struct TransferLimits: Sendable, Equatable {
    /// The most time for connecting, TLS handshake included. Default: 10 s.
    public var connectTimeout: Duration
    /// The most time for the whole request, connecting included. Default: 60 s.
    public var timeout: Duration
    /// Abort when fewer than `bytesPerSecond` arrive on average over `duration`.
    /// Default: 1 byte/s over 30 s; `nil` turns the check off.
    public var lowSpeedLimit: LowSpeedLimit?
    /// The largest response body accepted, counted after decoding as bytes arrive.
    /// Default: 16 MiB.
    public var maxResponseBytes: Int

    /// A low-speed limit: abort a transfer slower than `bytesPerSecond` for `duration`.
    public struct LowSpeedLimit: Sendable, Equatable {
        public var bytesPerSecond: Int
        public var duration: Duration
        public init(bytesPerSecond: Int, duration: Duration) {
            self.bytesPerSecond = bytesPerSecond
            self.duration = duration
        }
    }

    public init(
        connectTimeout: Duration = .seconds(10),
        timeout: Duration = .seconds(60),
        lowSpeedLimit: LowSpeedLimit? = LowSpeedLimit(bytesPerSecond: 1, duration: .seconds(30)),
        maxResponseBytes: Int = 16 << 20
    ) {
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.lowSpeedLimit = lowSpeedLimit
        self.maxResponseBytes = maxResponseBytes
    }
}

extension HTTPClient {
    /// One HTTP request: method, URL, headers and an optional body.
    public struct Request: Sendable, Equatable {
        /// The method; `GET` by default.
        public var method: HTTPClient.Method
        /// The absolute URL, `https://…` (or `http://…` where the client allows it).
        public var url: String
        /// Request headers. `Content-Type` defaults to `application/octet-stream` when a body is set.
        public var headers: HTTPClient.Headers
        /// The body, sent with `Content-Length`; `nil` sends none.
        public var body: [UInt8]?
        /// Limits for this request; `nil` uses the client's.
        public var limits: TransferLimits?
        /// How long the client waits before it sends the request, counted from ``HTTPClient/execute(_:)``.
        /// The wait happens on the client's own thread (the timeout of its wait for sockets), so a
        /// request on a timer wakes nobody before it goes; cancelling the task ends the wait.
        public var startDelay: Duration
        /// Sends the request again by itself, on the client's own thread, while the server
        /// answers `304 Not Modified`; `nil` (the default) sends it once. See ``NotModifiedRepeats``.
        public var notModifiedRepeats: NotModifiedRepeats?
        /// The IP address to connect to instead of looking the URL's host up
        /// (`CURLOPT_CONNECT_TO`): the URL's host still names the server in TLS (SNI, the
        /// certificate's name) and in `Host`. For a caller that checked the address itself,
        /// so that no second lookup may answer differently (DNS rebinding). `nil`: look it up.
        public var connectAddress: String?

        public init(
            method: HTTPClient.Method = .get, url: String, headers: HTTPClient.Headers = [:],
            body: [UInt8]? = nil, limits: TransferLimits? = nil, startDelay: Duration = .zero,
            notModifiedRepeats: NotModifiedRepeats? = nil, connectAddress: String? = nil
        ) {
            self.connectAddress = connectAddress
            self.method = method
            self.url = url
            self.headers = headers
            self.body = body
            self.limits = limits
            self.startDelay = startDelay
            self.notModifiedRepeats = notModifiedRepeats
        }

        /// Makes the request conditional on the resource having changed: `If-None-Match: etag`.
        /// The server answers `304 Not Modified` when it has not.
        public mutating func setIfNoneMatch(_ etag: String) { headers["If-None-Match"] = etag }

        /// Makes the request conditional on the resource being unchanged: `If-Match: etag`.
        /// The server answers `412` (or fleetset's `409`) when it has changed.
        public mutating func setIfMatch(_ etag: String) { headers["If-Match"] = etag }
    }
}

extension HTTPClient {
    /// A plan for polling a conditional request: the client sends it again after each of
    /// ``delays`` in turn while the answers are `304 Not Modified`, and returns the first answer
    /// that is anything else (or a failure, or the `304` that ends the plan).
    ///
    /// The repeats happen on the client's transfer thread, like a ``HTTPClient/Request/startDelay``:
    /// a caller polling on a timer is woken by a change, not by every unchanged answer. That is
    /// what brings an agent's cost of a `304` near libcurl's own. Cancelling the caller's task
    /// ends the plan at once. ``HTTPClient/Response/notModifiedAnswersBefore`` tells how many
    /// `304` answers the client took itself.
    public struct NotModifiedRepeats: Sendable, Equatable {
        /// The waits before the repeats, each counted from the end of the answer before it.
        public var delays: [Duration]
        /// Header names that make a `304` carrying one of them go to the caller at once: what a
        /// server asks of the caller beside "nothing changed" must not wait for the plan's end.
        public var unlessHeaders: [String]
        /// No repeat starts later than this after the first request went out: the answer that
        /// would have been repeated is returned instead. It bounds the plan in time when the
        /// server is slow to answer; `nil`: no bound but the delays.
        public var within: Duration?

        public init(delays: [Duration], unlessHeaders: [String] = [], within: Duration? = nil) {
            self.delays = delays
            self.unlessHeaders = unlessHeaders
            self.within = within
        }
    }
}
