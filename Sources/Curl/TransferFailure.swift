import CCurl

/// What is known about a request when libcurl reports it failed; enough to say what went wrong
/// in words a person can act on.
struct TransferFailureContext: Sendable {
    var url: ParsedURL
    var limits: TransferLimits
    var tls: HTTPClient.TLSConfiguration
    /// Whether the response collector stopped the body at the size cap.
    var exceededSizeCap: Bool
}

extension HTTPClientError {
    /// Classifies a failed transfer by its `CURLcode` (raw value) and libcurl's error-buffer text.
    ///
    /// A pure function of its inputs, so every branch is tested without a network.
    static func transferFailure(code: UInt32, curlMessage: String, context: TransferFailureContext) -> HTTPClientError {
        let url = context.url
        let (kind, message) = describe(code: code, curlMessage: curlMessage, context: context)
        let detail = curlMessage.isEmpty ? String(cString: curl_easy_strerror(CURLcode(rawValue: code))) : curlMessage
        return HTTPClientError(
            kind: kind, message: message, url: url.text,
            curlCode: Int(code), call: "curl_multi_info_read", curlMessage: detail)
    }

    private static func describe(code: UInt32, curlMessage: String, context: TransferFailureContext) -> (Kind, String) {
        let url = context.url
        let server = url.authority
        let text = curlMessage.lowercased()
        switch CURLcode(rawValue: code) {
        case CURLE_PEER_FAILED_VERIFICATION where text.contains("subject name") || text.contains("does not match"):
            return (.hostnameMismatch, "certificate of \(server) does not name host \(url.host)")
        case CURLE_PEER_FAILED_VERIFICATION:
            let trust = context.tls.caFile.map { "CA file \($0)" } ?? "the system's CA store"
            return (.untrustedCertificate, "certificate of \(server) is not trusted by \(trust)")
        case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
            return (.pinnedKeyMismatch, "public key of \(server) matches none of the \(context.tls.pinnedPublicKeys.count) pinned keys")
        case CURLE_SSL_CERTPROBLEM:
            let files = [context.tls.clientCertificateFile, context.tls.clientKeyFile].compactMap { $0 }.joined(separator: " and ")
            return (.clientCertificateUnusable, "client certificate \(files) cannot be used")
        case CURLE_SSL_CACERT_BADFILE:
            return (.caFileUnusable, "CA file \(context.tls.caFile ?? "(libcurl's default)") cannot be read or holds no certificate")
        // A `where` belongs to one pattern only, hence one per pattern.
        case CURLE_SSL_CONNECT_ERROR where isClientCertificateAlert(text),
            CURLE_RECV_ERROR where isClientCertificateAlert(text),
            CURLE_SEND_ERROR where isClientCertificateAlert(text):
            if let certificate = context.tls.clientCertificateFile {
                return (.clientCertificateRequired, "server \(server) did not accept client certificate \(certificate)")
            }
            return (.clientCertificateRequired, "server \(server) requires a client certificate; configure a client certificate and key")
        case CURLE_SSL_CONNECT_ERROR:
            return (.tlsHandshakeFailed, "TLS handshake with \(server) failed")
        case CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_GOT_NOTHING, CURLE_PARTIAL_FILE:
            return (.connectionLost, "connection to \(server) broke before the response to \(url.text) was complete")
        case CURLE_COULDNT_RESOLVE_HOST:
            return (.couldNotResolveHost, "could not resolve host \(url.host)")
        case CURLE_COULDNT_CONNECT:
            return (.couldNotConnect, "could not connect to \(server)")
        case CURLE_OPERATION_TIMEDOUT where text.hasPrefix("operation too slow"):
            let limit = context.limits.lowSpeedLimit
            return (
                .lowSpeed, "transfer from \(url.text) stayed below \(limit?.bytesPerSecond ?? 0) bytes/s for \(limit?.duration ?? .zero)"
            )
        case CURLE_OPERATION_TIMEDOUT where isConnectPhaseTimeout(text):
            return (.connectTimeout, "connecting to \(server) took longer than the connect timeout of \(context.limits.connectTimeout)")
        case CURLE_OPERATION_TIMEDOUT:
            return (.timeout, "request to \(url.text) took longer than its timeout of \(context.limits.timeout)")
        case CURLE_WRITE_ERROR where context.exceededSizeCap, CURLE_FILESIZE_EXCEEDED:
            return (
                .responseTooLarge, "response from \(url.text) is larger than the limit of \(byteCount(context.limits.maxResponseBytes))"
            )
        case CURLE_BAD_CONTENT_ENCODING:
            return (.protocolError, "response from \(url.text) has a Content-Encoding that cannot be decoded")
        case CURLE_WEIRD_SERVER_REPLY, CURLE_HTTP2, CURLE_HTTP2_STREAM:
            return (.protocolError, "server \(server) sent a malformed HTTP reply")
        case CURLE_UNSUPPORTED_PROTOCOL:
            return (.unsupportedScheme, "libcurl refused the scheme of \(url.text)")
        case CURLE_URL_MALFORMAT:
            return (.invalidRequest, "\"\(url.text)\" is not a valid URL")
        default:
            return (.transferFailed, "request to \(url.text) failed")
        }
    }

    /// libcurl's texts for a timeout before the connection (TCP and TLS) was up.
    private static func isConnectPhaseTimeout(_ text: String) -> Bool {
        text.hasPrefix("connection timed out") || text.hasPrefix("connection timeout")
            || text.hasPrefix("resolving timed out") || text.hasPrefix("ssl connection timeout")
    }

    /// TLS alerts a server sends when it wants a client certificate it did not get or accept.
    private static func isClientCertificateAlert(_ text: String) -> Bool {
        text.contains("certificate required") || text.contains("alert bad certificate")
            || text.contains("alert unknown ca") || text.contains("alert certificate unknown")
    }

    /// `16 MiB`, `512 KiB` or `1000 bytes`.
    static func byteCount(_ bytes: Int) -> String {
        if bytes >= 1 << 20, bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
        if bytes >= 1 << 10, bytes % (1 << 10) == 0 { return "\(bytes >> 10) KiB" }
        return "\(bytes) bytes"
    }
}
