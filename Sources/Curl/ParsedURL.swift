import CCurl

/// A URL as libcurl's own parser (`CURLU`) reads it, so that what the client checks — scheme,
/// host, port — is exactly what libcurl will connect to.
struct ParsedURL: Sendable, Equatable {
    /// The normalized URL text that is handed to libcurl.
    let text: String
    /// The lower-case scheme: `https` or `http`, the only ones a ParsedURL can have.
    let scheme: String
    /// The host as written in the URL (IPv6 addresses keep their brackets).
    let host: String
    /// The port, explicit or the scheme's default.
    let port: Int

    /// `host:port`, as error messages name a server.
    var authority: String { "\(host):\(port)" }

    /// Whether two URLs share scheme, host and port: the only redirects the client follows.
    func isSameOrigin(as other: ParsedURL) -> Bool {
        scheme == other.scheme && host.lowercased() == other.host.lowercased() && port == other.port
    }

    private init(text: String, scheme: String, host: String, port: Int) {
        self.text = text
        self.scheme = scheme
        self.host = host
        self.port = port
    }

    /// Parses an absolute `https` or `http` URL.
    ///
    /// - Throws: ``HTTPClientError`` of kind `unsupportedScheme` for any other scheme, and of kind
    ///   `invalidRequest` naming the URL and libcurl's reason for a malformed one.
    init(parsing text: String) throws(HTTPClientError) {
        self = try Self.withHandle(text) { handle throws(HTTPClientError) in
            try Self.set(handle, text, original: text)
            return try Self.read(handle, original: text)
        }
    }

    /// Resolves `reference` (absolute, or relative like a `Location` header) against this URL.
    func resolving(_ reference: String) throws(HTTPClientError) -> ParsedURL {
        try Self.withHandle(reference) { handle throws(HTTPClientError) in
            try Self.set(handle, text, original: text)
            try Self.set(handle, reference, original: reference)
            return try Self.read(handle, original: reference)
        }
    }

    private static func withHandle(
        _ original: String, _ body: (OpaquePointer) throws(HTTPClientError) -> ParsedURL
    ) throws(HTTPClientError) -> ParsedURL {
        guard let handle = curl_url() else {
            throw .invalidRequest("out of memory while parsing URL \(original)", url: original)
        }
        defer { curl_url_cleanup(handle) }
        return try body(handle)
    }

    private static func set(_ handle: OpaquePointer, _ text: String, original: String) throws(HTTPClientError) {
        let code = curl_url_set(handle, CURLUPART_URL, text, 0)
        guard code == CURLUE_OK else {
            throw HTTPClientError(
                kind: .invalidRequest, message: "\"\(original)\" is not a valid URL", url: original,
                curlCode: Int(code.rawValue), call: "curl_url_set(CURLUPART_URL)",
                curlMessage: String(cString: curl_url_strerror(code)))
        }
    }

    private static func read(_ handle: OpaquePointer, original: String) throws(HTTPClientError) -> ParsedURL {
        func part(_ which: CURLUPart, flags: Int32 = 0) throws(HTTPClientError) -> String {
            var value: UnsafeMutablePointer<CChar>?
            let code = curl_url_get(handle, which, &value, UInt32(flags))
            guard code == CURLUE_OK, let value else {
                throw HTTPClientError(
                    kind: .invalidRequest, message: "\"\(original)\" lacks a part every request needs",
                    url: original, curlCode: Int(code.rawValue), call: "curl_url_get",
                    curlMessage: String(cString: curl_url_strerror(code)))
            }
            defer { curl_free(value) }
            return String(cString: value)
        }
        let scheme = try part(CURLUPART_SCHEME).lowercased()
        guard scheme == "https" || scheme == "http" else {
            throw HTTPClientError(
                kind: .unsupportedScheme, message: "\(original) has scheme \"\(scheme)\"; fleetset speaks only https", url: original)
        }
        let portText = try part(CURLUPART_PORT, flags: CURLU_DEFAULT_PORT)
        guard let port = Int(portText) else {
            throw .invalidRequest("\"\(original)\" has an invalid port \(portText)", url: original)
        }
        return ParsedURL(
            text: try part(CURLUPART_URL), scheme: scheme,
            host: try part(CURLUPART_HOST), port: port)
    }
}
