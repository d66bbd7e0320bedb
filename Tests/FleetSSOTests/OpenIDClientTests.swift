import FleetJSON
import FleetSSO
import JWTKit
import Synchronization
import Testing

/// The server's client of the provider, over a scripted transport (the provider itself, with
/// its real HTTP, is `RealProviderTests`' and `SingleSignOnTests`'): what it reads when, how a
/// rotation and a withdrawn key are taken, and what it makes of each answer.
@Suite("OpenIDClient: reading the provider, checking what it gave")
struct OpenIDClientTests {
    static let issuer = "https://id.example.com"

    /// A provider's answers by URL, and a count of the requests made.
    final class ScriptedProvider: ProviderTransport, Sendable {
        struct State {
            var answers: [String: (Int, String)] = [:]
            var requests: [String] = []
            var forms: [[(String, String)]] = []
        }
        let state = Mutex(State())

        func answer(_ url: String, _ body: String) { answer(url, status: 200, body) }
        func answer(_ url: String, status: Int, _ body: String) { state.withLock { $0.answers[url] = (status, body) } }
        func count(_ url: String) -> Int { state.withLock { $0.requests.filter { $0 == url }.count } }

        func get(_ url: String, bearer: String?) async throws -> ProviderAnswer {
            try reply(url)
        }

        func postForm(_ url: String, form: [(String, String)], client: ClientCredentials?) async throws -> ProviderAnswer {
            state.withLock { $0.forms.append(form) }
            return try reply(url)
        }

        private func reply(_ url: String) throws -> ProviderAnswer {
            try state.withLock { state in
                state.requests.append(url)
                guard let (status, body) = state.answers[url] else { throw ProviderDown() }
                return ProviderAnswer(status: status, body: Array(body.utf8))
            }
        }
        struct ProviderDown: Error {}
    }

    struct Claims: JWTPayload {
        var iss: String
        var sub: String
        var aud: String
        var exp: Int64
        var iat: Int64
        var groups: [String]
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    static func jwks(_ keys: [(String, ES256PrivateKey)]) throws -> String {
        let members = try keys.map { kid, key in
            let point = try #require(key.publicKey.parameters)
            return #"{"kty":"EC","crv":"P-256","kid":"\#(kid)","use":"sig","x":"\#(point.x)","y":"\#(point.y)"}"#
        }
        return #"{"keys":[\#(members.joined(separator: ","))]}"#
    }

