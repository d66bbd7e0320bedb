import Testing

@testable import Curl

@Suite("URL parsing, headers and durations")
struct ValueTests {
    @Test("a URL is parsed the way libcurl will use it, default port included")
    func parsesURLs() throws {
        let url = try ParsedURL(parsing: "HTTPS://Fleet.Example.com/v1/apps/kiosk/settings?wait=30")
        #expect(url.scheme == "https")
        #expect(url.port == 443)
        #expect(url.authority == "fleet.example.com:443" || url.authority == "Fleet.Example.com:443")
        let ipv6 = try ParsedURL(parsing: "http://[::1]:8080/x")
        #expect(ipv6.host == "[::1]")
        #expect(ipv6.port == 8080)
    }

    @Test("malformed URLs are refused with libcurl's reason", arguments: ["not a url", "https://", "https://host:99999/", ""])
    func malformedURLs(text: String) {
        let error = #expect(throws: HTTPClientError.self) { try ParsedURL(parsing: text) }
        #expect(error?.kind == .invalidRequest)
        #expect(error?.curlMessage?.isEmpty == false)
    }

    @Test("relative and absolute Location values resolve against the request URL")
    func resolvesReferences() throws {
        let base = try ParsedURL(parsing: "https://fleet.example.com:8443/v1/apps/kiosk/settings")
        #expect(try base.resolving("/v1/other").text == "https://fleet.example.com:8443/v1/other")
        #expect(try base.resolving("metadata").text == "https://fleet.example.com:8443/v1/apps/kiosk/metadata")
        #expect(try base.resolving("/x").isSameOrigin(as: base))
        #expect(try !base.resolving("https://fleet.example.com/x").isSameOrigin(as: base))
        #expect(try !base.resolving("http://fleet.example.com:8443/x").isSameOrigin(as: base))
        #expect(try base.resolving("HTTPS://FLEET.example.com:8443/x").isSameOrigin(as: base))
    }

    @Test("header lookup ignores case; setting replaces every field of that name in place")
    func headers() {
        var headers: HTTPClient.Headers = ["Accept": "a", "ETag": "\"1\""]
        headers.add(name: "etag", value: "\"2\"")
        #expect(headers["etag"] == "\"1\"")
        #expect(headers.values(for: "ETAG") == ["\"1\"", "\"2\""])
        headers["Etag"] = "\"3\""
        #expect(headers.values(for: "etag") == ["\"3\""])
        #expect(headers.map(\.name) == ["Accept", "Etag"])
        headers["accept"] = nil
        #expect(headers.map(\.name) == ["Etag"])
    }

    @Test("header lines: defaults added, empty values kept, no Expect: 100-continue")
    func headerLines() throws {
        let request = HTTPClient.Request(method: .put, url: "https://a/x", headers: ["X-Empty": ""], body: [1])
        let lines = try Transfer.headerLines(for: request, userAgent: "ua")
        #expect(lines == ["X-Empty;", "Content-Type: application/octet-stream", "User-Agent: ua", "Expect:"])
    }

    @Test("header names must be tokens", arguments: ["", "Bad Name", "Colon:", "Ümlaut"])
    func invalidHeaderNames(name: String) {
        let request = HTTPClient.Request(url: "https://a/x", headers: HTTPClient.Headers([(name, "v")]))
        #expect(throws: HTTPClientError.self) { try Transfer.headerLines(for: request, userAgent: "ua") }
    }

    @Test(
        "durations become whole milliseconds, never rounding a positive one down to 0",
        arguments: [
            (Duration.seconds(10), 10_000), (.milliseconds(300), 300), (.microseconds(1), 1), (.nanoseconds(1_500_000), 2), (.zero, 1),
        ])
    func milliseconds(duration: Duration, expected: Int) {
        #expect(duration.wholeMilliseconds == expected)
    }

    @Test("a libcurl older than 7.85.0 is refused with a message naming both versions")
    func versionCheck() {
        #expect(
            CurlLibrary.versionProblem(versionNumber: 0x07_51_00, version: "7.81.0")
                == "libcurl 7.81.0 is too old: fleetset needs libcurl 7.85.0 or newer (Debian 12 ships 7.88.1)")
        #expect(CurlLibrary.versionProblem(versionNumber: 0x07_55_00, version: "7.85.0") == nil)
        #expect(CurlLibrary.versionProblem(versionNumber: 0x08_00_00, version: "8.0.0") == nil)
    }

    @Test("the runtime libcurl is new enough and has TLS, HTTP/2 and gzip")
    func library() throws {
        let info = try CurlLibrary.ensureInitialized()
        #expect(info.tlsBackend.isEmpty == false)
        #expect(info.supportsHTTP2)
        #expect(info.contentEncodings.contains("gzip"))
        let parts = info.version.split(separator: ".").compactMap { Int($0) }
        #expect(parts.count == 3)
        #expect((parts[0], parts[1]) >= (7, 85))
    }
}
