import Curl
import Testing

@Suite("Requests, conditional requests and response metadata")
struct ConditionalRequestTests {
    @Test("200 carries the ETag; If-None-Match with it gets 304 and no body")
    func etagThen304() async throws {
        try await withTestClient { client, servers in
            let first = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            #expect(first.status == 200)
            #expect(first.etag == "\"v1\"")
            #expect(first.bodyText == "{\"revision\":1}")

            var conditional = HTTPClient.Request(url: "\(servers.httpsBase)/etag")
            conditional.setIfNoneMatch(try #require(first.etag))
            let second = try await client.execute(conditional)
            #expect(second.status == 304)
            #expect(second.body.isEmpty)
            #expect(second.etag == "\"v1\"")

            conditional.setIfNoneMatch("\"v0\"")
            #expect(try await client.execute(conditional).status == 200)
        }
    }

    @Test("method, body, If-Match and custom headers reach the server as given")
    func patchWithBodyAndIfMatch() async throws {
        try await withTestClient { client, servers in
            var request = HTTPClient.Request(
                method: .patch, url: "\(servers.httpsBase)/echo",
                headers: ["Content-Type": "application/merge-patch+json", "X-Custom": "kiosk 7"],
                body: Array("{\"idleResetMinutes\":2}".utf8))
            request.setIfMatch("\"41\"")
            let response = try await client.execute(request)
            #expect(response.status == 200)
            #expect(response.headers["x-echo-method"] == "PATCH")
            #expect(response.headers["x-echo-if-match"] == "\"41\"")
            #expect(response.headers["x-echo-content-type"] == "application/merge-patch+json")
            #expect(response.headers["x-echo-x-custom"] == "kiosk 7")
            #expect(response.headers["x-echo-user-agent"]?.hasPrefix("fleetset libcurl/") == true)
            #expect(response.headers["x-echo-expect"] == nil)
            #expect(response.bodyText == "{\"idleResetMinutes\":2}")
        }
    }

    @Test("a body without Content-Type is sent as application/octet-stream; binary bytes survive")
    func binaryBody() async throws {
        try await withTestClient { client, servers in
            let bytes: [UInt8] = [0, 1, 2, 255, 0, 13, 10]
            let response = try await client.execute(HTTPClient.Request(method: .post, url: "\(servers.httpsBase)/echo", body: bytes))
            #expect(response.body == bytes)
            #expect(response.headers["x-echo-content-type"] == "application/octet-stream")
            #expect(response.headers["x-echo-content-length"] == "7")
        }
    }

    @Test("a header value with a line break is refused before anything is sent")
    func headerInjectionRefused() async throws {
        try await withTestClient { client, servers in
            let request = HTTPClient.Request(url: "\(servers.httpsBase)/echo", headers: ["X-Custom": "a\r\nX-Admin: yes"])
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(request) }
            #expect(error?.kind == .invalidRequest)
            #expect(error?.message.contains("X-Custom") == true)
            // Each byte a header line must not hold, in the value or the name (a name is a token).
            let refused: [(name: String, value: String)] = [
                ("X-Custom", "a\nb"), ("X-Custom", "a\rb"), ("X-Custom", "a\u{0}b"), ("X Custom", "a"), ("X-Custom:", "a"),
                ("X-Cüstom", "a"), ("X-Custom\u{7F}", "a"), ("", "a"),
            ]
            for (name, value) in refused {
                let bad = HTTPClient.Request(url: "\(servers.httpsBase)/echo", headers: [name: value])
                let error = await #expect(throws: HTTPClientError.self, "\(name.debugDescription): \(value.debugDescription)") {
                    try await client.execute(bad)
                }
                #expect(error?.kind == .invalidRequest)
            }
            // A value may hold any other text (UTF-8 included).
            let unicode = HTTPClient.Request(url: "\(servers.httpsBase)/echo", headers: ["X-Custom": "café\tau lait"])
            let response = try await client.execute(unicode)
            #expect(response.status == 200)
        }
    }

    @Test("Retry-After is read as a delay")
    func retryAfter() async throws {
        try await withTestClient { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/retry-after"))
            #expect(response.status == 503)
            #expect(response.retryAfter == .seconds(7))
            #expect(try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag")).retryAfter == nil)
        }
    }

    @Test("a gzip-encoded body arrives decoded; the client offers every coding libcurl has")
    func compressedBody() async throws {
        try await withTestClient { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/compressed"))
            #expect(response.status == 200)
            #expect(response.headers["Content-Encoding"] == "gzip")
            #expect(response.bodyText == TestRoutes.compressedText)
            let offered = response.headers["x-accepted-encoding"] ?? ""
            for coding in client.library.contentEncodings {
                #expect(offered.contains(coding), "Accept-Encoding \"\(offered)\" lacks \(coding)")
            }
        }
    }

    @Test("HTTP/2 is used when the server offers it, HTTP/1.1 otherwise")
    func httpVersionNegotiation() async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            #expect(client.library.supportsHTTP2)
            let overTLS = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            let overPlainHTTP = try await client.execute(HTTPClient.Request(url: "\(servers.plainHTTPBase)/etag"))
            #expect(overTLS.httpVersion == .http2)
            #expect(overPlainHTTP.httpVersion == .http1_1)
        }
    }
}
