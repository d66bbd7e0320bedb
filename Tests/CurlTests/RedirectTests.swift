import Curl
import Testing

@Suite("Redirects are followed only within one origin")
struct RedirectTests {
    @Test("a redirect to a path on the same origin is followed")
    func sameOriginFollowed() async throws {
        try await withTestClient { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/redirect?to=/etag&status=307"))
            #expect(response.status == 200)
            #expect(response.etag == "\"v1\"")
            #expect(response.url == "\(servers.httpsBase)/etag")
        }
    }

    @Test("a redirect to another host or scheme is refused and names both URLs")
    func crossOriginRefused() async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            for target in [
                "https://localhost:\(servers.https)/etag", "\(servers.plainHTTPBase)/etag", "https://127.0.0.1:\(servers.mutualTLS)/etag",
            ] {
                let error = await #expect(throws: HTTPClientError.self) {
                    try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/redirect?to=\(target)"))
                }
                #expect(error?.kind == .redirectRefused)
                #expect(error?.message.contains(target) == true)
            }
        }
    }

    @Test("a redirect loop ends with tooManyRedirects")
    func redirectLoop() async throws {
        try await withTestClient({ $0.maxRedirects = 3 }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/redirect"))
            }
            #expect(error?.kind == .tooManyRedirects)
        }
    }

    @Test("with maxRedirects 0 the 3xx response itself is returned")
    func redirectsOff() async throws {
        try await withTestClient({ $0.maxRedirects = 0 }) { client, servers in
            let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/redirect?to=/etag"))
            #expect(response.status == 302)
            #expect(response.headers["Location"] == "/etag")
        }
    }
}
