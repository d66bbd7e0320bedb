import Curl
import FleetClient
import FleetConsole
import FleetJSON
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetTestSupport
import Foundation
import Testing

/// The console's HTTP behaviour without a browser: who may see it, what its cookie and headers
/// say, and which forms it refuses. (`ConsoleBrowserTests` drives it in chromium.)
@Suite("Admin console over HTTP")
struct ConsoleRouteTests {
    /// A console visitor: fleetset's libcurl client, following no redirect, with the session cookie once signed in.
    struct Visitor {
        let server: TestFleetServer
        let http: HTTPClient
        var cookie: String?

        func request(
            _ method: HTTPClient.Method, _ path: String, form: [(String, String)]? = nil, headers: [(String, String)] = []
        ) async throws -> HTTPClient.Response {
            var request = HTTPClient.Request(method: method, url: server.baseURL + path)
            for (name, value) in headers { request.headers[name] = value }
            if let cookie { request.headers["Cookie"] = "fleetset_console=\(cookie)" }
            if let form {
                request.headers["Content-Type"] = "application/x-www-form-urlencoded"
                request.body = Array(form.map { "\(Self.encode($0.0))=\(Self.encode($0.1))" }.joined(separator: "&").utf8)
            }
            return try await http.execute(request)
        }

        static func encode(_ text: String) -> String {
            text.utf8.map { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                    String(UnicodeScalar(byte))
                default: "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
                }
            }.joined()
        }

        /// Signs in with `token`; keeps the cookie when one is set.
        mutating func signIn(token: String = TestFleetServer.adminToken, headers: [(String, String)] = []) async throws
            -> HTTPClient.Response
        {
            let answer = try await request(.post, "/console/sign-in", form: [("token", token)], headers: headers)
            if let setCookie = answer.headers["Set-Cookie"],
                let value = setCookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last
            {
                cookie = String(value)
            }
            return answer
        }

