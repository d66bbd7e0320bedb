import CCurl
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One request inside libcurl: the configured easy handle, what the response collector gathers,
/// and the continuation of the task that waits for it.
///
/// Ownership: the submitting task creates and configures it, then hands it to the
/// ``TransferDriver``; from then on only the driver thread touches it, except ``isCancelled``,
/// which is atomic. That is what makes the `@unchecked Sendable` sound.
final class Transfer: @unchecked Sendable {
    let easy: EasyHandle
    let url: ParsedURL
    let limits: TransferLimits
    let tls: HTTPClient.TLSConfiguration
    private let collector: ResponseCollector
    private let cancellation = Atomic<Bool>(false)
    /// Set by the driver when it accepts the transfer; resumed exactly once by ``complete(_:)``.
    var continuation: CheckedContinuation<HTTPClient.Response, any Error>?
    /// When the driver may hand the transfer to libcurl (``MonotonicTime``); `nil`: at once.
    /// From the request's start delay, then from each repeat's.
    var startAt: UInt64?
    /// The waits before the repeats still to come while the answers are `304`
    /// (``HTTPClient/NotModifiedRepeats``); only the driver thread changes it.
    private var repeatDelays: ArraySlice<Duration>
    private let repeatStopHeaders: [String]
    private let repeatWithin: Duration?
    /// When the first request went out (``MonotonicTime``); set by the driver.
    var firstSentAt: UInt64?
    /// The `304` answers taken without the caller so far.
    private var notModifiedAnswers = 0

    /// Configures a libcurl easy handle for `request`. Nothing blocks here.
    init(request: HTTPClient.Request, url: ParsedURL, configuration: HTTPClient.Configuration, userAgent: String) throws(HTTPClientError) {
        self.url = url
        self.limits = request.limits ?? configuration.limits
        self.tls = configuration.tls
        self.collector = ResponseCollector(maxBodyBytes: limits.maxResponseBytes)
        self.repeatDelays = request.notModifiedRepeats?.delays[...] ?? []
        self.repeatStopHeaders = request.notModifiedRepeats?.unlessHeaders ?? []
        self.repeatWithin = request.notModifiedRepeats?.within
        if request.startDelay > .zero { startAt = MonotonicTime.now() &+ UInt64(clamping: request.startDelay.nanoseconds) }
        self.easy = try EasyHandle()

        try easy.set(CURLOPT_NOSIGNAL, true)  // timeouts must not use signals in a threaded process
        try easy.set(CURLOPT_URL, url.text)
        try easy.set(CURLOPT_PROTOCOLS_STR, configuration.allowInsecureHTTP ? "https,http" : "https")
        try easy.set(CURLOPT_FOLLOWLOCATION, false)  // HTTPClient follows same-origin redirects itself
        try configureMethodAndBody(request)
        try easy.setHeaderLines(Self.headerLines(for: request, userAgent: userAgent))
        try easy.set(CURLOPT_ACCEPT_ENCODING, "")  // every coding this libcurl decodes
        try easy.set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        // Over TLS, wait to multiplex on an HTTP/2 connection being set up (ALPN tells at the
        // handshake). Never over plain HTTP (HTTP/1.1 only here): libcurl would learn that a
        // connection cannot multiplex only from a response on it, so every request would wait
        // for the answer of a long-poll held on a new connection.
        try easy.set(CURLOPT_PIPEWAIT, url.scheme == "https")
        try configureTLS()
        try configureLimits()
        if let address = request.connectAddress {
            // Any host and port of this transfer (empty fields) go to the address, on the URL's port.
            try easy.set(CURLOPT_CONNECT_TO, lines: ["::" + (address.contains(":") ? "[\(address)]" : address) + ":"])
        }
        if let sourceAddress = configuration.sourceAddress { try easy.set(CURLOPT_INTERFACE, "host!" + sourceAddress) }
        try easy.set(CURLOPT_TCP_KEEPALIVE, true)  // keep NAT state of long-polls alive
        try easy.set(CURLOPT_TCP_KEEPIDLE, 60)
        try easy.set(CURLOPT_TCP_KEEPINTVL, 30)

        let context = UnsafeMutableRawPointer(Unmanaged.passUnretained(collector).toOpaque())
        try easy.set(CURLOPT_WRITEFUNCTION, callback: receiveBodyCallback)
        try easy.set(CURLOPT_WRITEDATA, pointer: context)
        try easy.set(CURLOPT_HEADERFUNCTION, callback: receiveHeaderCallback)
        try easy.set(CURLOPT_HEADERDATA, pointer: context)
    }

