import FleetConsole
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird

extension ConsoleRoutes {
    /// The signed-in account's own page (password, second factor) and, for those allowed to
    /// manage accounts, the People page.
    func defineAccountPages(_ on: (HTTPRequest.Method, String, @escaping Handler) -> Void) {
        on(.get, "console/account") { request, context in
            try await signedIn(request, context) { signed, _ in
                let notice = request.uri.queryParameters.get("done").map { ConsoleFrame.notice(Self.accountNotices[String($0)] ?? "Done.") }
                return page(ConsolePages.account(signed.caller.account, csrf: signed.csrf, notice: notice))
            }
        }
        on(.post, "console/account/password") { request, context in
            try await signedIn(request, context, form: true) { signed, fields in
                do {
                    try await service.accounts.changeOwnPassword(
                        PasswordChange(current: fields["current"], password: fields["password"] ?? ""), by: signed.caller)
                } catch let error as ServiceError where error.status == .unauthorized || error.status == .badRequest {
                    return page(
                        ConsolePages.account(
                            signed.caller.account, csrf: signed.csrf, notice: ConsoleFrame.notice(error.message, error: true)),
                        status: error.status)
                }
                return redirect("/console/account?done=password")
            }
        }
        on(.post, "console/account/two-factor") { request, context in
            try await signedIn(request, context, form: true) { signed, _ in
                page(ConsolePages.twoFactorSetup(try await service.accounts.startTwoFactor(by: signed.caller), csrf: signed.csrf))
            }
        }
        on(.post, "console/account/two-factor/confirm") { request, context in
            try await signedIn(request, context, form: true) { signed, fields in
                do {
                    let codes = try await service.accounts.confirmTwoFactor(
                        code: (fields["code"] ?? "").filter { !$0.isWhitespace }, by: signed.caller)
                    return page(ConsolePages.recoveryCodes(codes, csrf: signed.csrf))
                } catch let error as ServiceError where error.status == .badRequest {
                    // A wrong first code: a new secret to scan, as the old page's is spent with the form.
                    let again = try await service.accounts.startTwoFactor(by: signed.caller)
                    return page(ConsolePages.twoFactorSetup(again, csrf: signed.csrf, error: error.message), status: .badRequest)
                }
            }
        }
        on(.get, "console/people") { request, context in
            try await signedIn(request, context, .listAccounts) { signed, _ in
                let notice = request.uri.queryParameters.get("done").flatMap { Self.peopleNotices[String($0)] }.map {
                    ConsoleFrame.notice($0)
                }
                return page(ConsolePages.people(try await service.accounts.accounts().accounts, csrf: signed.csrf, notice: notice))
            }
        }
        on(.post, "console/people") { request, context in
            try await signedIn(
                request, context, .createAccount, form: true,
                auditTarget: {
                    "account=\($0["name"] ?? "") role=\($0["role"] ?? "") apps=\($0["apps"] ?? "") groups=\($0["groups"] ?? "")"
                }
            ) { signed, fields in
                try await addPerson(fields, signed: signed)
            }
        }
        on(.post, "console/people/:name") { request, context in
            try await signedIn(
                request, context, .updateAccount, form: true,
                auditTarget: { "account=\(context.parameters.get("name") ?? "") action=\($0["action"] ?? "") role=\($0["role"] ?? "")" }
            ) { signed, fields in
                let name = context.parameters.get("name") ?? ""
                var change = AccountRequest()
                switch fields["action"] {
                case "role": change.role = try Self.role(fields["role"])
                case "disable": change.disabled = true
                case "enable": change.disabled = false
                default: throw ServiceError(400, .badRequest, "choose a role to set, or disable or enable the account")
                }
                _ = try await service.accounts.updateAccount(name: name, change)
                return redirect("/console/people?done=changed")
            }
        }
    }

    static let accountNotices = ["password": "Your password is changed; your other sessions have ended."]
    static let peopleNotices = ["added": "The person is added.", "changed": "The account is changed."]

    /// Adds a person with a first password (which they change when they sign in).
    func addPerson(_ fields: FormFields, signed: SignedIn) async throws -> Response {
        let list = { (text: String?) in
            (text ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }.map(String.init)
        }
        let name = String((fields["name"] ?? "")[...].trimmingSpaces())
        let role = try Self.role(fields["role"])
        let request = AccountRequest(
            name: name, displayName: fields["displayName"], kind: .person, role: role,
            scope: role.isScoped ? AccountScope(apps: list(fields["apps"]), groups: list(fields["groups"])) : nil)
        // Made with its first password in one write: never an account without one it can sign in with.
        _ = try await service.accounts.createAccount(request, password: fields["password"] ?? "")
        return redirect("/console/people?done=added")
    }

    static func role(_ text: String?) throws(ServiceError) -> Role {
        guard let text, let role = Role(rawValue: text) else { throw ServiceError(400, .badRequest, "choose one of the roles") }
        return role
    }
}
