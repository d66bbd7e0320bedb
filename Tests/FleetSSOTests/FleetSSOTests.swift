import FleetClient
import FleetJSON
import FleetProtocol
import FleetSSO
import JWTKit
import Testing

@Suite("Single sign-on as values")
struct FleetSSOTests {
    @Test("PKCE: RFC 7636's own example; a fresh verifier is 43 characters of the allowed ones")
    func pkce() throws {
        let example = try #require(PKCE(verifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"))
        #expect(example.challenge == "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM")
        let fresh = PKCE.generate()
        #expect(fresh.verifier.utf8.count == 43 && PKCE(verifier: fresh.verifier) == fresh && fresh != PKCE.generate())
        #expect(PKCE(verifier: "short") == nil && PKCE(verifier: String(repeating: "a", count: 42) + "!") == nil)
    }

    @Test("role rules: read from text, errors that say which rule and why; the highest role wins; scopes joined only exactly")
    func roleMapping() throws {
        let mapping = try RoleMapping(parsing: [
            "# a comment", "", "fleet-admins=admin", "kiosk-devs=editor:apps=kiosk", "menu-devs=editor:apps=menu",
            "lobby-staff=operator:groups=lobby", "office-staff=operator:apps=kiosk:groups=office", "all-viewers=viewer",
        ])
        #expect(mapping.rules.count == 6)
        #expect(mapping.grant(groups: ["kiosk-devs", "fleet-admins"])?.role == .admin)
        #expect(mapping.grant(groups: ["nobody"]) == nil)
        #expect(try RoleMapping(parsing: ["fleet-admins=admin\r"]).rules == [RoleMapping.Rule(group: "fleet-admins", role: .admin)])
        // A role rule without a scope wins over the scoped ones of the same role.
        let wide = try RoleMapping(parsing: ["a=operator:apps=kiosk", "b=operator"])
        #expect(wide.grant(groups: ["a", "b"])?.scope == .everything)
        // Rules of one role with the same apps join their groups.
        let sameApps = try RoleMapping(parsing: ["a=operator:apps=kiosk:groups=lobby", "b=operator:apps=kiosk:groups=office"])
        #expect(sameApps.grant(groups: ["a", "b"])?.scope == AccountScope(apps: ["kiosk"], groups: ["lobby", "office"]))
        let editor = try #require(mapping.grant(groups: ["kiosk-devs", "menu-devs", "all-viewers"]))
        #expect(editor.role == .editor && editor.scope == AccountScope(apps: ["kiosk", "menu"]))
        // kiosk in office and every app in lobby cannot be joined without granting kiosk's… the first stands.
        let operatorGrant = try #require(mapping.grant(groups: ["office-staff", "lobby-staff"]))
        #expect(operatorGrant.role == .operator && operatorGrant.scope == AccountScope(groups: ["lobby"]))
        for (bad, says) in [
            ("=admin", "GROUP=ROLE"), ("ops=boss", "names no role"), ("ops=admin:apps=kiosk", "always has the whole fleet"),
            ("ops=editor:app=kiosk", "apps=A,B"), ("ops=editor:apps=", "apps=A,B"), ("ops=editor", "gives editor no apps"),
            ("ops=editor:groups=lobby", "gives editor no apps"),
        ] {
            #expect(throws: RoleMapping.Invalid.self, "\(bad)") { try RoleMapping(parsing: [bad]) }
            do {
                _ = try RoleMapping(parsing: [bad])
            } catch {
                #expect(error.description.contains(bad) && error.description.contains(says), "\(error)")
            }
        }
    }

    @Test("the device grant's poll: pending waits the interval, slow_down adds 5 s, the expiry stops it, an answer ends it")
    func devicePoll() {
        var poll = DevicePoll(interval: nil, expiresIn: 30, now: 1000)
        #expect(poll.first == .poll(after: 5))
        #expect(poll.next(after: .pending, now: 1005) == .poll(after: 5))
        #expect(poll.next(after: .slowDown, now: 1010) == .poll(after: 10))
        #expect(poll.next(after: .pending, now: 1020) == .stop("the code expired before it was approved; run the command again"))
        // What a provider says is kept within reason (and never overflows).
        var wild = DevicePoll(interval: Int.max, expiresIn: Int.max, now: 0)
        #expect(wild.first == .poll(after: 300) && wild.expiresAt == 3600)
        #expect(wild.next(after: .slowDown, now: 10) == .poll(after: 300))
        #expect(DevicePoll(interval: 0, expiresIn: -5, now: 0).first == .poll(after: 1))
        var expired = DevicePoll(interval: 5, expiresIn: 600, now: 0)
        #expect(expired.next(after: .expired, now: 5) == .stop("the code expired before it was approved; run the command again"))
        var approved = DevicePoll(interval: 2, expiresIn: 600, now: 0)
        #expect(approved.next(after: .granted, now: 2) == .done)
        #expect(approved.next(after: .denied, now: 4) == .stop("the sign-in was refused at the identity provider"))
        #expect(approved.next(after: .failed("invalid_client"), now: 4) == .stop("the identity provider answered: invalid_client"))
    }

