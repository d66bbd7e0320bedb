import Testing

@testable import Curl

/// `connectAddress`: the caller's checked address is where the connection goes, and the URL's
/// host still names the server in TLS.
@Suite("Connecting to a given address")
struct ConnectAddressTests {
    @Test("a host no resolver knows is reached at the given address; without it, the lookup fails")
    func reachesTheGivenAddress() async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            let url = "http://hooks.fleetset.invalid:\(servers.plainHTTP)/etag"
            let response = try await client.execute(HTTPClient.Request(url: url, connectAddress: "127.0.0.1"))
            #expect(response.status == 200)
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClient.Request(url: url)) }
            #expect(error?.kind == .couldNotResolveHost)
            // A pin stays with its request: the next request to the same name looks it up again.
            let again = await #expect(throws: HTTPClientError.self) { try await client.execute(HTTPClient.Request(url: url)) }
            #expect(again?.kind == .couldNotResolveHost)
        }
    }

    @Test("over TLS the URL's name is checked against the certificate, not the address")
    func tlsChecksTheURLsName() async throws {
        try await withTestClient { client, servers in
            // The test certificate names 127.0.0.1 only.
            let pinned = try await client.execute(
                HTTPClient.Request(url: "https://127.0.0.1:\(servers.https)/etag", connectAddress: "127.0.0.1"))
            #expect(pinned.status == 200)
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(
                    HTTPClient.Request(url: "https://hooks.fleetset.invalid:\(servers.https)/etag", connectAddress: "127.0.0.1"))
            }
            #expect(error?.kind == .hostnameMismatch)
        }
    }

    @Test("an IPv6 address is given in brackets")
    func ipv6() async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(
                    HTTPClient.Request(url: "http://hooks.fleetset.invalid:\(servers.plainHTTP)/etag", connectAddress: "::1"))
            }
            // The test server listens on 127.0.0.1 only: the connection to ::1 is refused, not looked up.
            #expect(error?.kind == .couldNotConnect)
        }
    }
}
