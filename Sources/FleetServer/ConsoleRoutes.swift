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
/// from signing in with the admin token, a CSRF token in every form, a strict Content
/// Security Policy, and server-sent events for live pages.
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
    let sessions: ConsoleSessions
    let limits: RequestLimits
    let logger: Logger
    /// Whether the server speaks TLS itself (the cookie is then `Secure`).
    let tls: Bool

    typealias Handler = Routes.Handler

    func define(_ on: (HTTPRequest.Method, String, @escaping Handler) -> Void) {
        on(.get, "console") { _, _ in redirect("/console/apps") }
        on(.get, "console/sign-in") { request, _ in
            if try await session(request) != nil { return redirect("/console/apps") }
            return page(ConsolePages.signIn())
        }
        on(.post, "console/sign-in") { request, context in try await signIn(request, context) }
        on(.get, "console/assets/:name") { _, context in
            guard let asset = ConsoleAssets.named(context.parameters.get("name") ?? "") else {
                return page(ConsolePages.signIn(error: "No such file."), status: .notFound)
            }
            var headers = Self.securityHeaders
            headers[.contentType] = asset.contentType
            headers[.cacheControl] = "public, max-age=31536000, immutable"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: asset.body)))
        }
        on(.post, "console/sign-out") { request, context in
            try await signedIn(request, context, form: true) { session, _ in
                sessions.end(session, now: service.now)
                try await service.directory.endConsoleSession(id: session.id, expiresAt: session.expiresAt)
                logger.notice("console sign-out", metadata: ["event": "console-sign-out", "session": "\(session.id)"])
                var response = redirect("/console/sign-in")
                response.headers[.setCookie] = cookie("", maxAge: 0, request: request)
                return response
            }
        }
        on(.get, "console/apps") { request, context in
            try await signedIn(request, context) { session, _ in
                page(ConsolePages.apps(try await queries.overview(), csrf: sessions.csrfToken(for: session)))
            }
        }
        on(.get, "console/apps/:app") { request, context in
            try await signedIn(request, context) { session, _ in
                try await settingsPage(request, app: try app(context), session: session)
            }
        }
        on(.post, "console/apps/:app/settings") { request, context in
            try await signedIn(request, context, form: true) { session, fields in
                try await saveSettings(request, app: try app(context), fields: fields, session: session)
            }
        }
        on(.get, "console/apps/:app/metadata") { request, context in
            try await signedIn(request, context) { session, _ in
                let app = try app(context)
                let notice = request.uri.queryParameters.get("stored").map { ConsoleFrame.notice("Version \($0) is stored.") }
                return page(
                    ConsolePages.metadata(
                        app: app, current: try await service.admin.currentMetadata(app: app), review: nil,
                        csrf: sessions.csrfToken(for: session),
                        notice: notice))
            }
        }
        on(.post, "console/apps/:app/metadata") { request, context in
            try await signedIn(request, context, form: true) { session, fields in
                try await uploadMetadata(app: try app(context), fields: fields, session: session)
            }
        }
        on(.get, "console/apps/:app/history") { request, context in
            try await signedIn(request, context) { session, _ in
                let app = try app(context)
                let notice = request.uri.queryParameters.get("done").map { ConsoleFrame.notice("The rollout is \($0).") }
                return page(try await historyPage(app: app, csrf: sessions.csrfToken(for: session), notice: notice))
            }
        }
        for action in ["resume", "abort"] {
            on(.post, "console/apps/:app/rollout/\(action)") { request, context in
                try await signedIn(request, context, form: true) { session, _ in
                    let app = try app(context)
                    do {
                        let rollout =
                            action == "resume"
                            ? try await service.rollouts.resumeRollout(app: app, actor: Authenticator.bootstrapOwner)
                            : try await service.rollouts.abortRollout(app: app, actor: Authenticator.bootstrapOwner)
                        return redirect("/console/apps/\(app)/history?done=\(rollout.phase.rawValue)")
                    } catch let error as ServiceError where error.status == 409 || error.code == .noRollout {
                        return page(
                            try await historyPage(
                                app: app, csrf: sessions.csrfToken(for: session), notice: ConsoleFrame.notice(error.message, error: true)),
                            status: .conflict)
                    }
                }
            }
        }
        on(.get, "console/devices") { request, context in
            try await signedIn(request, context) { session, _ in
                let parameters = request.uri.queryParameters
                let filter = ConsolePages.DeviceFilter(
                    group: parameters.get("group"), app: parameters.get("app"), state: parameters.get("state"),
                    seen: parameters.get("seen"),
                    page: parameters.get("page").flatMap { Int($0) } ?? 1)
                return page(
                    ConsolePages.devices(
                        try await queries.overview(), filter: filter, now: service.now, csrf: sessions.csrfToken(for: session)))
            }
        }
        on(.get, "console/devices/:id") { request, context in
            try await signedIn(request, context) { session, _ in
                try await devicePage(id: context.parameters.get("id") ?? "", session: session, notice: nil)
            }
        }
        on(.post, "console/devices/:id/:action") { request, context in
            try await signedIn(request, context, form: true) { session, fields in
                try await manageDevice(
                    id: context.parameters.get("id") ?? "", action: context.parameters.get("action") ?? "", fields: fields, session: session
                )
            }
        }
        on(.get, "console/tokens") { request, context in
            try await signedIn(request, context) { session, _ in
                let notice = request.uri.queryParameters.get("revoked").map { ConsoleFrame.notice("Enrollment token \($0) is revoked.") }
                return try await tokensPage(created: nil, session: session, notice: notice)
            }
        }
        on(.post, "console/tokens") { request, context in
            try await signedIn(request, context, form: true) { session, fields in
                try await makeToken(fields: fields, session: session)
            }
        }
        on(.post, "console/tokens/:id/revoke") { request, context in
            try await signedIn(request, context, form: true) { _, _ in
                let id = context.parameters.get("id") ?? ""
                try await service.directory.revokeEnrollmentToken(id: id)
                return redirect("/console/tokens?revoked=\(ConsolePages.percentEncoded(id))")
            }
        }
        on(.get, "console/audit") { request, context in
            try await signedIn(request, context) { session, _ in
                let parameters = request.uri.queryParameters
                let filter = ConsolePages.AuditFilter(
                    who: parameters.get("who"), action: parameters.get("action"), after: parameters.get("after").flatMap { Int64($0) } ?? 0)
                let trail = try await service.audit.entries(
                    AuditQuery(
                        after: max(0, filter.after), actor: filter.who.map { String($0.prefix(64)) },
                        action: filter.action.map { String($0.prefix(128)) },
                        limit: ConsolePages.auditPageSize))
                return page(ConsolePages.audit(trail.entries, filter: filter, csrf: sessions.csrfToken(for: session)))
            }
        }
        on(.get, "console/events") { request, context in
            try await signedIn(request, context) { session, _ in events(for: session, cookie: sessionCookie(request) ?? "") }
        }
    }

    // MARK: - Sessions

    /// Signs in with the admin token: a session cookie, then the Apps page. A wrong token counts
    /// against the client's address as a failed API authentication does.
    func signIn(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
        let client = limits.client(of: request, context)
        let fields: FormFields
        do {
            try limits.admit(client: client)
            try checkOrigin(request)
            // A sign-in form is a token and nothing else: a few KiB, not a settings form's MiBs.
            fields = try await form(request, limit: Self.signInFormLimit)
        } catch {
            return page(ConsolePages.signIn(error: error.message), status: error.status)
        }
        // A token pasted with the file's newline, or with spaces around it, is the same token.
        var token = Substring(fields["token"] ?? "")
        while token.first?.isWhitespace == true { token = token.dropFirst() }
        while token.last?.isWhitespace == true { token = token.dropLast() }
        guard service.auth.isAdminToken(String(token)), try await service.auth.bootstrapCaller(session: "-") != nil else {
            logger.warning("console sign-in refused", metadata: ["event": "console-sign-in", "outcome": "refused", "client": "\(client)"])
            await audit(
                "console.sign-in", target: "", status: 401, outcome: ErrorCode.unauthenticated.rawValue, client: client, session: nil)
            do {
                try limits.recordFailure(client: client, credential: String(token))
            } catch {
                return page(ConsolePages.signIn(error: error.message), status: .tooManyRequests)
            }
            return page(ConsolePages.signIn(error: "That is not the admin token."), status: .unauthorized)
        }
        let (session, value) = sessions.start(now: service.now)
        logger.notice("console sign-in", metadata: ["event": "console-sign-in", "outcome": "signed-in", "session": "\(session.id)"])
        await audit("console.sign-in", target: "", status: 303, outcome: "ok", client: client, session: session)
        var response = redirect("/console/apps")
        response.headers[.setCookie] = cookie(value, maxAge: Int(ConsoleSessions.defaultLifetime), request: request)
        return response
    }

    func cookie(_ value: String, maxAge: Int, request: Request) -> String {
        let secure = tls || request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https"
        return "\(Self.cookieName)=\(value); Path=/console; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The session the request's cookie carries, if any is valid and was not signed out (here,
    /// on another instance, or before a restart: the store keeps sign-outs).
    func session(_ request: Request) async throws -> ConsoleSessions.Session? {
        guard let session = sessionCookie(request).flatMap({ sessions.session(cookie: $0, now: service.now) }) else { return nil }
        guard try await service.directory.isConsoleSessionEnded(id: session.id) == false else { return nil }
        // The console acts as the bootstrap owner: a session ends as soon as that account is
        // disabled, removed or no longer an owner.
        return try await service.auth.bootstrapCaller(session: session.id) == nil ? nil : session
    }

    /// The first valid session cookie of the request.
    func sessionCookie(_ request: Request) -> String? {
        let values = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }.compactMap { part -> String? in
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            return pair.count == 2 && pair[0] == Self.cookieName[...] ? String(pair[1]) : nil
        }
        return values.first { sessions.session(cookie: $0, now: service.now) != nil }
    }

    /// Runs `body` for a signed-in admin. A page without a session sends the browser to sign
    /// in; a form without a session, or without the session's CSRF token, or from another
    /// origin, is refused with 403 and changes nothing.
    func signedIn(
        _ request: Request, _ context: FleetRequestContext, form: Bool = false,
        _ body: (ConsoleSessions.Session, FormFields) async throws -> Response
    ) async throws -> Response {
        let session = form ? try await session(request) : nil
        let response = try await signedInAnswer(request, form: form, body)
        if form {
            let outcome = response.status.code < 400 ? "ok" : "refused"
            await audit(
                "console.\(request.method.rawValue.lowercased()) \(request.uri.path)", target: "", status: Int(response.status.code),
                outcome: outcome, client: limits.client(of: request, context), session: session)
        }
        return response
    }

    /// Appends a console action to the audit trail, as the bootstrap owner (whose admin token signs in).
    func audit(_ action: String, target: String, status: Int, outcome: String, client: String?, session: ConsoleSessions.Session?) async {
        let draft = AuditDraft(
            actor: session == nil && outcome != "ok" ? "-" : Authenticator.bootstrapOwner,
            credential: session.map { Caller.Credential.consoleSession(id: $0.id).description } ?? "admin token file",
            address: client ?? "-", action: action, target: target, status: status, outcome: outcome)
        await service.audit.recordAfterTheFact(draft)
    }

    private func signedInAnswer(
        _ request: Request, form: Bool, _ body: (ConsoleSessions.Session, FormFields) async throws -> Response
    ) async throws -> Response {
        guard let session = try await session(request) else {
            if form { return errorPage(ServiceError(403, .noSession, "Your session has ended; sign in again."), session: nil) }
            return redirect("/console/sign-in")
        }
        var fields = FormFields([])
        do {
            if form {
                try checkOrigin(request)
                fields = try await self.form(request)
                guard sessions.isValidCSRFToken(fields["csrf"] ?? request.headers[HTTPField.Name("X-CSRF-Token")!], for: session) else {
                    logger.warning("console form refused", metadata: ["event": "console-csrf", "path": "\(request.uri.path)"])
                    throw ServiceError(403, .csrf, "The form did not carry this session's CSRF token; reload the page and try again.")
                }
            }
            return try await body(session, fields)
        } catch let error as ServiceError {
            return errorPage(error, session: session)
        }
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

    func errorPage(_ error: ServiceError, session: ConsoleSessions.Session?) -> Response {
        let html = ConsoleFrame.page(
            title: "Refused", section: nil, csrf: session.map { sessions.csrfToken(for: $0) },
            main: """
                <h1>\(error.status == 404 ? "Not found" : "That did not work")</h1>
                \(ConsoleFrame.notice(error.body.message, error: true))
                <p><a href="/console/apps">Back to the apps</a></p>
                """)
        return page(html, status: error.status)
    }
}