    /// Whether the waiting task was cancelled. Safe from any thread.
    var isCancelled: Bool { cancellation.load(ordering: .acquiring) }

    /// Marks the transfer cancelled. Safe from any thread.
    func markCancelled() { cancellation.store(true, ordering: .releasing) }

    /// Resumes the waiting task. The driver calls this exactly once per accepted transfer.
    func complete(_ result: Result<HTTPClient.Response, any Error>) {
        guard let continuation else { preconditionFailure("a transfer completed twice") }
        self.continuation = nil
        continuation.resume(with: result)
    }

    /// When a finished transfer is to be sent again rather than answered: after a `304` without
    /// any of the stop headers, while repeats are left. Returns the wait before it goes, and
    /// readies the transfer for it; `nil`: answer the caller now.
    func takeRepeat(after code: CURLcode, now: UInt64) -> Duration? {
        guard code == CURLE_OK, let delay = repeatDelays.first, easy.info(long: CURLINFO_RESPONSE_CODE) == 304,
            !repeatStopHeaders.contains(where: { collector.headers[$0] != nil })
        else { return nil }
        if let within = repeatWithin, let first = firstSentAt,
            now &+ UInt64(clamping: delay.nanoseconds) > first &+ UInt64(clamping: within.nanoseconds)
        {
            return nil
        }
        repeatDelays.removeFirst()
        notModifiedAnswers += 1
        collector.reset()
        return delay
    }

    /// The response, or the classified failure, once libcurl reports the transfer done.
    func outcome(_ code: CURLcode) -> Result<HTTPClient.Response, any Error> {
        guard code == CURLE_OK else {
            let context = TransferFailureContext(url: url, limits: limits, tls: tls, exceededSizeCap: collector.exceededCap)
            return .failure(HTTPClientError.transferFailure(code: code.rawValue, curlMessage: easy.errorText, context: context))
        }
        let retryAfter = easy.info(offset: CURLINFO_RETRY_AFTER)
        return .success(
            HTTPClient.Response(
                status: easy.info(long: CURLINFO_RESPONSE_CODE),
                headers: collector.headers,
                body: collector.body,
                httpVersion: Self.httpVersion(easy.info(long: CURLINFO_HTTP_VERSION)),
                url: url.text,
                metrics: TransferMetrics(
                    newConnections: easy.info(long: CURLINFO_NUM_CONNECTS),
                    totalTime: .microseconds(easy.info(offset: CURLINFO_TOTAL_TIME_T))),
                notModifiedAnswersBefore: notModifiedAnswers,
                retryAfter: retryAfter > 0 ? .seconds(retryAfter) : nil))
    }

    // MARK: Configuration

    private func configureMethodAndBody(_ request: HTTPClient.Request) throws(HTTPClientError) {
        switch request.method {
        case .get where request.body == nil:
            try easy.set(CURLOPT_HTTPGET, true)
        case .head:
            try easy.set(CURLOPT_NOBODY, true)
        default:
            try easy.set(CURLOPT_CUSTOMREQUEST, request.method.rawValue)
            if let body = request.body {
                try easy.setBody(body)
            } else if [.post, .put, .patch].contains(request.method) {
                try easy.setBody([])  // sends Content-Length: 0, as servers expect
            }
        }
    }

    private func configureTLS() throws(HTTPClientError) {
        // Verification is always on, whatever libcurl's build defaults are.
        try easy.set(CURLOPT_SSL_VERIFYPEER, true)
        try easy.set(CURLOPT_SSL_VERIFYHOST, 2)
        try easy.set(CURLOPT_SSLVERSION, Int(CURL_SSLVERSION_TLSv1_2))
        if let caFile = tls.caFile { try easy.set(CURLOPT_CAINFO, caFile) }
        if let certificate = tls.clientCertificateFile { try easy.set(CURLOPT_SSLCERT, certificate) }
        if let key = tls.clientKeyFile { try easy.set(CURLOPT_SSLKEY, key) }
        if !tls.pinnedPublicKeys.isEmpty {
            try easy.set(CURLOPT_PINNEDPUBLICKEY, tls.pinnedPublicKeys.joined(separator: ";"))
        }
    }

