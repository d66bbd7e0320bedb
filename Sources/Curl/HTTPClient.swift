/// An async HTTP client on libcurl, shared by fleetset's agent, CLI and tests.
///
/// One dedicated thread drives a `curl_multi` handle for all of the client's requests, so many
/// can be in flight at once (long-polls for several apps plus writes) without ever blocking the
/// Swift concurrency pool, and kept-alive connections (HTTP/2 multiplexed where the server
/// offers it) are reused between requests.
///
/// ```swift
/// try await withHTTPClient(configuration: .init(tls: .init(caFile: "/etc/fleetset/ca.pem"))) { client in
///     var request = HTTPClient.Request(url: "https://fleet.example.com/v1/apps/kiosk/settings")
///     request.setIfNoneMatch("\"41\"")
///     let response = try await client.execute(request)   // 200 with a body, or 304
/// }
/// ```
///
/// Security defaults that no option weakens: certificate and host-name verification are
/// always on; only `https` URLs are accepted unless ``Configuration/allowInsecureHTTP`` is set;
/// redirects are followed only to the same scheme, host and port.
///
/// Cancelling the calling task aborts the transfer within milliseconds and throws
/// `CancellationError`. Every other failure throws ``HTTPClientError``.
public final class HTTPClient: Sendable {
    /// The configuration the client was made with.
    public let configuration: Configuration
    /// The libcurl this client runs on.
    public let library: CurlLibraryInfo
    private let driver: TransferDriver
    private let userAgent: String

    /// Creates a client and starts its transfer thread. Call ``shutdown()`` when done, or use
    /// ``withHTTPClient(configuration:_:)``; a client that is dropped shuts down by itself.
    ///
    /// - Throws: ``HTTPClientError`` of kind `libraryUnusable` when the runtime libcurl is too
    ///   old or lacks TLS, and of kind `invalidRequest` for a malformed pinned key.
    public init(configuration: Configuration = Configuration()) throws(HTTPClientError) {
        library = try CurlLibrary.ensureInitialized()
        for key in configuration.tls.pinnedPublicKeys where !key.hasPrefix("sha256//") {
            throw .invalidRequest("pinned public key \"\(key)\" must have the form sha256//<base64 SHA-256 of the key>", url: nil)
        }
        self.configuration = configuration
        self.userAgent = configuration.userAgent ?? "fleetset libcurl/\(library.version)"
        self.driver = try TransferDriver(safetyNetWait: configuration.safetyNetWait)
    }

    deinit {
        driver.requestShutdown()
    }

    /// The client's transfer thread as a task executor. A task that prefers it
    /// (`Task(executorPreference: client.executor)`) runs on that thread between transfers, so
    /// the answer to its request resumes it there, with no switch to the concurrency pool and
    /// back. For many light tasks that do little but send requests (the fleet simulator's
    /// devices); a task that computes for long would hold up every transfer of the client.
    public var executor: any TaskExecutor { driver }

    /// Fails every request still in flight with `clientShutDown` and stops the transfer thread.
    public func shutdown() async {
        await driver.shutdown()
    }

    /// Sends a request and returns the final response, following same-origin redirects.
    ///
    /// Any status code is a response, not an error: check ``HTTPClient.Response/status``.
    ///
    /// - Throws: `CancellationError` when the task is cancelled; ``HTTPClientError`` for a
    ///   refused URL, a redirect to another origin, and every transport, TLS, timeout or size
    ///   failure.
    public func execute(_ request: HTTPClient.Request) async throws -> HTTPClient.Response {
        var request = request
        var url = try checkedURL(request.url)
        var redirects = 0
        while true {
            let response = try await perform(request, url: url)
            guard configuration.maxRedirects > 0, RedirectRule.isRedirect(response.status),
                let location = response.headers["Location"]
            else { return response }
            let target = try url.resolving(location)
            guard target.isSameOrigin(as: url) else {
                throw HTTPClientError(
                    kind: .redirectRefused,
                    message: "server redirected \(url.text) to \(target.text); redirects to another scheme, host or port are not followed",
                    url: url.text)
            }
            redirects += 1
            guard redirects <= configuration.maxRedirects else {
                throw HTTPClientError(
                    kind: .tooManyRedirects, message: "\(request.url) redirected more than \(configuration.maxRedirects) times",
                    url: request.url)
            }
            request = RedirectRule.follow(request, status: response.status, to: target.text)
            url = target
        }
    }

    /// Parses the URL and enforces the scheme policy before libcurl sees it.
    private func checkedURL(_ text: String) throws(HTTPClientError) -> ParsedURL {
        let url = try ParsedURL(parsing: text)
        guard url.scheme == "https" || configuration.allowInsecureHTTP else {
            throw HTTPClientError(
                kind: .insecureSchemeRefused,
                message:
                    "refusing plain HTTP to \(text): only https is allowed unless allowInsecureHTTP is set (meant for loopback development)",
                url: text)
        }
        return url
    }

    private func perform(_ request: HTTPClient.Request, url: ParsedURL) async throws -> HTTPClient.Response {
        let transfer = try Transfer(request: request, url: url, configuration: configuration, userAgent: userAgent)
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                driver.submit(transfer, continuation: continuation)
            }
        } onCancel: {
            driver.cancel(transfer)
        }
    }
}

/// Runs `body` with a new client and shuts the client down afterwards, also when `body` throws.
public func withHTTPClient<Result>(
    configuration: HTTPClient.Configuration = HTTPClient.Configuration(),
    _ body: (HTTPClient) async throws -> Result
) async throws -> Result {
    let client = try HTTPClient(configuration: configuration)
    do {
        let result = try await body(client)
        await client.shutdown()
        return result
    } catch {
        await client.shutdown()
        throw error
    }
}

/// How a redirect changes the request (RFC 9110 §15.4). Pure, so it is tested on its own.
enum RedirectRule {
    static func isRedirect(_ status: Int) -> Bool {
        [301, 302, 303, 307, 308].contains(status)
    }

    /// The request to send to `target` after a `status` redirect: 303, and 301/302 after a
    /// POST, turn into a GET without body (as every browser does); 307 and 308 keep method and
    /// body. It goes at once and is not repeated (no start delay, no ``HTTPClient/NotModifiedRepeats``).
    static func follow(_ request: HTTPClient.Request, status: Int, to target: String) -> HTTPClient.Request {
        var next = request
        next.url = target
        // The wait before sending happened already, and a plan of repeats is not started over
        // (its bound in time would be): the redirected request goes at once, once.
        next.startDelay = .zero
        next.notModifiedRepeats = nil
        let becomesGet = (status == 303 && request.method != .head) || ((status == 301 || status == 302) && request.method == .post)
        if becomesGet {
            next.method = .get
            next.body = nil
            next.headers["Content-Type"] = nil
        }
        return next
    }
}
