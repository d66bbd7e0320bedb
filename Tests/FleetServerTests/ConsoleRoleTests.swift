import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

/// The console as people with roles use it: signed in with a name and password, each page and
/// form allowed by the same check as the API's, listings leaving out what the role may not see.
@Suite("The console for people with roles")
struct ConsoleRoleTests {
    typealias Visitor = ConsoleRouteTests.Visitor
    static let password = "a console test's password"

    /// Signs `visitor` in with a name and password; returns the answer's status.
    static func signIn(_ visitor: inout Visitor, name: String, password: String = Self.password) async throws -> Int {
        let answer = try await visitor.request(.post, "/console/sign-in", form: [("name", name), ("password", password)])
        if let setCookie = answer.headers["Set-Cookie"],
            let value = setCookie.split(separator: ";").first?.split(separator: "=", maxSplits: 1).last
        {
            visitor.cookie = String(value)
        }
        return answer.status
    }

    static func person(_ server: TestFleetServer, _ name: String, role: Role, apps: [String] = []) async throws {
        _ = try await server.admin.createAccount(
            AccountRequest(name: name, kind: .person, role: role, scope: apps.isEmpty ? nil : AccountScope(apps: apps)))
        try await server.admin.setPassword(account: name, to: Self.password)
    }

    static func text(_ response: HTTPClient.Response) -> String { String(decoding: response.body, as: UTF8.self) }

    @Test("an editor of kiosk sees and changes kiosk only; a viewer reads and is refused every form; each refusal is audited")
    func rolesInTheConsole() async throws {
        try await ConsoleRouteTests.withVisitor { server, visitor in
            try await server.putKioskMetadata()
            let payments = TestMetadata.kiosk(version: 1).replacing("\"app\": \"kiosk\"", with: "\"app\": \"payments\"")
            _ = try await server.admin.putMetadata(app: "payments", document: Array(payments.utf8))
            let kioskDevice = try await server.enrollDevice(apps: ["kiosk"])
            let paymentsDevice = try await server.enrollDevice(apps: ["payments"])
            try await Self.person(server, "ed", role: .editor, apps: ["kiosk"])
            try await Self.person(server, "vi", role: .viewer)

            #expect(try await Self.signIn(&visitor, name: "ed", password: "not the password") == 401)
            #expect(visitor.cookie == nil)
            #expect(try await Self.signIn(&visitor, name: "ed") == 303)
            let apps = Self.text(try await visitor.request(.get, "/console/apps"))
            #expect(apps.contains("data-app=\"kiosk\"") && !apps.contains("data-app=\"payments\""))
            let devices = Self.text(try await visitor.request(.get, "/console/devices"))
            #expect(devices.contains(kioskDevice.id) && !devices.contains(paymentsDevice.id))
            #expect(try await visitor.request(.get, "/console/apps/payments").status == 403)
            #expect(try await visitor.request(.get, "/console/devices/\(paymentsDevice.id)").status == 404)
            #expect(try await visitor.request(.get, "/console/people").status == 403)
            #expect(try await visitor.request(.get, "/console/audit").status == 403)
            // The navigation offers only what the role may open; an editor lands on the apps.
            #expect(
                !apps.contains("href=\"/console/people\"") && !apps.contains("href=\"/console/audit\"")
                    && apps.contains("href=\"/console/account\""))
            #expect(try await visitor.request(.get, "/console").headers["Location"] == "/console/apps")
            let csrf = try await visitor.csrf("/console/apps/kiosk")
            let saved = try await visitor.request(
                .post, "/console/apps/kiosk/settings?scope=app", form: [("csrf", csrf), ("v:/title", "By ed")])
            #expect(saved.status == 303)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values["title"] == "By ed")
            let refused = try await visitor.request(
                .post, "/console/apps/payments/settings?scope=app", form: [("csrf", csrf), ("v:/title", "Not ed's")])
            #expect(refused.status == 403 && Self.text(refused).contains("payments"))
            #expect(try await server.admin.values(app: "payments", scope: "app").values["title"] == nil)
            let history = try await server.admin.history(app: "kiosk").entries
            #expect(history.last?.actor == "ed", "the history says who: the account's name")

            visitor.cookie = nil
            #expect(try await Self.signIn(&visitor, name: "vi") == 303)
            #expect(Self.text(try await visitor.request(.get, "/console/apps")).contains("data-app=\"payments\""))
            let viewerCSRF = try await visitor.csrf("/console/apps/kiosk")
            let write = try await visitor.request(
                .post, "/console/apps/kiosk/settings?scope=app", form: [("csrf", viewerCSRF), ("v:/title", "By vi")])
            #expect(write.status == 403 && Self.text(write).contains("write-values"))
            // Reviewing a metadata upload reads every stored value of the app: it takes the right to store one.
            let review = try await visitor.request(
                .post, "/console/apps/kiosk/metadata", form: [("csrf", viewerCSRF), ("action", "review"), ("document", "{}")])
            #expect(review.status == 403 && Self.text(review).contains("write-metadata"))
            let disable = try await visitor.request(.post, "/console/devices/\(kioskDevice.id)/disable", form: [("csrf", viewerCSRF)])
            #expect(disable.status == 403)
            #expect(try await server.admin.values(app: "kiosk", scope: "app").values["title"] == "By ed")

            // An auditor lands on the audit trail, and sees no other section.
            try await Self.person(server, "au", role: .auditor)
            visitor.cookie = nil
            #expect(try await Self.signIn(&visitor, name: "au") == 303)
            #expect(try await visitor.request(.get, "/console").headers["Location"] == "/console/audit")
            let auditPage = Self.text(try await visitor.request(.get, "/console/audit"))
            #expect(auditPage.contains("<h1>Audit trail</h1>") && !auditPage.contains("href=\"/console/apps\""))
            #expect(
                try await visitor.request(.get, "/console/events").status == 403, "an auditor hears nothing of the fleet's live changes")