    private func configureLimits() throws(HTTPClientError) {
        try easy.set(CURLOPT_CONNECTTIMEOUT_MS, limits.connectTimeout.wholeMilliseconds)
        try easy.set(CURLOPT_TIMEOUT_MS, limits.timeout.wholeMilliseconds)
        if let lowSpeed = limits.lowSpeedLimit {
            try easy.set(CURLOPT_LOW_SPEED_LIMIT, lowSpeed.bytesPerSecond)
            try easy.set(CURLOPT_LOW_SPEED_TIME, max(1, Int(lowSpeed.duration.components.seconds)))
        }
        // Refuse early when Content-Length already announces too much; the collector counts
        // the decoded bytes as they arrive for everything else.
        try easy.set(CURLOPT_MAXFILESIZE_LARGE, offset: Int64(limits.maxResponseBytes))
    }

    /// The header lines handed to libcurl: the request's own, plus defaults.
    static func headerLines(for request: HTTPClient.Request, userAgent: String) throws(HTTPClientError) -> [String] {
        var headers = request.headers
        if request.body != nil, headers["Content-Type"] == nil {
            headers["Content-Type"] = "application/octet-stream"
        }
        if headers["User-Agent"] == nil { headers["User-Agent"] = userAgent }
        var lines: [String] = []
        for field in headers {
            guard Self.isValidHeader(name: field.name, value: field.value) else {
                throw .invalidRequest("header \"\(field.name)\" has an invalid name or a line break in its value", url: request.url)
            }
            // libcurl sends "Name;" as a header with an empty value ("Name:" would remove it).
            lines.append(field.value.isEmpty ? "\(field.name);" : "\(field.name): \(field.value)")
        }
        lines.append("Expect:")  // no 100-continue round trip before a body
        return lines
    }

    /// RFC 9110 delimiters, which a header name (a token) must not contain.
    private static let delimiters = Set("(),/:;<=>?@[\\]{}\"".utf8)

    /// Checked on UTF-8 bytes: a name is visible ASCII without delimiters (any byte of a
    /// non-ASCII character is 128 or more), and CR, LF and NUL appear in UTF-8 only as themselves.
    private static func isValidHeader(name: String, value: String) -> Bool {
        let nameIsToken = !name.isEmpty && name.utf8.allSatisfy { $0 > 32 && $0 < 127 && !delimiters.contains($0) }
        let valueIsOneLine = !value.utf8.contains { $0 == UInt8(ascii: "\r") || $0 == UInt8(ascii: "\n") || $0 == 0 }
        return nameIsToken && valueIsOneLine
    }

    private static func httpVersion(_ value: Int) -> HTTPClient.Version {
        switch value {
        case CURL_HTTP_VERSION_1_0: .http1_0
        case CURL_HTTP_VERSION_1_1: .http1_1
        case CURL_HTTP_VERSION_2_0: .http2
        case CURL_HTTP_VERSION_3: .http3
        default: .other(value)
        }
    }
}

// libcurl's callbacks are C functions; their context is the transfer's ResponseCollector.

private let receiveBodyCallback: curl_write_callback = { data, size, count, context in
    guard let context else { return 0 }
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
    return collector.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

private let receiveHeaderCallback: curl_write_callback = { data, size, count, context in
    guard let context else { return 0 }
    let collector = Unmanaged<ResponseCollector>.fromOpaque(context).takeUnretainedValue()
    collector.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

extension Duration {
    /// The duration in whole milliseconds, rounded up so a positive duration never becomes 0
    /// (which libcurl reads as "no timeout").
    var wholeMilliseconds: Int {
        let (seconds, attoseconds) = components
        let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
        return Int(max(1, milliseconds))
    }
}

extension Duration {
    /// The duration in whole nanoseconds (negative durations become 0).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        return seconds.multipliedReportingOverflow(by: 1_000_000_000).overflow
            ? .max : seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: when deferred transfers may start.
enum MonotonicTime {
    static func now() -> UInt64 {
        var spec = timespec()
        clock_gettime(CLOCK_MONOTONIC, &spec)
        return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
    }
}
