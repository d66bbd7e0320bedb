/// Why an HTTP request failed, in words a person can act on, with libcurl's own details kept.
///
/// ``description`` is one line: what failed and where, then libcurl's error-buffer text.
/// Switch on ``kind`` to react; new kinds may be added without breaking callers.
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
    /// The category of a failure. Compare with the static members (`error.kind == .timeout`).
    public struct Kind: Sendable, Hashable, CustomStringConvertible {
        private enum Code: String, Sendable, Hashable {
            case invalidRequest, insecureSchemeRefused, unsupportedScheme
            case couldNotResolveHost, couldNotConnect, connectionLost
            case connectTimeout, timeout, lowSpeed
            case untrustedCertificate, hostnameMismatch, pinnedKeyMismatch, tlsHandshakeFailed
            case clientCertificateRequired, clientCertificateUnusable, caFileUnusable
            case responseTooLarge, redirectRefused, tooManyRedirects, protocolError
            case libraryUnusable, clientShutDown, transferFailed
        }
        private let code: Code
        private init(_ code: Code) { self.code = code }

        /// The request itself is malformed (bad URL, a header with a line break, …).
        public static let invalidRequest = Kind(.invalidRequest)
        /// A plain `http` URL while the client does not allow insecure HTTP.
        public static let insecureSchemeRefused = Kind(.insecureSchemeRefused)
        /// A URL scheme other than `https` or `http`.
        public static let unsupportedScheme = Kind(.unsupportedScheme)
        /// The host name did not resolve.
        public static let couldNotResolveHost = Kind(.couldNotResolveHost)
        /// Nothing accepted the TCP connection.
        public static let couldNotConnect = Kind(.couldNotConnect)
        /// The connection broke while sending or receiving.
        public static let connectionLost = Kind(.connectionLost)
        /// Connecting (TCP and TLS handshake) took longer than the connect timeout.
        public static let connectTimeout = Kind(.connectTimeout)
        /// The whole request took longer than its total timeout.
        public static let timeout = Kind(.timeout)
        /// The transfer stayed below the low-speed limit for the limit's duration.
        public static let lowSpeed = Kind(.lowSpeed)
        /// The server's certificate does not chain to a trusted CA.
        public static let untrustedCertificate = Kind(.untrustedCertificate)
        /// The server's certificate does not name the host that was asked for.
        public static let hostnameMismatch = Kind(.hostnameMismatch)
        /// The server's public key matches none of the pinned keys.
        public static let pinnedKeyMismatch = Kind(.pinnedKeyMismatch)
        /// The TLS handshake failed for another reason.
        public static let tlsHandshakeFailed = Kind(.tlsHandshakeFailed)
        /// The server requires a client certificate and none (or an unaccepted one) was presented.
        public static let clientCertificateRequired = Kind(.clientCertificateRequired)
        /// The configured client certificate or key cannot be read or used.
        public static let clientCertificateUnusable = Kind(.clientCertificateUnusable)
        /// The configured CA file cannot be read or holds no certificate.
        public static let caFileUnusable = Kind(.caFileUnusable)
        /// The response body exceeds the size cap.
        public static let responseTooLarge = Kind(.responseTooLarge)
        /// A redirect to another scheme, host or port, which is never followed.
        public static let redirectRefused = Kind(.redirectRefused)
        /// More redirects than allowed.
        public static let tooManyRedirects = Kind(.tooManyRedirects)
        /// The server's reply broke HTTP (bad framing, undecodable content coding, HTTP/2 error).
        public static let protocolError = Kind(.protocolError)
        /// libcurl is missing, too old or failed to initialize.
        public static let libraryUnusable = Kind(.libraryUnusable)
        /// The client was shut down while the request was pending.
        public static let clientShutDown = Kind(.clientShutDown)
        /// Any other transfer failure; ``HTTPClientError/curlCode`` tells which.
        public static let transferFailed = Kind(.transferFailed)

        public var description: String { code.rawValue }
    }

    /// The category of the failure.
    public let kind: Kind
    /// One sentence for a person: what failed, where, and what to do where that is known.
    public let message: String
    /// The URL of the request, when the failure belongs to one.
    public let url: String?
    /// libcurl's `CURLcode` or `CURLMcode`, when libcurl reported the failure.
    public let curlCode: Int?
    /// The libcurl call that failed, for example `curl_multi_info_read` or
    /// `curl_easy_setopt(CURLOPT_CAINFO)`.
    public let call: String?
    /// libcurl's error-buffer text, or `curl_easy_strerror` when the buffer is empty.
    public let curlMessage: String?

    /// Creates an error; the client makes these, tests and callers rarely need to.
    public init(
        kind: Kind, message: String, url: String? = nil,
        curlCode: Int? = nil, call: String? = nil, curlMessage: String? = nil
    ) {
        self.kind = kind
        self.message = message
        self.url = url
        self.curlCode = curlCode
        self.call = call
        self.curlMessage = curlMessage
    }

    public var description: String {
        guard let curlMessage, !curlMessage.isEmpty else { return message }
        var details = "libcurl: \(curlMessage)"
        if let call, let curlCode { details += "; \(call) returned \(curlCode)" }
        return "\(message) (\(details))"
    }

    static func libraryUnusable(_ message: String) -> HTTPClientError {
        HTTPClientError(kind: .libraryUnusable, message: message)
    }

    static func invalidRequest(_ message: String, url: String?) -> HTTPClientError {
        HTTPClientError(kind: .invalidRequest, message: message, url: url)
    }
}