            let trail = try await server.admin.audit().entries
            #expect(trail.contains { $0.actor == "ed" && $0.action == "console.get /console/apps/payments" && $0.status == 403 })
            #expect(trail.contains { $0.actor == "vi" && $0.action == "console.post /console/apps/kiosk/settings" && $0.status == 403 })
            #expect(trail.contains { $0.actor == "ed" && $0.action == "console.sign-in" && $0.credential.hasPrefix("session cs-") })
            #expect(
                trail.contains { $0.actor == "ed" && $0.action == "console.sign-in" && $0.status == 401 && $0.credential == "password" })
        }
    }

    @Test("an owner adds a person and changes roles on the People page; a role change ends that person's session at once")
    func peoplePage() async throws {
        try await ConsoleRouteTests.withVisitor { server, owner in
            _ = try await owner.signIn()
            let csrf = try await owner.csrf("/console/people")
            let added = try await owner.request(
                .post, "/console/people",
                form: [("csrf", csrf), ("name", "newbie"), ("displayName", "New Bie"), ("role", "viewer"), ("password", Self.password)])
            #expect(added.status == 303)
            #expect(try await server.admin.account(name: "newbie").role == .viewer)
            let short = try await owner.request(
                .post, "/console/people", form: [("csrf", csrf), ("name", "other"), ("role", "viewer"), ("password", "short")])
            #expect(short.status == 400)
            #expect((try? await server.admin.account(name: "other")) == nil, "no account without a password it can sign in with")

            var newbie = Visitor(server: server, http: owner.http)
            #expect(try await Self.signIn(&newbie, name: "newbie") == 303)
            #expect(try await newbie.request(.get, "/console/apps").status == 200)
            let promoted = try await owner.request(
                .post, "/console/people/newbie", form: [("csrf", csrf), ("action", "role"), ("role", "admin")])
            #expect(promoted.status == 303)
            #expect(try await server.admin.account(name: "newbie").role == .admin)
            let after = try await newbie.request(.get, "/console/apps")
            #expect(after.status == 303 && after.headers["Location"] == "/console/sign-in", "a new role: sign in again")
            let disabled = try await owner.request(.post, "/console/people/newbie", form: [("csrf", csrf), ("action", "disable")])
            #expect(disabled.status == 303)
            #expect(try await server.admin.account(name: "newbie").disabled)
            #expect(try await Self.signIn(&newbie, name: "newbie") == 401)
            // The last owner cannot be demoted from the page either.
            let last = try await owner.request(
                .post, "/console/people/owner", form: [("csrf", csrf), ("action", "role"), ("role", "viewer")])
            #expect(last.status == 409)
            // The trail says what each form changed.
            let trail = try await server.admin.audit().entries.filter { $0.action.hasPrefix("console.post /console/people") }
            #expect(trail.contains { $0.target == "account=newbie action=role role=admin" && $0.status == 303 })
            #expect(trail.contains { $0.target.hasPrefix("account=newbie role=viewer") && $0.status == 303 })
            #expect(trail.contains { $0.target == "account=owner action=role role=viewer" && $0.status == 409 })
        }
    }
}
