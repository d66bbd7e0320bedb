import Testing

@testable import Curl

@Suite("Failed transfers are described in words a person can act on")
struct ErrorClassificationTests {
    private func context(caFile: String? = "/etc/fleetset/ca.pem", exceeded: Bool = false) throws -> TransferFailureContext {
        TransferFailureContext(
            url: try ParsedURL(parsing: "https://fleet.example.com:8443/v1/apps/kiosk/settings"),
            limits: TransferLimits(connectTimeout: .seconds(5), timeout: .seconds(30), maxResponseBytes: 1 << 20),
            tls: .init(caFile: caFile, clientCertificateFile: "/var/lib/fleetset/client.pem"),
            exceededSizeCap: exceeded)
    }

    // Codes are libcurl's stable CURLcode numbers; messages are libcurl's error-buffer texts.
    @Test(arguments: [
        (
            60, "SSL certificate problem: unable to get local issuer certificate", HTTPClientError.Kind.untrustedCertificate,
            "certificate of fleet.example.com:8443 is not trusted by CA file /etc/fleetset/ca.pem"
        ),
        (
            60, "SSL: no alternative certificate subject name matches target host name 'fleet.example.com'", .hostnameMismatch,
            "certificate of fleet.example.com:8443 does not name host fleet.example.com"
        ),
        (
            90, "SSL: public key does not match pinned public key", .pinnedKeyMismatch,
            "public key of fleet.example.com:8443 matches none of the 0 pinned keys"
        ),
        (
            56, "OpenSSL SSL_read: error:0A00045C:SSL routines::tlsv13 alert certificate required, errno 0", .clientCertificateRequired,
            "server fleet.example.com:8443 did not accept client certificate /var/lib/fleetset/client.pem"
        ),
        (
            35, "OpenSSL SSL_connect: SSL_ERROR_SYSCALL in connection to fleet.example.com:8443", .tlsHandshakeFailed,
            "TLS handshake with fleet.example.com:8443 failed"
        ),
        (
            7, "Failed to connect to fleet.example.com port 8443 after 0 ms: Couldn't connect to server", .couldNotConnect,
            "could not connect to fleet.example.com:8443"
        ),
        (6, "Could not resolve host: fleet.example.com", .couldNotResolveHost, "could not resolve host fleet.example.com"),
        (
            28, "Connection timed out after 5001 milliseconds", .connectTimeout,
            "connecting to fleet.example.com:8443 took longer than the connect timeout of 5.0 seconds"
        ),
        (
            28, "Operation timed out after 30000 milliseconds with 0 bytes received", .timeout,
            "request to https://fleet.example.com:8443/v1/apps/kiosk/settings took longer than its timeout of 30.0 seconds"
        ),
        (
            28, "Operation too slow. Less than 1 bytes/sec transferred the last 30 seconds", .lowSpeed,
            "transfer from https://fleet.example.com:8443/v1/apps/kiosk/settings stayed below 1 bytes/s for 30.0 seconds"
        ),
        (
            63, "Maximum file size exceeded", .responseTooLarge,
            "response from https://fleet.example.com:8443/v1/apps/kiosk/settings is larger than the limit of 1 MiB"
        ),
        (
            61, "Error while processing content unencoding: invalid stored block lengths", .protocolError,
            "response from https://fleet.example.com:8443/v1/apps/kiosk/settings has a Content-Encoding that cannot be decoded"
        ),
        (
            52, "Empty reply from server", .connectionLost,
            "connection to fleet.example.com:8443 broke before the response to https://fleet.example.com:8443/v1/apps/kiosk/settings was complete"
        ),
        (
            77, "error setting certificate file: /etc/fleetset/ca.pem", .caFileUnusable,
            "CA file /etc/fleetset/ca.pem cannot be read or holds no certificate"
        ),
    ])
    func classify(code: UInt32, curlText: String, kind: HTTPClientError.Kind, message: String) throws {
        let error = HTTPClientError.transferFailure(code: code, curlMessage: curlText, context: try context())
        #expect(error.kind == kind)
        #expect(error.message == message)
        #expect(error.curlCode == Int(code))
        #expect(error.curlMessage == curlText)
        #expect(error.description == "\(message) (libcurl: \(curlText); curl_multi_info_read returned \(code))")
        #expect(error.url == "https://fleet.example.com:8443/v1/apps/kiosk/settings")
    }

    @Test("without a CA file the system store is named")
    func systemStore() throws {
        let error = HTTPClientError.transferFailure(code: 60, curlMessage: "SSL certificate problem", context: try context(caFile: nil))
        #expect(error.message == "certificate of fleet.example.com:8443 is not trusted by the system's CA store")
    }

    @Test("a write error is a size-cap failure only when the collector hit the cap")
    func writeError() throws {
        #expect(HTTPClientError.transferFailure(code: 23, curlMessage: "", context: try context(exceeded: true)).kind == .responseTooLarge)
        let other = HTTPClientError.transferFailure(code: 23, curlMessage: "", context: try context(exceeded: false))
        #expect(other.kind == .transferFailed)
        #expect(other.curlMessage == "Failed writing received data to disk/application")
    }

    @Test("byte counts read naturally", arguments: [(16 << 20, "16 MiB"), (4096, "4 KiB"), (1000, "1000 bytes"), (1500, "1500 bytes")])
    func byteCounts(bytes: Int, text: String) {
        #expect(HTTPClientError.byteCount(bytes) == text)
    }
}
