import Curl
import FleetJSON
import FleetSSO
import FleetTestSupport
import Foundation
import JWTKit
import Testing

/// FleetSSO against a real OpenID Provider that nobody here wrote: django-oauth-toolkit on
/// Django (`Tests/OIDC/provider`, from `scripts/python-tools`), started on 127.0.0.1 for the
/// test. Its discovery document and keys are read with libcurl as the server will read them;
/// an ID token it issues through its own login form is checked; after a key rotation at the
/// provider, a token with the new key is refused until the keys are read again.
@Suite("FleetSSO against a real OpenID Provider", .serialized)
struct RealProviderTests {
    static func get(_ http: HTTPClient, _ url: String) async throws -> [UInt8] {
        let answer = try await http.execute(HTTPClient.Request(method: .get, url: url))
        guard answer.status == 200 else { throw ProcessFailed(log: "GET \(url): \(answer.status)") }
        return answer.body
    }

    @Test(
        "discovery and keys read with libcurl; a token from the provider's own login checked; a rotated key refused until the keys are read again",
        .enabled(if: OpenIDProvider.present || TestTools.required), .timeLimit(.minutes(3)))
    func realProvider() async throws {
        let provider = try await OpenIDProvider.start(relyingPartyPort: 9000)
        defer { provider.stop() }
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
            let discovery = try JSONParser.parse(try await Self.get(http, ProviderMetadata.discoveryURL(issuer: provider.issuer)))
            let metadata = try ProviderMetadata(json: discovery, expectedIssuer: provider.issuer)
            #expect(metadata.deviceAuthorizationEndpoint != nil && metadata.codeChallengeMethods.contains("S256"))
            #expect(throws: ProviderMetadata.Invalid.self) { try ProviderMetadata(json: discovery, expectedIssuer: provider.issuer + "/") }

            func keys() async throws -> ProviderKeys {
                try await ProviderKeys(jwks: String(decoding: try await Self.get(http, metadata.jwksURI), as: UTF8.self))
            }
            let published = try await keys()
            let check = IDTokenCheck(issuer: provider.issuer, clientID: "fleetset-console")
            let now = Int64(Date().timeIntervalSince1970)
            let token = try await provider.idToken(user: "alice", password: "alice-pw", nonce: "n-first")
            let claims = try await check.claims(of: token, keys: published, nonce: "n-first", now: now)
            #expect(Set(claims.groups) == ["fleet-admins", "fleet-operators"] && claims.preferredUsername == "alice")
            // The same token for another sign-in (another nonce), or for another client, is refused.
            await #expect(throws: IDTokenCheck.Refused.self) {
                _ = try await check.claims(of: token, keys: published, nonce: "n-other", now: now)
            }
            let other = IDTokenCheck(issuer: provider.issuer, clientID: "fleetset-cli")
            await #expect(throws: IDTokenCheck.Refused.self) {
                _ = try await other.claims(of: token, keys: published, nonce: "n-first", now: now)
            }
            // Later than its expiry: refused.
            await #expect(throws: IDTokenCheck.Refused.self) {
                _ = try await check.claims(of: token, keys: published, nonce: "n-first", now: claims.expires + IDTokenCheck.skew + 1)
            }

            // The provider signs with a new key: refused with the keys read before, taken once they are read again.
            try await provider.rotateKey()
            let rotated = try await provider.idToken(user: "bob", password: "bob-pw", nonce: "n-rotated")
            let refusal = await #expect(throws: IDTokenCheck.Refused.self) {
                _ = try await check.claims(of: rotated, keys: published, nonce: "n-rotated", now: now)
            }
            #expect(refusal?.reason.contains("kid unknown") == true, "\(String(describing: refusal))")
            let again = try await check.claims(
                of: rotated, keys: try await keys(), nonce: "n-rotated", now: Int64(Date().timeIntervalSince1970))
            #expect(again.groups == ["fleet-viewers"])
        }
    }
}
