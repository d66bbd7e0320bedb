import FleetConsole
import FleetServerCore
import PosixThreads
import Testing

@Suite("Console sessions and CSRF tokens")
struct ConsoleSessionsTests {
    static let key = Array("0123456789abcdef0123456789abcdef".utf8)

    func sessions(key: [UInt8] = Self.key, lifetime: Int64 = 3600) -> ConsoleSessions {
        ConsoleSessions(keyMaterial: key, lifetime: lifetime, makeID: { "cs-fixed" })
    }

    @Test("a started session is read back from its cookie until it expires")
    func roundTrip() {
        let sessions = sessions()
        let (session, cookie) = sessions.start(now: 1000)
        #expect(session == ConsoleSessions.Session(id: "cs-fixed", expiresAt: 4600))
        #expect(cookie.hasPrefix("cs-fixed.4600."))
        #expect(sessions.session(cookie: cookie, now: 4599) == session)
        #expect(sessions.session(cookie: cookie, now: 4600) == nil)
    }

    @Test("a changed expiry, id or signature, or another key, is refused")
    func tampering() {
        let sessions = sessions()
        let (_, cookie) = sessions.start(now: 1000)
        let parts = cookie.split(separator: ".").map(String.init)
        for forged in [
            "\(parts[0]).9999999999.\(parts[2])", "cs-other.\(parts[1]).\(parts[2])", "\(parts[0]).\(parts[1]).\(parts[2].dropLast())A",
            "\(parts[0]).\(parts[1])", "", "...", cookie + ".x",
        ] {
            #expect(sessions.session(cookie: forged, now: 1001) == nil, "\(forged)")
        }
        let otherServer = self.sessions(key: Array("another admin token's hash.......".utf8))
        #expect(otherServer.session(cookie: cookie, now: 1001) == nil, "a new admin token ends every session")
    }

    @Test("a session that was ended is refused, others are not")
    func signOut() {
        let next = Locked(0)
        let sessions = ConsoleSessions(
            keyMaterial: Self.key,
            makeID: {
                next.withLock { count in
                    count += 1
                    return "cs-\(count)"
                }
            })
        let first = sessions.start(now: 0)
        let second = sessions.start(now: 0)
        sessions.end(first.session, now: 10)
        #expect(sessions.session(cookie: first.cookie, now: 11) == nil)
        #expect(sessions.session(cookie: second.cookie, now: 11) == second.session)
    }

    @Test("the CSRF token belongs to one session")
    func csrf() {
        let sessions = ConsoleSessions(keyMaterial: Self.key)
        let a = sessions.start(now: 0).session
        let b = sessions.start(now: 0).session
        #expect(a.id != b.id && a.id.hasPrefix("cs-"))
        let token = sessions.csrfToken(for: a)
        #expect(token.count == 43)
        #expect(sessions.isValidCSRFToken(token, for: a))
        #expect(!sessions.isValidCSRFToken(token, for: b))
        #expect(!sessions.isValidCSRFToken(nil, for: a))
        #expect(!sessions.isValidCSRFToken("", for: a))
    }
}

@Suite("HTML")
struct HTMLTests {
    @Test("interpolated text is escaped; HTML values are not; optional attributes and flags")
    func escaping() {
        let name = #"<script>alert("x")</script> & 'y'"#
        let html: HTML = "<p title=\"\(name)\">\(name)</p>"
        #expect(
            html.text
                == "<p title=\"&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;\">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;</p>"
        )
        let inner: HTML = "<b>\(name)</b>"
        #expect(("<i>\(inner)</i>" as HTML).text == "<i><b>&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;</b></i>")
        let none: String? = nil
        #expect(
            ("<input\(attribute: "min", "1\"")\(attribute: "max", none)\(flag: "checked", true)\(flag: "hidden", false)>" as HTML).text
                == "<input min=\"1&quot;\" checked>")
    }
}

@Suite("Form bodies")
struct FormFieldsTests {
    @Test("+ and %XX decode, a bad escape stays as written, the last of a repeated name wins")
    func decoding() {
        let fields = FormFields(urlEncoded: Array("a=1+2&b=%C3%A9t%C3%A9&c=%zz%4&v%3A%2Fx=hidden&v%3A%2Fx=true&empty=&flag".utf8))
        #expect(fields["a"] == "1 2")
        #expect(fields["b"] == "été")
        #expect(fields["c"] == "%zz%4")
        #expect(fields["v:/x"] == "true")
        #expect(fields["empty"] == "")
        #expect(fields.has("flag") && fields["flag"] == "")
        #expect(fields["missing"] == nil)
        #expect(fields.names(withPrefix: "v:") == ["v:/x"])
    }
}
