import Curl
import Testing

@Suite("TLS: trust, host names, pinning, client certificates, plain HTTP")
struct TLSTests {
    @Test("a server whose CA is not the configured one is refused, and the error names both")
    func wrongCARefused() async throws {
        let servers = try await TestServers.shared
        try await withTestClient({ $0.tls.caFile = servers.pki.otherCAFile }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            }
            #expect(error?.kind == .untrustedCertificate)
            #expect(error?.message == "certificate of 127.0.0.1:\(servers.https) is not trusted by CA file \(servers.pki.otherCAFile)")
            #expect(error?.curlCode == 60)
            #expect(error?.curlMessage?.isEmpty == false)
        }
    }

    @Test("a certificate that does not name the host is refused")
    func hostnameMismatch() async throws {
        try await withTestClient { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "https://localhost:\(servers.https)/etag"))
            }
            #expect(error?.kind == .hostnameMismatch)
            #expect(error?.message == "certificate of localhost:\(servers.https) does not name host localhost")
        }
    }

    @Test("the pinned public key is accepted; any other pin refuses the server")
    func publicKeyPinning() async throws {
        let servers = try await TestServers.shared
        try await withTestClient({ $0.tls.pinnedPublicKeys = [servers.pki.serverKeyPin] }) { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            #expect(response.status == 200)
        }
        let otherPin = "sha256//AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="
        try await withTestClient({ $0.tls.pinnedPublicKeys = [otherPin] }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            }
            #expect(error?.kind == .pinnedKeyMismatch)
        }
    }

    @Test("a pin that is not sha256//… is refused when the client is made")
    func malformedPin() async throws {
        let error = #expect(throws: HTTPClientError.self) {
            _ = try HTTPClient(configuration: .init(tls: .init(pinnedPublicKeys: ["md5//abc"])))
        }
        #expect(error?.kind == .invalidRequest)
    }

    @Test("a server that requires a client certificate refuses a client without one")
    func clientCertificateRequired() async throws {
        try await withTestClient { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.mutualTLSBase)/etag"))
            }
            #expect(error?.kind == .clientCertificateRequired)
            #expect(error?.message.contains("requires a client certificate") == true)
        }
    }

    @Test("the configured client certificate is presented and accepted")
    func clientCertificatePresented() async throws {
        let servers = try await TestServers.shared
        try await withTestClient({
            $0.tls.clientCertificateFile = servers.pki.clientCertificateFile
            $0.tls.clientKeyFile = servers.pki.clientKeyFile
        }) { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.mutualTLSBase)/etag"))
            #expect(response.status == 200)
            #expect(response.etag == "\"v1\"")
        }
    }

    @Test("a client certificate file that does not exist is reported as unusable")
    func missingClientCertificate() async throws {
        try await withTestClient({
            $0.tls.clientCertificateFile = "/nonexistent/client.pem"
            $0.tls.clientKeyFile = "/nonexistent/client.key"
        }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.mutualTLSBase)/etag"))
            }
            #expect(error?.kind == .clientCertificateUnusable)
            #expect(error?.message.contains("/nonexistent/client.pem") == true)
        }
    }

    @Test("a CA file that does not exist is reported as unusable")
    func missingCAFile() async throws {
        try await withTestClient({ $0.tls.caFile = "/nonexistent/ca.pem" }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            }
            #expect(error?.kind == .caFileUnusable)
            #expect(error?.message.contains("/nonexistent/ca.pem") == true)
        }
    }

    @Test("plain http is refused unless the client allows it")
    func plainHTTPRefusedUnlessAllowed() async throws {
        try await withTestClient { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.plainHTTPBase)/etag"))
            }
            #expect(error?.kind == .insecureSchemeRefused)
            #expect(error?.message.contains("allowInsecureHTTP") == true)
        }
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.plainHTTPBase)/etag"))
            #expect(response.status == 200)
        }
    }

    @Test("schemes other than https and http are refused", arguments: ["ftp://127.0.0.1/x", "file:///etc/passwd", "gopher://127.0.0.1/"])
    func otherSchemesRefused(url: String) async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, _ in
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClient.Request(url: url)) }
            #expect(error?.kind == .unsupportedScheme)
        }
    }
}