    /// A provider with discovery and keys, a client of it, and a signer of its tokens.
    static func setUp() async throws -> (ScriptedProvider, OpenIDClient, (String, ES256PrivateKey, Claims) async throws -> String) {
        let provider = ScriptedProvider()
        provider.answer(
            issuer + "/.well-known/openid-configuration",
            #"""
            {"issuer":"\#(issuer)","authorization_endpoint":"\#(issuer)/authorize","token_endpoint":"\#(issuer)/token",
             "jwks_uri":"\#(issuer)/jwks","userinfo_endpoint":"\#(issuer)/userinfo","introspection_endpoint":"\#(issuer)/introspect"}
            """#)
        let client = OpenIDClient(
            OpenIDClient.Configuration(
                issuer: issuer, console: ClientCredentials(id: "console", secret: "s"), cliClientID: "cli", keysRefreshInterval: 60),
            transport: provider)
        let sign = { (kid: String, key: ES256PrivateKey, claims: Claims) async throws -> String in
            let keys = JWTKeyCollection()
            await keys.add(ecdsa: key, kid: JWKIdentifier(string: kid))
            return try await keys.sign(claims, kid: JWKIdentifier(string: kid))
        }
        return (provider, client, sign)
    }

    static func claims(at now: Int64, sub: String = "u-1") -> Claims {
        Claims(iss: issuer, sub: sub, aud: "cli", exp: now + 300, iat: now, groups: ["fleet-admins"])
    }

    @Test(
        "discovery is read once an hour; a new kid reads the keys again at most once a refresh interval; a withdrawn key lasts an hour at most"
    )
    func caching() async throws {
        let (provider, client, sign) = try await Self.setUp()
        let (k1, k2, k3) = (ES256PrivateKey(), ES256PrivateKey(), ES256PrivateKey())
        provider.answer(Self.issuer + "/jwks", try Self.jwks([("k1", k1)]))
        let now: Int64 = 1_790_000_000
        let first = try await client.person(idToken: try await sign("k1", k1, Self.claims(at: now)), accessToken: nil, now: now)
        #expect(first.subject == "u-1" && first.groups == ["fleet-admins"] && first.tokenExpires == now + 300)
        _ = try await client.providerMetadata(now: now + 3599)
        #expect(provider.count(Self.issuer + "/.well-known/openid-configuration") == 1)
        _ = try await client.providerMetadata(now: now + 3600)
        #expect(provider.count(Self.issuer + "/.well-known/openid-configuration") == 2)

        // The provider rotates to k2: a k2 token within the interval is refused without asking; after it, the keys are read again.
        provider.answer(Self.issuer + "/jwks", try Self.jwks([("k1", k1), ("k2", k2)]))
        let early = now + 30
        await #expect(throws: OpenIDClient.Failure.self) {
            _ = try await client.person(idToken: try await sign("k2", k2, Self.claims(at: early)), accessToken: nil, now: early)
        }
        #expect(provider.count(Self.issuer + "/jwks") == 1)
        let later = now + 60
        #expect(
            try await client.person(idToken: try await sign("k2", k2, Self.claims(at: later)), accessToken: nil, now: later).subject
                == "u-1")
        #expect(provider.count(Self.issuer + "/jwks") == 2)
        // A stream of unknown kids asks the provider once a minute at most.
        for offset in Int64(61)..<Int64(100) {
            _ = try? await client.person(
                idToken: try await sign("k3", k3, Self.claims(at: now + offset)), accessToken: nil, now: now + offset)
        }
        #expect(provider.count(Self.issuer + "/jwks") == 2)

        // The provider withdraws k1: still taken within the hour of the last reading, refused after it.
        provider.answer(Self.issuer + "/jwks", try Self.jwks([("k2", k2)]))
        let withinHour = later + 3599
        #expect(
            try await client.person(idToken: try await sign("k1", k1, Self.claims(at: withinHour)), accessToken: nil, now: withinHour)
                .subject
                == "u-1")
        let afterHour = later + 3600
        let refused = await #expect(throws: OpenIDClient.Failure.self) {
            _ = try await client.person(idToken: try await sign("k1", k1, Self.claims(at: afterHour)), accessToken: nil, now: afterHour)
        }
        #expect(refused?.reason.contains("kid unknown") == true)
    }

    @Test("an access token: active, issued to the CLI's client, not expired, the same subject as userinfo; each refusal says which")
    func accessTokens() async throws {
        let (provider, client, _) = try await Self.setUp()
        let now: Int64 = 1_790_000_000
        provider.answer(Self.issuer + "/userinfo", #"{"sub":"u-7","preferred_username":"gus","groups":["kiosk-devs"]}"#)
        let cases: [(String, String)] = [
            (#"{"active":false}"#, "not active"),
            (#"{"active":true,"client_id":"another-app","exp":\#(now + 60)}"#, "another client"),
            (#"{"active":true,"client_id":"cli","exp":\#(now - 1)}"#, "expired"),
            (#"{"active":true,"client_id":"cli","exp":\#(now + 60),"sub":"u-8"}"#, "different subjects"),
        ]
        for (introspected, reason) in cases {
            provider.answer(Self.issuer + "/introspect", introspected)
            let refusal = await #expect(throws: OpenIDClient.Failure.self, "\(reason)") {
                _ = try await client.person(idToken: nil, accessToken: "at", now: now)
            }
            #expect(refusal?.reason.contains(reason) == true, "\(refusal?.reason ?? "accepted")")
        }
        provider.answer(Self.issuer + "/introspect", #"{"active":true,"client_id":"cli","exp":\#(now + 60),"sub":"u-7"}"#)
        let person = try await client.person(idToken: nil, accessToken: "at", now: now)
        #expect(
            person.subject == "u-7" && person.issuer == Self.issuer && person.groups == ["kiosk-devs"] && person.tokenExpires == now + 60)
        // The introspection was asked with the token, as the console's client.
        #expect(provider.state.withLock { $0.forms.last?.map(\.1) } == ["at"])
        // The provider down: a failure that says so.
        provider.answer(Self.issuer + "/introspect", status: 503, "busy")
        let down = await #expect(throws: OpenIDClient.Failure.self) {
            _ = try await client.person(idToken: nil, accessToken: "at", now: now)
        }
        #expect(down?.reason.contains("HTTP 503") == true)
    }

    @Test("the code exchange: an error answer says the provider's error; an answer without an ID token is refused")
    func codeExchange() async throws {
        let (provider, client, _) = try await Self.setUp()
        let attempt = LoginAttempt.start(now: 1_790_000_000, returnTo: nil)
        provider.answer(Self.issuer + "/token", status: 400, #"{"error":"invalid_grant","error_description":"code used"}"#)
        let used = await #expect(throws: OpenIDClient.Failure.self) {
            _ = try await client.finish(code: "c", attempt: attempt, redirectURI: "https://fleet/console/sso/callback", now: 1_790_000_000)
        }
        #expect(used?.reason.contains("invalid_grant: code used") == true)
        let form = try #require(provider.state.withLock { $0.forms.last })
        #expect(
            form.contains { $0 == ("code_verifier", attempt.pkce.verifier) } && form.contains { $0 == ("grant_type", "authorization_code") }
        )
        provider.answer(Self.issuer + "/token", #"{"access_token":"at","token_type":"Bearer"}"#)
        let noID = await #expect(throws: OpenIDClient.Failure.self) {
            _ = try await client.finish(code: "c", attempt: attempt, redirectURI: "https://fleet/console/sso/callback", now: 1_790_000_000)
        }
        #expect(noID?.reason.contains("no id_token") == true)
    }
}
