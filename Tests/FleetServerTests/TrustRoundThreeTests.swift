import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetStoreSQLite
import FleetTestSupport
import Foundation
import NIOCore
import Testing

/// Issue 34's attacks on the server, performed over HTTP against the real server: clients behind
/// one dual-stack listener, guesses at one address or with one credential, a device writing
/// nothing in a loop, and what every answer tells a browser.
@Suite("Trust, round three: limits, no-op writes, history pages")
struct TrustRoundThreeTests {
    /// A client that connects from `address` (a loopback address other than 127.0.0.1).
    static func withClient<T>(from address: String, _ body: (HTTPClient) async throws -> T) async throws -> T {
        try await withHTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0, sourceAddress: address), body)
    }

    static func request(
        _ http: HTTPClient, _ server: TestFleetServer, _ method: HTTPClient.Method, _ path: String, token: String? = nil,
        headers: HTTPClient.Headers = [:], body: String? = nil
    ) async throws -> HTTPClient.Response {
        var request = HTTPClient.Request(method: method, url: server.baseURL + path, headers: headers, body: body.map { Array($0.utf8) })
        if let token { request.headers["Authorization"] = "Bearer " + token }
        return try await http.execute(request)
    }

    static func signIn(_ http: HTTPClient, _ server: TestFleetServer, token: String) async throws -> HTTPClient.Response {
        try await request(
            http, server, .post, "/console/sign-in", headers: ["Content-Type": "application/x-www-form-urlencoded"],
            body: "token=" + token)
    }

    static func enroll(_ http: HTTPClient, _ server: TestFleetServer, token: String) async throws -> HTTPClient.Response {
        try await request(
            http, server, .post, "/v1/enroll", headers: ["Content-Type": "application/json"],
            body: #"{"enrollmentToken": "\#(token)", "requestId": "\#(newRequestID())"}"#)
    }

    @Test(
        "on a [::] listener each IPv4 client has a bucket of its own: one guessing address does not refuse enrollment or sign-in at others"
    )
    func dualStackListener() async throws {
        try await TestFleetServer.with(host: "::", limits: .init(failures: .init(rate: 0.01, burst: 20))) { server in
            try await server.putKioskMetadata()
            let enrollment = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"]))
            let statuses = try await Self.withClient(from: "127.0.0.2") { http in
                var statuses: [Int] = []
                for attempt in 0..<25 {
                    statuses.append(
                        try await Self.request(http, server, .get, "/v1/apps/kiosk/settings", token: "fsd_guess-\(attempt)").status)
                }
                return statuses
            }
            #expect(statuses == Array(repeating: 401, count: 20) + Array(repeating: 429, count: 5), "\(statuses)")
            let enrolled = try await Self.withClient(from: "127.0.0.3") { http in
                try await Self.enroll(http, server, token: enrollment.enrollmentToken)
            }
            #expect(enrolled.status == 201, "\(String(decoding: enrolled.body, as: UTF8.self))")
            let signedIn = try await Self.withClient(from: "127.0.0.4") { http in
                try await Self.signIn(http, server, token: TestFleetServer.adminToken)
            }
            #expect(signedIn.status == 303)
        }
    }

    @Test("a trusted proxy named by its IPv4 address is recognised on a [::] listener: its clients are counted one by one")
    func trustedProxyOnDualStack() async throws {
        let limits = RequestLimits.Configuration(failures: .init(rate: 0.01, burst: 20), trustedProxies: ["127.0.0.5"])
        try await TestFleetServer.with(host: "::", limits: limits) { server in
            try await server.putKioskMetadata()
            try await Self.withClient(from: "127.0.0.5") { http in
                var guesser: [Int] = []
                for attempt in 0..<22 {
                    let response = try await Self.request(
                        http, server, .get, "/v1/apps/kiosk/settings", token: "fsd_guess-\(attempt)",
                        headers: ["X-Forwarded-For": "203.0.113.7"])
                    guesser.append(response.status)
                }
                #expect(guesser.suffix(2) == [429, 429], "\(guesser)")
                // Another client behind the same proxy is not refused for it.
                let other = try await Self.request(
                    http, server, .get, "/v1/apps/kiosk/settings", token: "fsd_typo", headers: ["X-Forwarded-For": "203.0.113.8"])
                #expect(other.status == 401)
            }
        }
    }

    @Test("behind one address (NAT), a valid enrollment token and the admin token get in after another client's guesses")
    func sharedAddressValidCredentials() async throws {
        try await TestFleetServer.with(limits: .init(failures: .init(rate: 0.01, burst: 20))) { server in
            try await server.putKioskMetadata()
            let enrollment = try await server.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"]))
            try await Self.withClient(from: "127.0.0.6") { http in
                var guesses: [Int] = []
                for attempt in 0..<22 {
                    guesses.append(try await Self.enroll(http, server, token: "fse_guess-\(attempt)").status)
                    guesses.append(try await Self.signIn(http, server, token: "fsa_guess-\(attempt)").status)
                }
                #expect(guesses.suffix(4) == [429, 429, 429, 429], "\(guesses)")
                #expect(try await Self.enroll(http, server, token: enrollment.enrollmentToken).status == 201)
                #expect(try await Self.signIn(http, server, token: TestFleetServer.adminToken).status == 303)
            }
        }
    }

    @Test("one wrong credential tried from many addresses is slowed by its own bucket")
    func oneCredentialManyAddresses() async throws {
        try await TestFleetServer.with(limits: .init(failures: .init(rate: 0.01, burst: 5))) { server in
            var statuses: [Int] = []
            for host in 10..<17 {
                statuses.append(
                    try await Self.withClient(from: "127.0.1.\(host)") { http in
                        try await Self.request(http, server, .get, "/v1/device/policy", token: "fsd_stolen-and-revoked").status
                    })
            }
            #expect(statuses == [401, 401, 401, 401, 401, 429, 429], "\(statuses)")
        }
    }

    @Test("a console sign-in form is read up to 4 KiB, not 4 MiB")
    func signInBodyCap() async throws {
        try await TestFleetServer.with { server in
            let large = try await server.raw(
                .post, "/console/sign-in", headers: ["Content-Type": "application/x-www-form-urlencoded"],
                body: "token=" + String(repeating: "a", count: 8 << 10))
            #expect(large.status == 413)
        }
    }

    @Test("every API answer, refusals too, carries X-Content-Type-Options: nosniff")
    func noSniff() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let answers = [
                try await server.raw(.get, "/v1/apps/kiosk/settings", token: device.token),
                try await server.raw(.get, "/v1/apps/kiosk/settings", token: "fsd_wrong"),
                try await server.raw(.get, "/v1/no/such/route"),
                try await server.raw(.get, "/v1/admin/apps/kiosk/history", token: TestFleetServer.adminToken),
                try await server.raw(.get, "/healthz"),
            ]
            for answer in answers { #expect(answer.headers["X-Content-Type-Options"] == "nosniff", "\(answer.status)") }
        }
    }

    @Test(
        "a device write that changes nothing commits nothing: no history entry, no new revision, no wake-up", arguments: StoreKind.allCases)
    func noOpDeviceWrite(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let first = try #require(try await device.client.settings(app: "kiosk"))
            let written = try await device.client.patchSettings(app: "kiosk", patch: ["volume": 7], basedOn: first.revision)
            let entries = try await server.admin.history(app: "kiosk").entries.count
            // A long-poll waits on the revision just written; no-op writes must not answer it.
            let waiting = Task { try await device.client.settings(app: "kiosk", knownRevision: written.revision, wait: 30) }
            try await server.waitForWaiters(app: "kiosk")
            let writesBefore = server.storeCalls.all.filter { $0 == "write" }.count
            for patch: JSONObject in [[:], ["volume": 7], ["night": .null]] {
                let answer = try await device.client.patchSettings(app: "kiosk", patch: patch, basedOn: written.revision)
                #expect(answer.revision == written.revision && answer.values["volume"] == 7)
            }
            #expect(server.storeCalls.all.filter { $0 == "write" }.count == writesBefore)
            #expect(try await server.admin.history(app: "kiosk").entries.count == entries)
            #expect(await server.waiters(app: "kiosk") == 1)
            // A stale base is still refused, and a real change still lands and wakes it.
            let stale = await refusal { try await device.client.patchSettings(app: "kiosk", patch: [:], basedOn: first.revision) }
            #expect(stale?.status == 409)
            _ = try await device.client.patchSettings(app: "kiosk", patch: ["volume": 8], basedOn: written.revision)
            #expect(try await waiting.value?.values["volume"] == 8)
            #expect(try await server.admin.history(app: "kiosk").entries.count == entries + 1)
        }
    }

    @Test("a device's writes have a rate of their own, well below its reads: 429 with Retry-After, reads go on")
    func deviceWriteRate() async throws {
        try await TestFleetServer.with(limits: .init(perDeviceWrite: .init(rate: 0.01, burst: 5))) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            var revision = try #require(try await device.client.settings(app: "kiosk")).revision
            var statuses: [Int] = []
            for volume in 1...7 {
                let response = try await server.raw(
                    .patch, "/v1/apps/kiosk/settings", token: device.token,
                    headers: ["Content-Type": "application/merge-patch+json", "If-Match": "\"\(revision)\""],
                    body: #"{"volume": \#(volume)}"#)
                statuses.append(response.status)
                if response.status == 200 { revision += 1 }
                if response.status == 429 { #expect((response.headers["Retry-After"].flatMap { Int($0) } ?? 0) >= 1) }
            }
            #expect(statuses == [200, 200, 200, 200, 200, 429, 429], "\(statuses)")
            let facts = try await server.raw(
                .patch, "/v1/device/info", token: device.token, headers: ["Content-Type": "application/merge-patch+json"],
                body: #"{"hostname": "kiosk-1"}"#)
            #expect(facts.status == 429)
            #expect(try await server.raw(.post, "/v1/device/token", token: device.token).status == 429)
            #expect(try await device.client.settings(app: "kiosk")?.values["volume"] == 5)
        }
    }

    @Test(
        "history is read a page at a time (limit, before); a revert past the kept history says how far back it can go",
        arguments: StoreKind.allCases)
    func historyPagesAndFloor(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()  // entry 1
            for volume in 0..<10 {
                _ = try await server.admin.patchValues(
                    app: "kiosk", scope: "app", patch: ["volume": JSONValue(integerLiteral: Int64(volume))])
            }
            #expect(try await server.admin.history(app: "kiosk", limit: 3).entries.map(\.number) == [9, 10, 11])
            #expect(try await server.admin.history(app: "kiosk", before: 9, limit: 3).entries.map(\.number) == [6, 7, 8])
            let badBefore = await refusal { try await server.admin.history(app: "kiosk", before: 0) }
            #expect(badBefore?.status == 400)
            // Keep the newest 4: entries 2…7 go, but for the app scope its newest at the cut (7).
            #expect(try await server.service.admin.pruneHistory(keeping: .init(maximumCount: 4)) == 6)
            #expect(try await server.admin.history(app: "kiosk").entries.map(\.number) == [7, 8, 9, 10, 11])
            #expect(server.log.events("history-pruned").count == 1)
            let tooOld = await refusal { try await server.admin.revert(app: "kiosk", RevertRequest(to: 5)) }
            #expect(
                tooOld?.status == 400 && tooOld?.description.contains("entry 7 at the earliest") == true, "\(String(describing: tooOld))")
            let reverted = try await server.admin.revert(app: "kiosk", RevertRequest(to: 7))
            #expect(reverted.number == 12)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values["volume"] == 5)
            // A cut at an entry that wrote no values (metadata, 13): it goes, and a revert to it
            // still rebuilds the values after it from the bases kept.
            try await server.putKioskMetadata(version: 2)  // 13
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 1])  // 14
            #expect(try await server.service.admin.pruneHistory(keeping: .init(maximumCount: 1)) == 6)
            #expect(try await server.admin.history(app: "kiosk").entries.map(\.number) == [12, 14])
            #expect(try await server.admin.revert(app: "kiosk", RevertRequest(to: 13)).number == 15)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values["volume"] == 5)
            let beforeFloor = await refusal { try await server.admin.revert(app: "kiosk", RevertRequest(to: 12)) }
            #expect(beforeFloor?.status == 400 && beforeFloor?.description.contains("entry 13 at the earliest") == true)
        }
    }

    /// Signs in on `first`, checks the cookie works on `second`, signs out on `first`: the
    /// cookie must then be refused by `second` too.
    static func expectSignOutReaches(_ first: TestFleetServer, _ second: TestFleetServer) async throws {
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0))
        defer { Task { await http.shutdown() } }
        var visitor = ConsoleRouteTests.Visitor(server: first, http: http)
        #expect(try await visitor.signIn().status == 303)
        let elsewhere = ConsoleRouteTests.Visitor(server: second, http: http, cookie: visitor.cookie)
        #expect(try await elsewhere.request(.get, "/console/apps").status == 200)
        let csrf = try await visitor.csrf()
        let signOut = try await visitor.request(.post, "/console/sign-out", form: [("csrf", csrf)])
        #expect(signOut.status == 303)
        for place in [visitor, elsewhere] {
            let refused = try await place.request(.get, "/console/apps")
            #expect(refused.status == 303 && refused.headers["Location"] == "/console/sign-in")
        }
    }

    @Test("a signed-out console cookie stays refused by another instance on the same PostgreSQL database")
    func signOutOnAnotherInstance() async throws {
        try await TestFleetServer.withTwoInstances { first, second in try await Self.expectSignOutReaches(first, second) }
    }

    @Test("a signed-out console cookie stays refused after the server restarts on the same SQLite database")
    func signOutAfterRestart() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteStore(path: directory + "/fleet.sqlite")
        let serve: (@escaping (TestFleetServer) async throws -> Void) async throws -> Void = { body in
            try await TestFleetServer.with(
                store: store, writeLock: nil, storeCalls: CapturedLog(), directory: directory, readTimeout: .seconds(30), limits: .init(),
                maxLongPolls: .max, busyLimit: .max, waitSpread: { $0 }, body)
        }
        // The cookie of the first run, signed out there, is offered to the second.
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true, maxRedirects: 0))
        defer { Task { await http.shutdown() } }
        var cookie: String?
        try await serve { server in
            var visitor = ConsoleRouteTests.Visitor(server: server, http: http)
            #expect(try await visitor.signIn().status == 303)
            let csrf = try await visitor.csrf()
            #expect(try await visitor.request(.post, "/console/sign-out", form: [("csrf", csrf)]).status == 303)
            cookie = visitor.cookie
        }
        try await serve { server in
            let returning = ConsoleRouteTests.Visitor(server: server, http: http, cookie: cookie)
            let refused = try await returning.request(.get, "/console/apps")
            #expect(refused.status == 303 && refused.headers["Location"] == "/console/sign-in")
        }
    }
}
