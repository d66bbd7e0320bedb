import FleetConsole
import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import ServiceLifecycle

/// The admin console under `/console/`: HTML pages drawn from the service, a session cookie
/// from signing in with a name and password (and a second factor's code), or with the admin
/// token file as the bootstrap owner; every page and form allowed by the account's role, as
/// the API's are; a CSRF token in every form, a strict Content Security Policy, and
/// server-sent events for live pages.
///
/// The console and the API never share credentials: console routes read only the session
/// cookie (a bearer token is ignored there), and API routes only the bearer token.
struct ConsoleRoutes: Sendable {
    /// The session cookie's name.
    static let cookieName = "fleetset_console"
    /// The largest form accepted: 4 MiB (a metadata document pasted whole).
    static let formLimit = 4 << 20
    /// The largest sign-in form read.
    static let signInFormLimit = 4 << 10
    /// Every console answer carries these: scripts and styles only from the console itself, no
    /// inline script or style, no framing, forms post only back here.
    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy:
            "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        .xContentTypeOptions: "nosniff",
        HTTPField.Name("Referrer-Policy")!: "same-origin",
        HTTPField.Name("X-Frame-Options")!: "DENY",
        HTTPField.Name("Cross-Origin-Opener-Policy")!: "same-origin",
    ]

    let service: FleetServices
    /// The console's read models over ``service``.
    var queries: ConsoleQueries { ConsoleQueries(service) }
    let limits: RequestLimits
    let logger: Logger
    /// Whether the server speaks TLS itself (the cookie is then `Secure`).
    let tls: Bool
    /// Sign-in through the organization's OpenID Provider, when configured.
    let singleSignOn: SingleSignOn?

    typealias Handler = Routes.Handler

    /// A signed-in request: its session and the account it acts as.
    struct SignedIn: Sendable {
        let session: ConsoleSession
        let caller: Caller
        var csrf: String { session.csrfToken }
    }

    func define(_ on: (HTTPRequest.Method, String, @escaping Handler) -> Void) {
        on(.get, "console") { request, _ in
            guard let signed = try await signedInCaller(request) else { return redirect("/console/sign-in") }
            return redirect(Self.home(for: signed.caller))
        }
        on(.get, "console/sign-in") { request, _ in
            if try await signedInCaller(request) != nil { return redirect("/console") }
            return page(signInPage())
        }
        on(.post, "console/sign-in") { request, context in try await signIn(request, context) }
        on(.get, "console/sign-in/code") { request, _ in
            guard let session = sessionCookie(request), try await service.accounts.awaitsCode(session) else {
                return redirect("/console/sign-in")
            }
            return page(ConsolePages.signInCode(csrf: session.csrfToken))
        }
        on(.post, "console/sign-in/code") { request, context in try await signInCode(request, context) }
        on(.get, "console/assets/:name") { _, context in
            guard let asset = ConsoleAssets.named(context.parameters.get("name") ?? "") else {
                return page(signInPage(error: "No such file."), status: .notFound)
            }
            var headers = Self.securityHeaders
            headers[.contentType] = asset.contentType
            headers[.cacheControl] = "public, max-age=31536000, immutable"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: asset.body)))
        }
        on(.post, "console/sign-out") { request, context in
            try await signedIn(request, context, form: true) { signed, _ in
                try await service.accounts.endConsoleSession(signed.session)
                logger.notice(
                    "console sign-out",
                    metadata: ["event": "console-sign-out", "session": "\(signed.session.id)", "account": "\(signed.caller.name)"])
                var response = redirect("/console/sign-in")
                response.headers[.setCookie] = cookie("", maxAge: 0, request: request)
                return response
            }
        }
        on(.get, "console/apps") { request, context in
            try await signedIn(request, context, .listAllDevices) { signed, _ in
                page(ConsolePages.apps(try await overview(for: signed.caller), csrf: signed.csrf))
            }
        }
        on(.get, "console/apps/:app") { request, context in
            try await signedIn(request, context, .getValues, target: try valuesTarget(request, context)) { signed, _ in
                try await settingsPage(request, app: try app(context), signed: signed)
            }
        }
        on(.post, "console/apps/:app/settings") { request, context in
            try await signedIn(request, context, .patchValues, target: try valuesTarget(request, context), form: true) { signed, fields in
                try await saveSettings(request, app: try app(context), fields: fields, signed: signed)
            }
        }
        on(.get, "console/apps/:app/metadata") { request, context in
            try await signedIn(request, context, .getAdminMetadata, target: OperationTarget(app: try app(context))) { signed, _ in
                let app = try app(context)
                let notice = request.uri.queryParameters.get("stored").map { ConsoleFrame.notice("Version \($0) is stored.") }
                return page(
                    ConsolePages.metadata(
                        app: app, current: try await service.admin.currentMetadata(app: app), review: nil, csrf: signed.csrf,
                        notice: notice))
            }
        }
        on(.post, "console/apps/:app/metadata") { request, context in
            // Reviewing an upload reads every stored value of the app (what it would break): the right to store it.
            try await signedIn(request, context, .putMetadata, target: OperationTarget(app: try app(context)), form: true) {
                signed, fields in
                try await uploadMetadata(app: try app(context), fields: fields, signed: signed)
            }
        }
        on(.get, "console/apps/:app/history") { request, context in
            try await signedIn(request, context, .getHistory, target: OperationTarget(app: try app(context))) { signed, _ in
                let app = try app(context)
                let notice = request.uri.queryParameters.get("done").map { ConsoleFrame.notice("The rollout is \($0).") }
                return page(try await historyPage(app: app, signed: signed, notice: notice))
            }
        }
        for (action, operation) in [("resume", AdminOperation.resumeRollout), ("abort", .abortRollout)] {
            on(.post, "console/apps/:app/rollout/\(action)") { request, context in
                try await signedIn(request, context, operation, target: OperationTarget(app: try app(context)), form: true) { signed, _ in
                    let app = try app(context)
                    do {
                        let rollout =
                            action == "resume"
                            ? try await service.rollouts.resumeRollout(app: app, actor: signed.caller.name)
                            : try await service.rollouts.abortRollout(app: app, actor: signed.caller.name)
                        return redirect("/console/apps/\(app)/history?done=\(rollout.phase.rawValue)")
                    } catch let error as ServiceError where error.status == 409 || error.code == .noRollout {
                        return page(
                            try await historyPage(app: app, signed: signed, notice: ConsoleFrame.notice(error.message, error: true)),
                            status: .conflict)
                    }
                }
            }
        }
        on(.get, "console/devices") { request, context in
            try await signedIn(request, context, .listAllDevices) { signed, _ in
                let parameters = request.uri.queryParameters
                let filter = ConsolePages.DeviceFilter(
                    group: parameters.get("group"), app: parameters.get("app"), state: parameters.get("state"),
                    seen: parameters.get("seen"),
                    page: parameters.get("page").flatMap { Int($0) } ?? 1)
                return page(
                    ConsolePages.devices(try await overview(for: signed.caller), filter: filter, now: service.now, csrf: signed.csrf))
            }
        }
        on(.get, "console/devices/:id") { request, context in
            try await signedIn(request, context, .getDevice, target: deviceTarget(context)) { signed, _ in
                try await devicePage(id: context.parameters.get("id") ?? "", signed: signed, notice: nil)
            }
        }
        on(.post, "console/devices/:id/:action") { request, context in
            let operation: AdminOperation = context.parameters.get("action") == "delete" ? .deleteDevice : .updateDevice
            return try await signedIn(request, context, operation, target: deviceTarget(context), form: true) { signed, fields in
                try await manageDevice(
                    id: context.parameters.get("id") ?? "", action: context.parameters.get("action") ?? "", fields: fields, signed: signed)
            }
        }
        on(.get, "console/groups") { request, context in
            try await signedIn(request, context, .listGroups) { signed, _ in
                page(ConsolePages.groups(try await service.directory.groups(visibleTo: signed.caller), csrf: signed.csrf))
            }
        }
        on(.get, "console/groups/:name") { request, context in
            try await signedIn(request, context, .getGroup) { signed, _ in
                let name = PercentEncoding.decoded(context.parameters.get("name") ?? "") ?? ""
                return page(ConsolePages.group(try await service.directory.group(name: name, visibleTo: signed.caller), csrf: signed.csrf))
            }
        }
        on(.get, "console/tokens") { request, context in
            try await signedIn(request, context, .listEnrollmentTokens) { signed, _ in
                let notice = request.uri.queryParameters.get("revoked").map { ConsoleFrame.notice("Enrollment token \($0) is revoked.") }
                return try await tokensPage(created: nil, signed: signed, notice: notice)
            }
        }
        on(.post, "console/tokens") { request, context in
            try await signedIn(request, context, .createEnrollmentToken, form: true) { signed, fields in
                try await makeToken(fields: fields, signed: signed)
            }
        }
        on(.post, "console/tokens/:id/revoke") { request, context in
            try await signedIn(request, context, .revokeEnrollmentToken, form: true) { _, _ in
                let id = context.parameters.get("id") ?? ""
                try await service.directory.revokeEnrollmentToken(id: id)
                return redirect("/console/tokens?revoked=\(ConsolePages.percentEncoded(id))")
            }
        }
        on(.get, "console/audit") { request, context in
            try await signedIn(request, context, .listAudit) { signed, _ in
                let parameters = request.uri.queryParameters
                let filter = ConsolePages.AuditFilter(
                    who: parameters.get("who"), action: parameters.get("action"), after: parameters.get("after").flatMap { Int64($0) } ?? 0)
                let trail = try await service.audit.entries(
                    AuditQuery(
                        after: max(0, filter.after), actor: filter.who.map { String($0.prefix(64)) },
                        action: filter.action.map { String($0.prefix(128)) },
                        limit: ConsolePages.auditPageSize))
                return page(ConsolePages.audit(trail.entries, filter: filter, csrf: signed.csrf))
            }
        }
        on(.get, "console/webhooks") { request, context in
            try await signedIn(request, context, .listWebhooks) { signed, _ in
                var details: [WebhookDetail] = []
                for webhook in try await service.webhooks.list().webhooks {
                    details.append(try await service.webhooks.show(id: webhook.id))
                }
                let notice = request.uri.queryParameters.get("redelivered").map {
                    ConsoleFrame.notice("\($0) message(s) will be sent again.")
                }
                return page(ConsolePages.webhooks(details, csrf: signed.csrf, notice: notice))
            }
        }
        on(.post, "console/webhooks/:id/redeliver") { request, context in
            try await signedIn(request, context, .redeliverWebhook, form: true) { signed, _ in
                let result = try await service.webhooks.redeliver(
                    id: context.parameters.get("id") ?? "", RedeliverRequest(message: nil), actor: signed.caller.name)
                return redirect("/console/webhooks?redelivered=\(result.redelivered)")
            }
        }
        on(.get, "console/events") { request, context in
            try await signedIn(request, context, .listAllDevices) { signed, _ in events(for: signed) }
        }
        defineAccountPages(on)
        defineSingleSignOn(on)
    }

    // MARK: - Sessions

    /// Signs in with a name and password (then, for an account with a second factor, its code
    /// on the next page), or with the admin token file as the bootstrap owner. Failures count
    /// against the client's address as a failed API authentication does, and against the
    /// account's sign-in budget; every attempt is audited.
    func signIn(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
        let client = limits.client(of: request, context)
        let address = limits.address(of: request, context)
        let fields: FormFields
        do {
            try limits.admit(client: client)
            try checkOrigin(request)
            // A sign-in form is a name and a password, or a token: a few KiB, not a settings form's MiBs.
            fields = try await form(request, limit: Self.signInFormLimit)
        } catch {
            return page(signInPage(error: error.message), status: error.status)
        }
        // A name or token pasted with a newline (the token file's own), or spaces around it, is the same.
        let name = (fields["name"] ?? "").trimmingWhitespace()
        let usesToken = fields["token"] != nil && name.isEmpty
        // Who: the account's name when there is one (never a name typed that is none: it may be a password).
        let actor = usesToken ? "-" : (try await service.accounts.exists(name) ? name : "-")
        let credential = usesToken ? Caller.Credential.adminTokenFile.description : Caller.Credential.password.description
        do {
            let session: ConsoleSession
            var awaitsCode = false
            if usesToken {
                // The token is checked first, cheaply: an admin behind the same address as a
                // guesser (a NAT, an office) is never refused for someone else's guesses.
                guard service.auth.isAdminToken((fields["token"] ?? "").trimmingWhitespace()) else {
                    throw ServiceError(401, .unauthenticated, "That is not the admin token.")
                }
                session = try await service.accounts.startOwnerConsoleSession(address: address)
            } else {
                if let singleSignOn, !singleSignOn.passwordSignIn { throw SingleSignOn.passwordsOff(singleSignOn) }
                // Refused before any hash while the address's failure budget is spent.
                try limits.admitSignIn(client: client)
                (session, awaitsCode) = try await service.accounts.startConsoleSignIn(
                    name: name, password: fields["password"] ?? "", address: address)
            }
            return await started(session, awaitsCode: awaitsCode, action: "console.sign-in", request: request, address: address)
        } catch let error as ServiceError {
            // One message for a wrong name and a wrong password: nothing tells which names exist.
            let message = usesToken ? "That is not the admin token." : "The name or the password is not right."
            return await refused(
                error, action: "console.sign-in", actor: actor, credential: credential, failing: usesToken ? fields["token"] : name,
                client: client, address: address
            ) { signInPage(error: $0 == .unauthorized ? message : $1) }
        }
    }

    /// The answer to a sign-in step that started `session`: logged, audited, and its cookie set
    /// on the way to the code page (`awaitsCode`) or the console.
    func started(_ session: ConsoleSession, awaitsCode: Bool, action: String, request: Request, address: String) async
        -> Response
    {
        logger.notice(
            "console sign-in",
            metadata: [
                "event": "console-sign-in", "outcome": "\(awaitsCode ? "awaits-code" : "signed-in")", "session": "\(session.id)",
                "account": "\(session.account)",
            ])
        await audit(
            action, status: 303, outcome: awaitsCode ? "awaits-code" : "ok", address: address, actor: session.account,
            credential: Caller.Credential.consoleSession(id: session.id).description)
        var response = redirect(awaitsCode ? "/console/sign-in/code" : "/console")
        response.headers[.setCookie] = cookie(
            session.cookie, maxAge: Int(awaitsCode ? ConsoleSession.codeLifetime : ConsoleSession.lifetime), request: request)
        return response
    }

    /// The answer to a refused sign-in step: logged; audited unless it was a limit's 429; a 401
    /// counted against the address and `failing` (the credential tried), which past the limit
    /// answers 429 instead. `page` draws the form again with its message (the status says which).
    func refused(
        _ error: ServiceError, action: String, actor: String, credential: String, failing: String?, client: String, address: String,
        detail: String = "", page draw: (HTTPResponse.Status, String) -> HTML
    ) async -> Response {
        logger.warning(
            "console sign-in refused", metadata: ["event": "console-sign-in", "outcome": "\(error.code.rawValue)", "client": "\(client)"])
        if error.status != .tooManyRequests {
            await audit(
                action, status: Int(error.status.code), outcome: error.code.rawValue, address: address, actor: actor,
                credential: credential,
                detail: detail)
        }
        if error.status == .unauthorized {
            do {
                try limits.recordFailure(client: client, credential: failing)
            } catch {
                return page(draw(.tooManyRequests, error.message), status: .tooManyRequests)
            }
        }
        return page(draw(error.status, error.message), status: error.status)
    }

    /// The second step of a sign-in: the code from the authenticator app, or a recovery code.
    func signInCode(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
        let client = limits.client(of: request, context)
        let address = limits.address(of: request, context)
        do {
            // Limited before the store is read: a made-up cookie costs a guesser a wait, not the server a read.
            try limits.admit(client: client)
            try limits.admitSignIn(client: client)
        } catch {
            return page(signInPage(error: error.message), status: error.status)
        }
        guard let session = sessionCookie(request), try await service.accounts.awaitsCode(session) else {
            return redirect("/console/sign-in")
        }
        let fields: FormFields
        do {
            try checkOrigin(request)
            fields = try await form(request, limit: Self.signInFormLimit)
            guard session.isValidCSRFToken(fields["csrf"]) else {
                throw ServiceError(403, .csrf, "The form did not carry this sign-in's CSRF token; sign in again.")
            }
        } catch let error as ServiceError {
            return page(ConsolePages.signInCode(csrf: session.csrfToken, error: error.message), status: error.status)
        }
        let code = (fields["code"] ?? "").filter { !$0.isWhitespace }
        do {
            // A new session replaces the one that waited for the code (its cookie is worth nothing now).
            let (_, signedIn) = try await service.accounts.finishConsoleSignIn(session, code: code)
            return await started(signedIn, awaitsCode: false, action: "console.sign-in.code", request: request, address: address)
        } catch let error as ServiceError {
            return await refused(
                error, action: "console.sign-in.code", actor: session.account,
                credential: Caller.Credential.consoleSession(id: session.id).description, failing: session.account, client: client,
                address: address
            ) { ConsolePages.signInCode(csrf: session.csrfToken, error: $1) }
        }
    }

    func cookie(_ value: String, maxAge: Int, request: Request) -> String {
        cookie(Self.cookieName, value, path: "/console", sameSite: "Strict", maxAge: maxAge, request: request)
    }

    /// A `Set-Cookie` value: `HttpOnly`, `Secure` when the browser came over TLS (here, or to
    /// the proxy in front).
    func cookie(_ name: String, _ value: String, path: String, sameSite: String, maxAge: Int, request: Request) -> String {
        let secure = tls || request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https"
        return "\(name)=\(value); Path=\(path); Max-Age=\(maxAge); HttpOnly; SameSite=\(sameSite)" + (secure ? "; Secure" : "")
    }

    /// The values of the request's cookies named `name`, in the order sent.
    func cookies(named name: String, in request: Request) -> [String] {
        request.headers[values: .cookie].flatMap { $0.split(separator: ";") }.compactMap { part -> String? in
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            return pair.count == 2 && pair[0] == name[...] ? String(pair[1]) : nil
        }
    }

    /// The session the request's cookie carries and the account it acts as, when the session
    /// is current: not signed out, expired or waiting for its code, and its account not
    /// disabled or changed since (read from the store at every request: on every instance at once).
    func signedInCaller(_ request: Request) async throws -> SignedIn? {
        guard let session = sessionCookie(request), let caller = try await service.accounts.consoleCaller(session) else { return nil }
        return SignedIn(session: session, caller: caller)
    }

    /// The first cookie of the request that reads as a session (checked against its account later).
    func sessionCookie(_ request: Request) -> ConsoleSession? {
        cookies(named: Self.cookieName, in: request).lazy.compactMap(ConsoleSession.init(cookie:)).first
    }

    /// Runs `body` for a signed-in account whose role allows `operation` on `target` (the
    /// same check as the API's). A page without a session sends the browser to sign in; a form
    /// without a session, or without the session's CSRF token, or from another origin, is
    /// refused with 403 and changes nothing. Every form, and every refusal, is audited.
    ///
    /// - Parameter auditTarget: what the audit entry of a form says it was about (a form's
    ///   fields that say what changed: the People page's role, say).
    func signedIn(
        _ request: Request, _ context: FleetRequestContext, _ operation: AdminOperation? = nil,
        target: @autoclosure () throws -> OperationTarget = OperationTarget(), form: Bool = false,
        auditTarget: (FormFields) -> String = { _ in "" },
        _ body: (SignedIn, FormFields) async throws -> Response
    ) async throws -> Response {
        let signed = try await signedInCaller(request)
        var fields = FormFields([])
        let response = try await signedInAnswer(request, signed: signed, operation, target: target(), form: form, fields: &fields, body)
        if form || response.status == .forbidden {
            let outcome = response.status.code < 400 ? "ok" : "refused"
            await audit(
                "console.\(request.method.rawValue.lowercased()) \(request.uri.path)", status: Int(response.status.code), outcome: outcome,
                address: limits.address(of: request, context), actor: signed?.caller.name ?? "-",
                credential: signed.map { Caller.Credential.consoleSession(id: $0.session.id).description } ?? "none",
                target: auditTarget(fields))
        }
        return response
    }

    /// Appends a console action to the audit trail.
    func audit(
        _ action: String, status: Int, outcome: String, address: String, actor: String, credential: String, target: String = "",
        detail: String = ""
    ) async {
        let draft = AuditDraft(
            actor: actor, credential: credential, address: address, action: action, target: target, status: status, outcome: outcome,
            detail: detail)
        await service.audit.recordAfterTheFact(draft)
    }

    private func signedInAnswer(
        _ request: Request, signed: SignedIn?, _ operation: AdminOperation?, target: OperationTarget, form: Bool,
        fields: inout FormFields, _ body: (SignedIn, FormFields) async throws -> Response
    ) async throws -> Response {
        guard let signed else {
            if form { return errorPage(ServiceError(403, .noSession, "Your session has ended; sign in again."), signed: nil) }
            return redirect("/console/sign-in")
        }
        do {
            if form {
                try checkOrigin(request)
                fields = try await self.form(request)
                guard signed.session.isValidCSRFToken(fields["csrf"] ?? request.headers[HTTPField.Name("X-CSRF-Token")!]) else {
                    logger.warning("console form refused", metadata: ["event": "console-csrf", "path": "\(request.uri.path)"])
                    throw ServiceError(403, .csrf, "The form did not carry this session's CSRF token; reload the page and try again.")
                }
            }
            if let operation { try await service.accounts.authorize(signed.caller, operation, target) }
            return try await ConsoleFrame.$sections.withValue(Self.sections(for: signed.caller)) { try await body(signed, fields) }
        } catch let error as ServiceError {
            return ConsoleFrame.$sections.withValue(Self.sections(for: signed.caller)) { errorPage(error, signed: signed) }
        }
    }

    /// The sections `caller`'s role may open: the navigation shows only those.
    static func sections(for caller: Caller) -> Set<ConsoleFrame.Section> {
        let needs: [ConsoleFrame.Section: AdminOperation] = [
            .apps: .listAllDevices, .devices: .listAllDevices, .groups: .listGroups, .tokens: .listEnrollmentTokens, .audit: .listAudit,
            .people: .listAccounts,
            .webhooks: .listWebhooks,
        ]
        return Set(ConsoleFrame.Section.allCases.filter { section in needs[section]?.right.map(caller.has) ?? true })
    }

    /// Where `caller` lands after signing in: the first section its role may open (an auditor's
    /// is the audit trail).
    static func home(for caller: Caller) -> String {
        let sections = sections(for: caller)
        return (ConsoleFrame.Section.allCases.first { sections.contains($0) } ?? .account).path
    }

    /// The app and value scope a settings page or form names.
    func valuesTarget(_ request: Request, _ context: FleetRequestContext) throws -> OperationTarget {
        let scope = request.uri.queryParameters.get("scope").map { String($0) } ?? "app"
        return OperationTarget(app: try app(context), scope: try Scope.named(scope))
    }

    func deviceTarget(_ context: FleetRequestContext) -> OperationTarget {
        OperationTarget(deviceID: context.parameters.get("id") ?? "")
    }

    /// The fleet as `caller` may see it: the apps its scope covers and the devices it sees.
    func overview(for caller: Caller) async throws -> FleetOverview {
        let all = try await queries.overview()
        guard !caller.scope.isEverything else { return all }
        let devices = all.devices.filter(caller.sees)
        let seen = Set(devices.map(\.id))
        return FleetOverview(
            apps: all.apps.filter { caller.scope.covers(app: $0.app) }, devices: devices,
            standings: all.standings.filter { seen.contains($0.key) }, metadata: all.metadata.filter { caller.scope.covers(app: $0.key) })
    }

    /// A form post must come from the console's own origin when the browser says where from.
    func checkOrigin(_ request: Request) throws(ServiceError) {
        guard let origin = request.headers[HTTPField.Name("Origin")!] else { return }
        let host = request.head.authority ?? ""
        guard origin == "http://\(host)" || origin == "https://\(host)" else {
            throw ServiceError(403, .crossOrigin, "The form was sent from another site (\(origin)); it is refused.")
        }
    }

    func form(_ request: Request, limit: Int = Self.formLimit) async throws(ServiceError) -> FormFields {
        FormFields(urlEncoded: try await collectBody(request, limit: limit, what: "The form").readableBytesView)
    }

    // MARK: - Answers

    func app(_ context: FleetRequestContext) throws -> String {
        context.parameters.get("app") ?? ""
    }

    func page(_ html: HTML, status: HTTPResponse.Status = .ok) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html.text)))
    }

    func redirect(_ location: String) -> Response {
        var headers = Self.securityHeaders
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    func errorPage(_ error: ServiceError, signed: SignedIn?) -> Response {
        let html = ConsoleFrame.page(
            title: "Refused", section: nil, csrf: signed?.csrf,
            main: """
                <h1>\(error.status == 404 ? "Not found" : "That did not work")</h1>
                \(ConsoleFrame.notice(error.body.message, error: true))
                <p><a href="/console">Back to the console</a></p>
                """)
        return page(html, status: error.status)
    }
}