    @Test("discovery: the issuer must be the configured one, endpoints https (or this machine), PKCE with S256")
    func discovery() throws {
        let issuer = "https://id.example.com/realms/fleet"
        var document: JSONObject = [
            "issuer": .string(issuer), "authorization_endpoint": .string(issuer + "/auth"), "token_endpoint": .string(issuer + "/token"),
            "jwks_uri": .string(issuer + "/certs"), "device_authorization_endpoint": .string(issuer + "/device"),
            "code_challenge_methods_supported": ["plain", "S256"],
        ]
        let metadata = try ProviderMetadata(json: .object(document), expectedIssuer: issuer)
        #expect(metadata.deviceAuthorizationEndpoint == issuer + "/device" && metadata.userinfoEndpoint == nil)
        #expect(ProviderMetadata.discoveryURL(issuer: issuer + "/") == issuer + "/.well-known/openid-configuration")
        #expect(throws: ProviderMetadata.Invalid.self) { try ProviderMetadata(json: .object(document), expectedIssuer: issuer + "x") }
        for url in [
            "http://id.example.com/token", "http://localhost:@evil.example/token", "http://127.0.0.1:@evil.example/",
            "http://[::1]evil.example/", "https://user@id.example.com/token", "ftp://id.example.com/", "https:///token",
        ] {
            document["token_endpoint"] = .string(url)
            #expect(throws: ProviderMetadata.Invalid.self, "\(url)") {
                try ProviderMetadata(json: .object(document), expectedIssuer: issuer)
            }
        }
        for url in ["http://127.0.0.1:8080/token", "http://localhost/token", "http://[::1]:80/token", "https://id.example.com:8443/t?x=1"] {
            document["token_endpoint"] = .string(url)
            #expect(throws: Never.self, "\(url)") { try ProviderMetadata(json: .object(document), expectedIssuer: issuer) }
        }
        document["userinfo_endpoint"] = "http://id.example.com/userinfo"
        #expect(throws: ProviderMetadata.Invalid.self) { try ProviderMetadata(json: .object(document), expectedIssuer: issuer) }
        document["userinfo_endpoint"] = nil
        document["token_endpoint"] = "http://127.0.0.1:8080/token"
        document["code_challenge_methods_supported"] = ["plain"]
        #expect(throws: ProviderMetadata.Invalid.self) { try ProviderMetadata(json: .object(document), expectedIssuer: issuer) }
    }

    /// What a provider signs, for the tests' own tokens.
    struct Token: JWTPayload {
        var iss: String
        var sub: String
        var aud: [String]
        var exp: Int64
        var iat: Int64
        var nonce: String?
        var azp: String?
        var groups: [String]
        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A token put together by hand (a header of the test's choosing, any signature).
    static func handMade(header: String, payload: String, signature: String = "c2lnbmF0dXJl") -> String {
        func encoded(_ text: String) -> String {
            Base64URLForTests.encode(Array(text.utf8))
        }
        return encoded(header) + "." + encoded(payload) + "." + signature
    }

    @Test("an ID token: its signature against the provider's keys, then iss, aud, exp, iat and nonce; each refusal says which")
    func idTokens() async throws {
        let provider = ES256PrivateKey()
        let stranger = ES256PrivateKey()
        let signing = JWTKeyCollection()
        await signing.add(ecdsa: provider, kid: "k1")
        await signing.add(ecdsa: stranger, kid: "k2")
        // What the provider publishes: its public key in a JWKS.
        let point = try #require(provider.publicKey.parameters)
        let published = try await ProviderKeys(
            jwks: #"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","use":"sig","alg":"ES256","x":"\#(point.x)","y":"\#(point.y)"}]}"#)
        #expect(published.ids == ["k1"] && published.algorithms == ["k1": "ES256"])
        await #expect(throws: IDTokenCheck.Refused.self) { try await ProviderKeys(jwks: #"{"keys":[{"kty":"EC","crv":"P-256"}]}"#) }
        // Keys not for signatures, or of another kind, are skipped, not fatal; a JWKS of only those is refused.
        let mixed = try await ProviderKeys(
            jwks: #"""
                {"keys":[{"kty":"EC","crv":"P-256","kid":"k1","x":"\#(point.x)","y":"\#(point.y)"},
                {"kty":"EC","crv":"P-256","kid":"enc","use":"enc","x":"\#(point.x)","y":"\#(point.y)"},
                {"kty":"oct","kid":"secret","k":"c2VjcmV0"},{"kty":"EC","crv":"P-384","kid":"p384","x":"AA","y":"AA"},
                {"kty":"EC","crv":"P-256","kid":"wrong-alg","alg":"RS256","x":"\#(point.x)","y":"\#(point.y)"}]}
                """#)
        #expect(mixed.algorithms == ["k1": "ES256"])
        await #expect(throws: IDTokenCheck.Refused.self) {
            try await ProviderKeys(jwks: #"{"keys":[{"kty":"oct","kid":"s","k":"c2VjcmV0"}]}"#)
        }
        let check = IDTokenCheck(issuer: "https://id.example.com", clientID: "fleetset")
        let now: Int64 = 1_790_000_000
        let good = Token(
            iss: "https://id.example.com", sub: "u-1", aud: ["fleetset"], exp: now + 300, iat: now, nonce: "n-1", groups: ["kiosk-devs"])
        func sign(_ token: Token, kid: String = "k1") async throws -> String {
            try await signing.sign(token, kid: JWKIdentifier(string: kid))
        }
        let claims = try await check.claims(of: try await sign(good), keys: published, nonce: "n-1", now: now + 10)
        #expect(claims.subject == "u-1" && claims.groups == ["kiosk-devs"])

        var cases: [(String, Token, String, String?)] = []
        cases.append(("another key", good, "k2", "n-1"))
        var expired = good
        expired.exp = now - 120
        cases.append(("expired", expired, "k1", "n-1"))
        var audience = good
        audience.aud = ["another-client"]
        cases.append(("audience", audience, "k1", "n-1"))
        var issuer = good
        issuer.iss = "https://evil.example.com"
        cases.append(("issuer", issuer, "k1", "n-1"))
        cases.append(("nonce", good, "k1", "n-2"))
        var old = good
        old.iat = now - 3600
        old.exp = now + 3600
        cases.append(("issued long ago", old, "k1", "n-1"))
        var future = good
        future.iat = now + 3600
        cases.append(("issued in the future", future, "k1", "n-1"))
        var foreignParty = good
        foreignParty.azp = "another-client"
        cases.append(("azp of another client", foreignParty, "k1", "n-1"))
        var twoAudiences = good
        twoAudiences.aud = ["fleetset", "another-client"]
        cases.append(("several audiences without azp", twoAudiences, "k1", "n-1"))
        var noSubject = good
        noSubject.sub = ""
        cases.append(("an empty subject", noSubject, "k1", "n-1"))
        var forever = good
        forever.exp = Int64.max
        cases.append(("a time out of range", forever, "k1", "n-1"))
        var noNonce = good
        noNonce.nonce = nil
        cases.append(("no nonce when one was sent", noNonce, "k1", "n-1"))
        // Each refused for its own reason, not another check's.
        let reasons = [
            "another key": "kid unknown", "expired": "expired", "audience": "meant for", "issuer": "issued by", "nonce": "nonce",
            "issued long ago": "not issued just now", "issued in the future": "not issued just now",
            "azp of another client": "another party", "several audiences without azp": "another party", "an empty subject": "no sub",
            "a time out of range": "out of range", "no nonce when one was sent": "nonce",
        ]
        for (what, token, kid, nonce) in cases {
            let signed = try await sign(token, kid: kid)
            let refusal = await #expect(throws: IDTokenCheck.Refused.self, "\(what)") {
                _ = try await check.claims(of: signed, keys: published, nonce: nonce, now: now + 10)
            }
            let reason = try #require(reasons[what], "\(what) has its expected reason")
            #expect(refusal?.reason.contains(reason) == true, "\(what): \(refusal?.reason ?? "accepted")")
        }
        // A good token without its nonce check (the device grant's) passes; the separator splits only when configured.
        #expect(try await check.claims(of: try await sign(good), keys: published, nonce: nil, now: now + 10).subject == "u-1")
        struct JoinedGroups: JWTPayload {
            var iss: String, sub: String, aud: String, exp: Int64, iat: Int64, groups: String
            func verify(using algorithm: some JWTAlgorithm) async throws {}
        }
        let joined = try await signing.sign(
            JoinedGroups(iss: good.iss, sub: "u-2", aud: "fleetset", exp: now + 300, iat: now, groups: "kiosk-devs; fleet-admins"),
            kid: JWKIdentifier(string: "k1"))
        #expect(try await check.claims(of: joined, keys: published, nonce: nil, now: now).groups == ["kiosk-devs; fleet-admins"])
        let lemon = IDTokenCheck(issuer: "https://id.example.com", clientID: "fleetset", groupsSeparator: ";")
        #expect(try await lemon.claims(of: joined, keys: published, nonce: nil, now: now).groups == ["kiosk-devs", "fleet-admins"])
        // Headers: an alg other than the key's, a critical parameter, no kid: refused before any signature is checked.
        let payload = #"{"iss":"https://id.example.com","sub":"u-1","aud":"fleetset","exp":\#(now + 300),"iat":\#(now),"nonce":"n-1"}"#
        for (what, header) in [
            ("alg none", #"{"alg":"none","kid":"k1"}"#), ("HS256 with the public key", #"{"alg":"HS256","kid":"k1"}"#),
            ("RS256 on an EC key", #"{"alg":"RS256","kid":"k1"}"#), ("crit", #"{"alg":"ES256","kid":"k1","crit":["exp"]}"#),
            ("no kid", #"{"alg":"ES256"}"#),
        ] {
            let refusal = await #expect(throws: IDTokenCheck.Refused.self, "\(what)") {
                _ = try await check.claims(of: Self.handMade(header: header, payload: payload), keys: published, nonce: "n-1", now: now)
            }
            #expect(refusal?.reason.contains("signature") == false, "\(what): refused for its header, not its signature")
        }
        // A token altered after signing (a group added) does not verify.
        let parts = try await sign(good).split(separator: ".").map(String.init)
        var forgedClaims = good
        forgedClaims.groups = ["fleet-admins"]
        let forgedPayload = try await sign(forgedClaims).split(separator: ".").map(String.init)[1]
        await #expect(throws: IDTokenCheck.Refused.self) {
            _ = try await check.claims(
                of: [parts[0], forgedPayload, parts[2]].joined(separator: "."), keys: published, nonce: "n-1", now: now)
        }
    }
}

/// Base64url without padding, for the tests' hand-made tokens.
enum Base64URLForTests {
    static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        var bits = 0
        var value = 0
        var output = ""
        for byte in bytes {
            value = value << 8 | Int(byte)
            bits += 8
            while bits >= 6 {
                bits -= 6
                output.append(alphabet[(value >> bits) & 63])
            }
        }
        if bits > 0 { output.append(alphabet[(value << (6 - bits)) & 63]) }
        return output
    }
}

@Suite("A sign-in through the provider")
struct LoginAttemptTests {
    @Test("the authorization URL carries the code flow's parameters, encoded; state and nonce are fresh each time")
    func authorizationURL() throws {
        let attempt = LoginAttempt.start(now: 1000, returnTo: "/console/apps/kiosk")
        let url = attempt.authorizationURL(
            endpoint: "https://id.example.com/auth?tenant=fleet", clientID: "fleetset console",
            redirectURI: "https://fleet.example.com/console/sso/callback")
        #expect(url.hasPrefix("https://id.example.com/auth?tenant=fleet&response_type=code&client_id=fleetset%20console&"))
        for part in [
            "redirect_uri=https%3A%2F%2Ffleet.example.com%2Fconsole%2Fsso%2Fcallback", "scope=openid%20profile%20email",
            "state=\(attempt.state)", "nonce=\(attempt.nonce)", "code_challenge=\(attempt.pkce.challenge)", "code_challenge_method=S256",
        ] {
            #expect(url.contains(part), "\(part) in \(url)")
        }
        let other = LoginAttempt.start(now: 1000, returnTo: nil)
        #expect(other.state != attempt.state && other.nonce != attempt.nonce && other.state.utf8.count == 43)
        #expect(attempt.isCurrent(now: 1000 + LoginAttempt.lifetime - 1) && !attempt.isCurrent(now: 1000 + LoginAttempt.lifetime))
    }

    @Test("where to go afterwards is only ever a console path; the stored text reads back, and nothing else does")
    func returnToAndStorage() throws {
        for (asked, kept) in [
            ("/console/devices?state=error", "/console/devices?state=error"), ("/console", "/console"),
            ("https://evil.example.com", "/console"),
            ("//evil.example.com/console/", "/console"), ("/console/..//evil", "/console"), ("/console\\evil", "/console"),
            ("/consolex", "/console"), ("/console/a b", "/console"),
        ] {
            #expect(LoginAttempt.start(now: 0, returnTo: asked).returnTo == kept, "\(asked)")
        }
        let attempt = LoginAttempt.start(now: 5, returnTo: "/console/people")
        #expect(LoginAttempt(storedText: attempt.storedText) == attempt)
        #expect(LoginAttempt(storedText: "{}") == nil)
        let tampered = attempt.storedText.replacing("/console/people", with: "https://evil.example.com")
        #expect(LoginAttempt(storedText: tampered) == nil)
        // A stored start far in the past or the future is never current, and nothing overflows.
        let ancient = attempt.storedText.replacing(#""startedAt":5"#, with: #""startedAt":-9223372036854775808"#)
        let read = try #require(LoginAttempt(storedText: ancient))
        #expect(!read.isCurrent(now: 1000) && !attempt.isCurrent(now: 4) && attempt.isCurrent(now: 5))
    }
}