        /// The CSRF token in a page's forms.
        func csrf(_ path: String = "/console/apps") async throws -> String {
            let page = String(decoding: try await request(.get, path).body, as: UTF8.self)
            guard let range = page.range(of: "name=\"csrf\" value=\"") else { return "" }
            return String(page[range.upperBound...].prefix { $0 != "\"" })
        }
    }

    static func withVisitor(
        limits: RequestLimits.Configuration = .init(), _ body: (TestFleetServer, inout Visitor) async throws -> Void
    ) async throws {
        try await TestFleetServer.with(limits: limits) { server in
            let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0))
            var visitor = Visitor(server: server, http: http)
            do {
                try await body(server, &visitor)
            } catch {
                await http.shutdown()
                throw error
            }
            await http.shutdown()
        }
    }

    @Test("pages need a session: the admin's bearer token is not one, and the session cookie is no bearer token for the API")
    func credentialsAreSeparate() async throws {
        try await Self.withVisitor { server, visitor in
            let anonymous = try await visitor.request(.get, "/console/apps")
            #expect(anonymous.status == 303 && anonymous.headers["Location"] == "/console/sign-in")
            let bearer = try await visitor.request(
                .get, "/console/apps", headers: [("Authorization", "Bearer \(TestFleetServer.adminToken)")])
            #expect(bearer.status == 303 && bearer.headers["Location"] == "/console/sign-in", "the API's credential opens no page")

            let wrong = try await visitor.signIn(token: "fsa_wrong")
            #expect(wrong.status == 401 && wrong.headers["Set-Cookie"] == nil && visitor.cookie == nil)
            #expect(String(decoding: wrong.body, as: UTF8.self).contains("That is not the admin token."))

            // The token as the file holds it, with its newline (as `curl --data-urlencode token@FILE` sends it).
            let signedIn = try await visitor.signIn(token: TestFleetServer.adminToken + "\n")
            #expect(signedIn.status == 303 && signedIn.headers["Location"] == "/console")
            let cookie = signedIn.headers["Set-Cookie"] ?? ""
            for attribute in ["Path=/console", "Max-Age=28800", "HttpOnly", "SameSite=Strict"] {
                #expect(cookie.contains("; \(attribute)"), "\(attribute) in \(cookie)")
            }
            #expect(!cookie.contains("Secure"), "plain HTTP on loopback: a Secure cookie would never be sent back")
            #expect(!cookie.contains(TestFleetServer.adminToken))

            let page = try await visitor.request(.get, "/console/apps")
            #expect(page.status == 200 && page.headers["Content-Type"] == "text/html; charset=utf-8")
            #expect(page.headers["Cache-Control"] == "no-store")

            // The cookie is not a credential of the API.
            let api = try await visitor.request(.get, "/v1/admin/devices")
            #expect(api.status == 401)
            #expect(!server.log.all.joined().contains(TestFleetServer.adminToken))
            #expect(!server.log.all.joined().contains(visitor.cookie ?? "-"), "the session cookie is a credential: never logged")
        }
    }

    @Test("sign-ins, failed and not, and console forms are in the audit trail, which the audit page shows escaped, refusals marked")
    func auditTrail() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            #expect(try await visitor.signIn(token: "fsa_wrong-token-0123456789").status == 401)
            #expect(try await visitor.signIn().status == 303)
            let csrf = try await visitor.csrf()
            let made = try await visitor.request(
                .post, "/console/tokens", form: [("csrf", csrf), ("apps", "kiosk"), ("uses", "1"), ("expiresIn", "3600")])
            #expect(made.status == 200)
            // An API write whose reason would be markup if it were not escaped.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Hi"], message: "<script>x</script>")
            let entries = try await server.admin.audit().entries
            let signIns = entries.filter { $0.action == "console.sign-in" }
            #expect(signIns.map(\.status) == [401, 303] && signIns.map(\.actor) == ["-", Authenticator.bootstrapOwner])
            #expect(signIns[1].credential.hasPrefix("session cs-"))
            #expect(entries.contains { $0.action == "console.post /console/tokens" && $0.outcome == "ok" })
            let page = String(decoding: try await visitor.request(.get, "/console/audit").body, as: UTF8.self)
            #expect(page.contains("<h1>Audit trail</h1>") && page.contains("<tr class=\"refused\">"))
            #expect(page.contains("&lt;script&gt;x&lt;/script&gt;") && !page.contains("<script>x"))
            let filtered = String(decoding: try await visitor.request(.get, "/console/audit?action=patchValues").body, as: UTF8.self)
            #expect(filtered.contains("patchValues") && !filtered.contains("console.sign-in"))
            // Without a session, the page sends the browser to sign in.
            visitor.cookie = nil
            #expect(try await visitor.request(.get, "/console/audit").status == 303)
        }
    }

    @Test("behind a TLS proxy the cookie is Secure; every answer carries a policy that allows no inline script or style")
    func headers() async throws {
        try await Self.withVisitor { _, visitor in
            let signedIn = try await visitor.signIn(headers: [("X-Forwarded-Proto", "https")])
            #expect(signedIn.headers["Set-Cookie"]?.hasSuffix("; Secure") == true)
            for path in ["/console/sign-in", "/console/apps", "/console/devices", "/console/tokens", "/console/apps/none"] {
                let answer = try await visitor.request(.get, path)
                let policy = answer.headers["Content-Security-Policy"] ?? ""
                #expect(
                    policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && policy.contains("style-src 'self'"),
                    "\(path)")
                #expect(policy.contains("frame-ancestors 'none'") && policy.contains("form-action 'self'"), "\(path)")
                #expect(!policy.contains("unsafe"), "\(path): \(policy)")
                #expect(answer.headers["X-Content-Type-Options"] == "nosniff", "\(path)")
                let page = String(decoding: answer.body, as: UTF8.self)
                #expect(
                    !page.contains("<script>") && !page.contains(" style=") && !page.contains(" onclick="),
                    "\(path): inline script or style")
            }
            let script = try await visitor.request(.get, "/console/assets/console.js")
            #expect(script.status == 200 && script.headers["Content-Type"] == "text/javascript; charset=utf-8")
            #expect(script.headers["Cache-Control"]?.contains("immutable") == true)
        }
    }

    @Test("a form without the session's CSRF token, from another origin, or after sign-out is refused and changes nothing")
    func csrf() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            _ = try await visitor.signIn()
            let csrf = try await visitor.csrf("/console/apps/kiosk")
            #expect(csrf.count == 43)
            let path = "/console/apps/kiosk/settings?scope=app"
            for (form, headers) in [
                ([("v:/title", "missing token")], [(String, String)]()),
                ([("csrf", "forged"), ("v:/title", "forged token")], []),
                ([("csrf", csrf), ("v:/title", "cross-site")], [("Origin", "https://evil.example")]),
            ] {
                let refused = try await visitor.request(.post, path, form: form, headers: headers)
                #expect(refused.status == 403, "\(form)")
            }
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values.isEmpty)

            let saved = try await visitor.request(
                .post, path, form: [("csrf", csrf), ("v:/title", "Lobby")], headers: [("Origin", server.baseURL)])
            #expect(saved.status == 303 && saved.headers["Location"] == "/console/apps/kiosk?scope=app&saved=1")
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Lobby"])

            let signOut = try await visitor.request(.post, "/console/sign-out", form: [("csrf", csrf)])
            #expect(signOut.status == 303 && signOut.headers["Set-Cookie"]?.contains("Max-Age=0") == true)
            // The same cookie and token, replayed after signing out.
            let replay = try await visitor.request(.post, path, form: [("csrf", csrf), ("v:/title", "replayed")])
            #expect(replay.status == 403)
            #expect(try await visitor.request(.get, "/console/apps").status == 303)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Lobby"])
        }
    }

    @Test("a form's values that break the schema come back by field, next to it, and nothing is stored")
    func fieldErrors() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            _ = try await visitor.signIn()
            let csrf = try await visitor.csrf("/console/apps/kiosk")
            let path = "/console/apps/kiosk/settings?scope=app"
            let page = try await visitor.request(.post, path, form: [("csrf", csrf), ("v:/volume", "12"), ("v:/title", "Fine")])
            #expect(page.status == 422)
            let html = String(decoding: page.body, as: UTF8.self)
            #expect(html.contains(#"<div class="field invalid" data-pointer="/volume">"#))
            #expect(html.contains("must be &lt;= 10 (got 12)"))
            #expect(html.contains(#"value="Fine""#), "the other values are shown again as entered")
            let json = try await visitor.request(
                .post, path, form: [("csrf", csrf), ("v:/volume", "ten")], headers: [("Accept", "application/json")])
            #expect(json.status == 422)
            let answer = try JSONParser.parse(json.body)
            #expect(answer["saved"] == false)
            #expect(answer["errors"]?.arrayValue?.first?["pointer"] == "/volume")
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values.isEmpty)
        }
    }

    @Test("a device is disabled, enabled and deleted from its page; deleting needs the confirmation box")
    func manageDevice() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            _ = try await visitor.signIn()
            let page = "/console/devices/\(device.id)"
            let csrf = try await visitor.csrf(page)
            let disabled = try await visitor.request(.post, page + "/disable", form: [("csrf", csrf)])
            #expect(disabled.status == 200 && String(decoding: disabled.body, as: UTF8.self).contains("The device is disabled."))
            #expect(try await server.admin.device(id: device.id).disabled)
            let refused = await refusal { try await device.client.settings(app: "kiosk") }
            #expect(refused?.status == 401, "a disabled device's token is refused")
            _ = try await visitor.request(.post, page + "/enable", form: [("csrf", csrf)])
            #expect(try await server.admin.device(id: device.id).disabled == false)

            let unconfirmed = try await visitor.request(.post, page + "/delete", form: [("csrf", csrf)])
            #expect(unconfirmed.status == 400)
            #expect(try await server.admin.allDevices().devices.map(\.id) == [device.id])
            let deleted = try await visitor.request(.post, page + "/delete", form: [("csrf", csrf), ("confirm", "yes")])
            #expect(deleted.status == 303 && deleted.headers["Location"] == "/console/devices")
            #expect(try await server.admin.allDevices().devices.isEmpty)
            #expect(try await visitor.request(.get, page).status == 404)
        }
    }

    @Test("a device's page shows what it says of itself (escaped) and the agent policy with the scope of each key")
    func deviceFactsAndPolicy() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["lobby"])
            _ = try await visitor.signIn()
            let page = "/console/devices/\(device.id)"
            var html = String(decoding: try await visitor.request(.get, page).body, as: UTF8.self)
            #expect(html.contains("It has not reported its facts yet.") && html.contains("No agent policy reaches it"))
            _ = try await device.client.reportDeviceInfo([
                "os": ["prettyName": "Debian <b>12</b>"], "apps": ["kiosk": ["version": "2.3.1"]],
            ])
            _ = try await server.admin.patchPolicy(scope: .group("lobby"), ["logLevel": "debug"])
            html = String(decoding: try await visitor.request(.get, page).body, as: UTF8.self)
            #expect(html.contains("<code>os.prettyName</code></th><td>Debian &lt;b&gt;12&lt;/b&gt;</td>"), "\(html)")
            #expect(html.contains("<code>apps.kiosk.version</code></th><td>2.3.1</td>"))
            #expect(html.contains("<code>logLevel</code></th><td>debug</td>") && html.contains("<td>group:lobby</td>"))
        }
    }

    @Test("the groups page shows each group's query (escaped) and member count; a group's page lists its members")
    func groupsPages() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            let lobby = try await server.enrollDevice(groups: ["lobby"])
            let pi = try await server.enrollDevice()
            _ = try await pi.client.reportDeviceInfo(["apps": ["kiosk": ["version": "<2>"]]])
            _ = try await server.admin.defineGroup(name: "odd<one>", where: [try DeviceInfoFilter(parsing: "apps.kiosk.version~^<")])
            _ = try await visitor.signIn()
            var html = String(decoding: try await visitor.request(.get, "/console/groups").body, as: UTF8.self)
            #expect(html.contains(#"<a href="/console/groups">Groups</a>"#) || html.contains(#"href="/console/groups""#))
            #expect(
                html.contains(
                    #"<a href="/console/groups/odd%3Cone%3E">odd&lt;one&gt;</a></th><td>by the query <code>apps.kiosk.version~^&lt;</code></td><td class="num">1</td>"#
                ), "\(html)")
            #expect(html.contains(#"<a href="/console/groups/lobby">lobby</a></th><td>by hand</td><td class="num">1</td>"#))
            html = String(decoding: try await visitor.request(.get, "/console/groups/odd%3Cone%3E").body, as: UTF8.self)
            #expect(html.contains("<h1>Group <code>odd&lt;one&gt;</code></h1>") && html.contains(#"href="/console/devices/\#(pi.id)""#))
            #expect(!html.contains(lobby.id))
            let missing = try await visitor.request(.get, "/console/groups/nowhere")
            #expect(missing.status == 404)
        }
    }

    @Test("the history page: writes newest first, secrets masked; the rollout with its waves; abort and resume need the form's CSRF token")
    func historyAndRollout() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            let enrolled = try await server.enrollDevice(groups: ["w1"])
            var device = PlayedDevice(id: enrolled.id, client: enrolled.client)
            try await device.fetch()
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["pin": "4711"], message: "a <new> pin")
            _ = try await server.admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged <b>"], waves: [.group("w1"), .everyone]))
            try await device.fetch()
            try await device.report(.error, "cannot show <it>")
            try await server.service.rollouts.superviseRollouts()
            _ = try await visitor.signIn()
            let path = "/console/apps/kiosk/history"
            let page = String(decoding: try await visitor.request(.get, path).body, as: UTF8.self)
            #expect(page.contains("data-phase=\"paused\""))
            #expect(page.contains("cannot show &lt;it&gt;") && !page.contains("cannot show <it>"), "report messages are escaped")
            #expect(page.contains("a &lt;new&gt; pin") && page.contains("pin=&quot;********&quot;") && !page.contains("4711"))
            #expect(page.contains("Resume: accept this wave") && page.contains("Abort: every device back"))
            let revisions = page.components(separatedBy: "<tr><td class=\"num\">").dropFirst().map { $0.prefix { $0.isNumber } }
            #expect(revisions.first == "4" && revisions.last == "1", "newest first: \(revisions)")
            let apps = String(decoding: try await visitor.request(.get, "/console/apps").body, as: UTF8.self)
            #expect(apps.contains("data-rollout-app=\"kiosk\"") && apps.contains("<strong>paused</strong> at wave 1 of 2"))

            let forged = try await visitor.request(.post, "/console/apps/kiosk/rollout/abort", form: [("csrf", "forged")])
            #expect(forged.status == 403)
            #expect(try await server.admin.rollout(app: "kiosk").phase == .paused)
            let csrf = try await visitor.csrf(path)
            let resumed = try await visitor.request(.post, "/console/apps/kiosk/rollout/resume", form: [("csrf", csrf)])
            #expect(resumed.status == 303 && resumed.headers["Location"] == path + "?done=running")
            let status = try await server.admin.rollout(app: "kiosk")
            #expect(status.currentWave == 1 && status.actor == Authenticator.bootstrapOwner)
            let aborted = try await visitor.request(.post, "/console/apps/kiosk/rollout/abort", form: [("csrf", csrf)])
            #expect(aborted.status == 303 && aborted.headers["Location"] == path + "?done=aborted")
            let history = try await server.admin.history(app: "kiosk").entries
            #expect(history.last?.actor == Authenticator.bootstrapOwner && history.last?.message.hasSuffix("aborted") == true)
            let again = try await visitor.request(.post, "/console/apps/kiosk/rollout/resume", form: [("csrf", csrf)])
            #expect(again.status == 409 && String(decoding: again.body, as: UTF8.self).contains("has no active rollout"))
        }
    }

    @Test("a form drawn before someone else changed the settings is refused with 409, not saved over their change")
    func staleForm() async throws {
        try await Self.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            _ = try await visitor.signIn()
            let page = String(decoding: try await visitor.request(.get, "/console/apps/kiosk").body, as: UTF8.self)
            let csrf = try await visitor.csrf("/console/apps/kiosk")
            guard let range = page.range(of: "name=\"drawn\" value=\"") else {
                Issue.record("no drawn digest in the form")
                return
            }
            let drawn = String(page[range.upperBound...].prefix { $0 != "\"" })
            // Meanwhile another admin changes the title.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Theirs"])
            let stale = try await visitor.request(
                .post, "/console/apps/kiosk/settings?scope=app",
                form: [("csrf", csrf), ("drawn", drawn), ("v:/title", "Welcome"), ("v:/volume", "3")])
            #expect(stale.status == 409)
            #expect(String(decoding: stale.body, as: UTF8.self).contains("changed after this page was drawn"))
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values == ["title": "Theirs"])
        }
    }

    @Test("wrong admin tokens at sign-in count as failed logins: the address is slowed down like the API's, the right token still gets in")
    func signInLimits() async throws {
        // Five failures, then one more an hour: however slowly the test runs, the bucket stays empty.
        let limits = RequestLimits.Configuration(failures: .init(rate: 1.0 / 3600, burst: 5))
        try await Self.withVisitor(limits: limits) { _, visitor in
            var statuses: [Int] = []
            for attempt in 0..<7 { statuses.append(try await visitor.signIn(token: "fsa_guess-\(attempt)").status) }
            #expect(statuses == [401, 401, 401, 401, 401, 429, 429])
            #expect(visitor.cookie == nil)
            // The token is checked first: an admin behind the same address (a NAT, an office) is
            // never refused for someone else's guesses (issue 34).
            #expect(try await visitor.signIn().status == 303)
            #expect(visitor.cookie != nil)
        }
    }

    @Test("the roll-up: devices on the newest revision, and what they reported about it", arguments: StoreKind.allCases)
    func rollup(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let first = try await server.enrollDevice()
            let second = try await server.enrollDevice(groups: ["lobby"])
            _ = try await server.enrollDevice()  // never fetches
            for (device, state) in [(first, StatusReport.State.applied), (second, .error)] {
                let settings = try await device.client.settings(app: "kiosk")
                try await device.client.reportStatus(
                    app: "kiosk", StatusReport(revision: settings?.revision ?? 0, schemaVersion: 1, state: state, source: .agent))
            }
            var kiosk = try await ConsoleQueries(server.service).overview().apps.first { $0.app == "kiosk" }
            #expect(kiosk?.devices == 3 && kiosk?.onNewest == 2)
            #expect(kiosk?.states == [.applied: 1, .error: 1, .waiting: 1])

            // A change for the lobby: the second device's report is about an older revision now.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 2])
            kiosk = try await ConsoleQueries(server.service).overview().apps.first { $0.app == "kiosk" }
            #expect(kiosk?.onNewest == 1)
            #expect(kiosk?.states == [.applied: 1, .waiting: 2])
            let overview = try await ConsoleQueries(server.service).overview()
            let standing = overview.standings[second.id]?["kiosk"]
            #expect(standing?.servedIsNewest == false && standing?.latest?.report.state == .error)
            // The Device page reads one device alone, and sees what the fleet's overview sees.
            for device in [first, second] {
                let alone = try await ConsoleQueries(server.service).standings(deviceID: device.id)
                #expect(alone.standings == overview.standings[device.id] ?? [:])
            }
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

@Suite("Console: webhooks")
struct ConsoleWebhookTests {
    @Test("the webhooks page shows each subscription's dead messages, escaped, and sends them again; never a secret")
    func deadLettersAndRedelivery() async throws {
        try await ConsoleRouteTests.withVisitor { server, visitor in
            let made = try await server.service.webhooks.create(
                WebhookRequest(url: "https://hooks.example.com/in?<b>", events: ["metadata.stored"]), actor: "ada")
            try await server.putKioskMetadata()
            // A day of failures, as the dispatcher would have recorded them.
            let store = server.service.context.store
            let claimed = try #require(
                try await store.claimOutboxEntries(now: server.service.now, claimedUntil: server.service.now + 60, limit: 5).first)
            var tried = claimed.entry
            tried.firstAttemptAt = server.service.now
            let dead = tried.after(.failed("couldNotConnect"), now: server.service.now + 90_000, fraction: 0.5)
            #expect(dead.state == .dead)
            #expect(try await store.recordOutboxAttempt(dead, claimedUntil: server.service.now + 60))
            #expect(try await visitor.signIn().status == 303)
            let page = String(decoding: try await visitor.request(.get, "/console/webhooks").body, as: UTF8.self)
            #expect(
                page.contains("<h1>Webhooks</h1>") && page.contains("<strong>1 dead</strong>") && page.contains("<tr class=\"refused\">"))
            #expect(page.contains("https://hooks.example.com/in?&lt;b&gt;") && !page.contains("in?<b>"))
            #expect(page.contains("couldNotConnect") && page.contains("href=\"/console/webhooks\""))
            #expect(!page.contains(made.secret) && !page.contains(String(made.secret.dropFirst(6))))
            let csrf = try await visitor.csrf("/console/webhooks")
            let sent = try await visitor.request(.post, "/console/webhooks/\(made.info.id)/redeliver", form: [("csrf", csrf)])
            #expect(sent.status == 303 && sent.headers["Location"] == "/console/webhooks?redelivered=1")
            let again = try await server.admin.webhook(id: made.info.id)
            #expect(again.messages.map(\.state) == ["pending"] && again.webhook.dead == 0)
            // Without the CSRF token, nothing is sent again.
            let forged = try await visitor.request(.post, "/console/webhooks/\(made.info.id)/redeliver", form: [("csrf", "forged")])
            #expect(forged.status == 403)
        }
    }
}
