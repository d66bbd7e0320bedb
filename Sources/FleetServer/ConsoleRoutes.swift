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
        on(.post, "console/sign-out") { request, _ in
            try await signedIn(request, form: true) { session, _ in
                sessions.end(session, now: service.now)
                try await service.directory.endConsoleSession(id: session.id, expiresAt: session.expiresAt)
                logger.notice("console sign-out", metadata: ["event": "console-sign-out", "session": "\(session.id)"])
                var response = redirect("/console/sign-in")
                response.headers[.setCookie] = cookie("", maxAge: 0, request: request)
                return response
            }
        }
        on(.get, "console/apps") { request, _ in
            try await signedIn(request) { session, _ in
                page(ConsolePages.apps(try await service.console.overview(), csrf: sessions.csrfToken(for: session)))
            }
        }
        on(.get, "console/apps/:app") { request, context in
            try await signedIn(request) { session, _ in
                try await settingsPage(request, app: try app(context), session: session)
            }
        }
        on(.post, "console/apps/:app/settings") { request, context in
            try await signedIn(request, form: true) { session, fields in
                try await saveSettings(request, app: try app(context), fields: fields, session: session)
            }
        }
        on(.get, "console/apps/:app/metadata") { request, context in
            try await signedIn(request) { session, _ in
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
            try await signedIn(request, form: true) { session, fields in
                try await uploadMetadata(app: try app(context), fields: fields, session: session)
            }
        }
        on(.get, "console/apps/:app/history") { request, context in
            try await signedIn(request) { session, _ in
                let app = try app(context)
                let notice = request.uri.queryParameters.get("done").map { ConsoleFrame.notice("The rollout is \($0).") }
                return page(try await historyPage(app: app, csrf: sessions.csrfToken(for: session), notice: notice))
            }
        }
        for action in ["resume", "abort"] {
            on(.post, "console/apps/:app/rollout/\(action)") { request, context in
                try await signedIn(request, form: true) { session, _ in
                    let app = try app(context)
                    do {
                        let rollout =
                            action == "resume"
                            ? try await service.rollouts.resumeRollout(app: app, actor: service.auth.consoleActor)
                            : try await service.rollouts.abortRollout(app: app, actor: service.auth.consoleActor)
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
        on(.get, "console/devices") { request, _ in
            try await signedIn(request) { session, _ in
                let parameters = request.uri.queryParameters
                let filter = ConsolePages.DeviceFilter(
                    group: parameters.get("group"), app: parameters.get("app"), state: parameters.get("state"),
                    seen: parameters.get("seen"),
                    page: parameters.get("page").flatMap { Int($0) } ?? 1)
                return page(
                    ConsolePages.devices(
                        try await service.console.overview(), filter: filter, now: service.now, csrf: sessions.csrfToken(for: session)))
            }
        }
        on(.get, "console/devices/:id") { request, context in
            try await signedIn(request) { session, _ in
                try await devicePage(id: context.parameters.get("id") ?? "", session: session, notice: nil)
            }
        }
        on(.post, "console/devices/:id/:action") { request, context in
            try await signedIn(request, form: true) { session, fields in
                try await manageDevice(
                    id: context.parameters.get("id") ?? "", action: context.parameters.get("action") ?? "", fields: fields, session: session
                )
            }
        }
        on(.get, "console/tokens") { request, _ in
            try await signedIn(request) { session, _ in
                let notice = request.uri.queryParameters.get("revoked").map { ConsoleFrame.notice("Enrollment token \($0) is revoked.") }
                return try await tokensPage(created: nil, session: session, notice: notice)
            }
        }
        on(.post, "console/tokens") { request, _ in
            try await signedIn(request, form: true) { session, fields in
                try await makeToken(fields: fields, session: session)
            }
        }
        on(.post, "console/tokens/:id/revoke") { request, context in
            try await signedIn(request, form: true) { _, _ in
                let id = context.parameters.get("id") ?? ""
                try await service.directory.revokeEnrollmentToken(id: id)
                return redirect("/console/tokens?revoked=\(ConsolePages.percentEncoded(id))")
            }
        }
        on(.get, "console/events") { request, _ in
            try await signedIn(request) { session, _ in events(for: session, cookie: sessionCookie(request) ?? "") }
        }
    }

    // MARK: - Sessions

    /// Signs in with the admin token: a session cookie, then the Apps page. A wrong token counts
    /// against the client's address as a failed API authentication does.
    private func signIn(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
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
        guard service.auth.isAdminToken(String(token)) else {
            logger.warning("console sign-in refused", metadata: ["event": "console-sign-in", "outcome": "refused", "client": "\(client)"])
            do {
                try limits.recordFailure(client: client, credential: String(token))
            } catch {
                return page(ConsolePages.signIn(error: error.message), status: .tooManyRequests)
            }
            return page(ConsolePages.signIn(error: "That is not the admin token."), status: .unauthorized)
        }
        let (session, value) = sessions.start(now: service.now)
        logger.notice("console sign-in", metadata: ["event": "console-sign-in", "outcome": "signed-in", "session": "\(session.id)"])
        var response = redirect("/console/apps")
        response.headers[.setCookie] = cookie(value, maxAge: Int(ConsoleSessions.defaultLifetime), request: request)
        return response
    }

    private func cookie(_ value: String, maxAge: Int, request: Request) -> String {
        let secure = tls || request.headers[HTTPField.Name("X-Forwarded-Proto")!] == "https"
        return "\(Self.cookieName)=\(value); Path=/console; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The session the request's cookie carries, if any is valid and was not signed out (here,
    /// on another instance, or before a restart: the store keeps sign-outs).
    private func session(_ request: Request) async throws -> ConsoleSessions.Session? {
        guard let session = sessionCookie(request).flatMap({ sessions.session(cookie: $0, now: service.now) }) else { return nil }
        return try await service.directory.isConsoleSessionEnded(id: session.id) ? nil : session
    }

    /// The first valid session cookie of the request.
    private func sessionCookie(_ request: Request) -> String? {
        let values = request.headers[values: .cookie].flatMap { $0.split(separator: ";") }.compactMap { part -> String? in
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
            return pair.count == 2 && pair[0] == Self.cookieName[...] ? String(pair[1]) : nil
        }
        return values.first { sessions.session(cookie: $0, now: service.now) != nil }
    }

    /// Runs `body` for a signed-in admin. A page without a session sends the browser to sign
    /// in; a form without a session, or without the session's CSRF token, or from another
    /// origin, is refused with 403 and changes nothing.
    private func signedIn(
        _ request: Request, form: Bool = false, _ body: (ConsoleSessions.Session, FormFields) async throws -> Response
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
    private func checkOrigin(_ request: Request) throws(ServiceError) {
        guard let origin = request.headers[HTTPField.Name("Origin")!] else { return }
        let host = request.head.authority ?? ""
        guard origin == "http://\(host)" || origin == "https://\(host)" else {
            throw ServiceError(403, .crossOrigin, "The form was sent from another site (\(origin)); it is refused.")
        }
    }

    private func form(_ request: Request, limit: Int = Self.formLimit) async throws(ServiceError) -> FormFields {
        FormFields(urlEncoded: try await collectBody(request, limit: limit, what: "The form").readableBytesView)
    }

    // MARK: - Pages

    /// The app's history page: its rollout (active or latest, `nil` when it never had one)
    /// and its newest 200 writes.
    private func historyPage(app: String, csrf: String, notice: HTML?) async throws -> HTML {
        let history = try await service.admin.history(app: app, scope: nil, limit: Self.historyShown)
        var rollout: RolloutView?
        do {
            rollout = try await service.rollouts.rolloutStatus(app: app)
        } catch let error as ServiceError where error.code == .noRollout {
            rollout = nil
        }
        return ConsolePages.history(app: app, entries: history.entries, rollout: rollout, csrf: csrf, notice: notice)
    }

    /// How many history entries the console's history page shows (the newest).
    static let historyShown = 200

    private func settingsPage(_ request: Request, app: String, session: ConsoleSessions.Session) async throws -> Response {
        let scope = request.uri.queryParameters.get("scope").map { String($0) } ?? "app"
        let view = try await service.admin.scopeValues(app: app, scope: Scope.named(scope))
        let notice = request.uri.queryParameters.get("saved") != nil ? ConsoleFrame.notice("Saved.") : nil
        return page(
            ConsolePages.appSettings(
                app: app, form: SettingsForm(view: view), scopes: try await scopes(app: app), csrf: sessions.csrfToken(for: session),
                notice: notice))
    }

    /// The most devices the scope picker suggests (any other can be typed).
    static let suggestedDevices = 500

    /// The scopes the picker suggests: the app, every group of its devices, and its first
    /// ``suggestedDevices`` devices.
    private func scopes(app: String) async throws -> [String] {
        let devices = try await service.directory.allDevices().devices.filter { $0.apps.contains(app) }
        return ["app"] + Set(devices.flatMap(\.groups)).sorted().map { "group:" + $0 }
            + devices.prefix(Self.suggestedDevices).map { "device:" + $0.id }
    }

    /// One merge patch from the form. A browser with the script gets JSON (the errors by
    /// pointer, which it puts next to their fields); without it, the page again with the
    /// errors in place, or a redirect to the saved page.
    private func saveSettings(_ request: Request, app: String, fields: FormFields, session: ConsoleSessions.Session) async throws
        -> Response
    {
        let scope = request.uri.queryParameters.get("scope").map { String($0) } ?? "app"
        let view = try await service.admin.scopeValues(app: app, scope: Scope.named(scope))
        let wantsJSON = request.headers[.accept]?.contains("application/json") == true
        // Saving a form drawn before someone else's change would put back what it showed. Checked
        // here for an answer at once, and again in the write section as the write's precondition.
        let drawn = fields[SettingsForm.drawnField]
        let unchangedSinceDrawn: @Sendable (ScopeValuesView) throws(ServiceError) -> Void = {
            (current: ScopeValuesView) throws(ServiceError) in
            guard let drawn, drawn != SettingsForm.drawnDigest(of: current) else { return }
            throw ServiceError(
                409, .changedSinceDrawn,
                "These settings changed after this page was drawn (another admin or a device changed them). Reload the page to see them, then make your change again."
            )
        }
        do {
            try unchangedSinceDrawn(view)
        } catch {
            if wantsJSON { return json(.conflict, ["saved": false, "errors": [["pointer": "", "message": .string(error.message)]]]) }
            return errorPage(error, session: session)
        }
        let (patch, readErrors) = SettingsForm.patch(from: fields, view: view)
        var errors = readErrors
        var status = HTTPResponse.Status.unprocessableContent
        if errors.isEmpty {
            if patch.isEmpty {
                return wantsJSON ? json(.ok, ["saved": true, "changed": []]) : redirect(settingsPath(app, scope: scope, saved: true))
            }
            do {
                _ = try await service.admin.patchValues(
                    app: app, scope: view.scope, patch: patch, actor: service.auth.consoleActor, precondition: unchangedSinceDrawn)
                logger.notice(
                    "console change",
                    metadata: ["event": "console-values", "app": "\(app)", "scope": "\(scope)", "session": "\(session.id)"])
                if wantsJSON { return json(.ok, ["saved": true, "changed": .array(patch.keys.map { JSONValue.string($0) })]) }
                return redirect(settingsPath(app, scope: scope, saved: true))
            } catch let error as ServiceError {
                status = error.status
                errors = Self.errorsByPointer(error)
            }
        }
        if wantsJSON {
            let details = errors.sorted { $0.key < $1.key }.map { pointer, message -> JSONValue in
                ["pointer": .string(pointer), "message": .string(message)]
            }
            return json(status, ["saved": false, "errors": .array(details)])
        }
        var submitted = JSONObject()
        for (key, value) in patch where value != .null && !view.metadata.secretKeys.contains(key) { submitted[key] = value }
        return page(
            ConsolePages.appSettings(
                app: app, form: SettingsForm(view: view, errors: errors, submitted: submitted), scopes: try await scopes(app: app),
                csrf: sessions.csrfToken(for: session)),
            status: status)
    }

    /// A refusal's details by pointer; one without details under `""` (the whole form).
    static func errorsByPointer(_ error: ServiceError) -> [String: String] {
        guard !error.body.details.isEmpty else { return ["": error.body.message] }
        var errors: [String: String] = [:]
        for detail in error.body.details {
            errors[detail.pointer] = errors[detail.pointer].map { $0 + "; " + detail.message } ?? detail.message
        }
        return errors
    }

    private func settingsPath(_ app: String, scope: String, saved: Bool) -> String {
        "/console/apps/\(app)?scope=\(ConsolePages.percentEncoded(scope))" + (saved ? "&saved=1" : "")
    }

    private func uploadMetadata(app: String, fields: FormFields, session: ConsoleSessions.Session) async throws -> Response {
        let document = fields["document"] ?? ""
        let csrf = sessions.csrfToken(for: session)
        let current = try? await service.admin.currentMetadata(app: app)
        // A refusal (unreadable, invalid, not a newer version, values it breaks) is drawn on the
        // page with the document as sent, whichever button was pressed.
        do {
            if fields["action"] == "store" {
                let result = try await service.admin.putMetadata(
                    app: app, document: Array(document.utf8), force: fields["force"] == "true", actor: service.auth.consoleActor)
                logger.notice(
                    "console metadata",
                    metadata: ["event": "console-metadata", "app": "\(app)", "version": "\(result.version)", "session": "\(session.id)"])
                return redirect("/console/apps/\(app)/metadata?stored=\(result.version)")
            }
            let preview = try await service.admin.previewMetadata(app: app, document: Array(document.utf8))
            return page(
                ConsolePages.metadata(app: app, current: current, review: .init(document: document, preview: preview), csrf: csrf))
        } catch let error as ServiceError {
            let review = ConsolePages.MetadataReview(
                document: document, preview: nil, problems: error.body.details, message: error.body.message)
            return page(
                ConsolePages.metadata(app: app, current: current, review: review, csrf: csrf),
                status: error.status)
        }
    }

    private func devicePage(id: String, session: ConsoleSessions.Session, notice: HTML?) async throws -> Response {
        let (device, standings) = try await service.console.standings(deviceID: id)
        var explanations: [String: ScopeValuesExplanation] = [:]
        for app in standings.keys {
            explanations[app] = ScopeValuesExplanation(try await service.admin.explain(app: app, deviceID: id))
        }
        return page(
            ConsolePages.device(
                device, standings: standings, explanations: explanations,
                recentReports: try await service.console.recentReports(deviceID: id),
                facts: try await service.directory.deviceFacts(id: id), policy: try await service.gateway.devicePolicy(device),
                now: service.now,
                csrf: sessions.csrfToken(for: session), notice: notice))
    }

    private func manageDevice(id: String, action: String, fields: FormFields, session: ConsoleSessions.Session) async throws -> Response {
        switch action {
        case "disable", "enable":
            _ = try await service.directory.updateDevice(id: id, DeviceUpdate(disabled: action == "disable"))
            logger.notice(
                "console device",
                metadata: ["event": "console-device", "device": "\(id)", "action": "\(action)", "session": "\(session.id)"])
            return try await devicePage(id: id, session: session, notice: ConsoleFrame.notice("The device is \(action)d."))
        case "delete":
            guard fields["confirm"] == "yes" else {
                throw ServiceError(400, .notConfirmed, "Tick the box to confirm the deletion.")
            }
            try await service.directory.deleteDevice(id: id)
            logger.notice(
                "console device", metadata: ["event": "console-device", "device": "\(id)", "action": "delete", "session": "\(session.id)"])
            return redirect("/console/devices")
        default:
            throw ServiceError(404, .notFound, "No such action on a device: \(action).")
        }
    }

    private func tokensPage(created: EnrollmentTokenResponse?, session: ConsoleSessions.Session, notice: HTML?) async throws -> Response {
        let apps = try await service.console.overview().apps.map(\.app)
        return page(
            ConsolePages.tokens(
                try await service.directory.enrollmentTokens(), apps: apps, created: created, now: service.now,
                csrf: sessions.csrfToken(for: session),
                notice: notice))
    }

    private func makeToken(fields: FormFields, session: ConsoleSessions.Session) async throws -> Response {
        let apps = fields.pairs.filter { $0.name == "apps" }.map(\.value)
        let groups = (fields["groups"] ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }.map(String.init)
        guard let uses = Int64(fields["uses"] ?? ""), let expires = Int64(fields["expiresIn"] ?? "") else {
            throw ServiceError(400, .badRequest, "Uses and validity must be whole numbers.")
        }
        let created = try await service.directory.makeEnrollmentToken(
            EnrollmentTokenRequest(apps: apps, groups: groups, expiresInSeconds: expires, uses: uses))
        // Shown once, on this answer: no redirect, and the page is not stored (no-store).
        return try await tokensPage(created: created, session: session, notice: nil)
    }

    /// Server-sent events: one `change` event per service event, a comment every 25 s so that
    /// proxies keep the stream open. The page re-reads itself on each. A graceful shutdown ends
    /// every stream at once (a console left open must not hold up a restart); the session's end
    /// (signed out, expired) ends its stream at the next comment.
    private func events(for session: ConsoleSessions.Session, cookie: String) -> Response {
        let sessions = sessions
        var headers = Self.securityHeaders
        headers[.contentType] = "text/event-stream"
        headers[.cacheControl] = "no-store"
        let (service, logger) = (service, logger)
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let (items, continuation) = AsyncStream<StreamItem>.makeStream(bufferingPolicy: .bufferingNewest(256))
                let subscription = service.events.subscribe()
                let feed = Task {
                    for await event in subscription { continuation.yield(.event(event)) }
                    continuation.finish()
                }
                let ticks = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(min(25, max(1, Double(session.expiresAt - service.now)))))
                        guard let current = sessions.session(cookie: cookie, now: service.now),
                            (try? await service.directory.isConsoleSessionEnded(id: current.id)) == false
                        else {
                            continuation.finish()
                            return
                        }
                        continuation.yield(.keepAlive)
                    }
                }
                defer {
                    feed.cancel()
                    ticks.cancel()
                }
                logger.debug("console event stream", metadata: ["event": "console-events", "state": "open"])
                try await writer.write(ByteBuffer(string: "retry: 2000\n: connected\n\n"))
                try await withGracefulShutdownHandler {
                    for await item in items {
                        let text: String
                        switch item {
                        case .event(let event): text = "event: change\ndata: \(Self.eventData(event).serialized())\n\n"
                        case .keepAlive: text = ": keep-alive\n\n"
                        }
                        try await writer.write(ByteBuffer(string: text))
                    }
                } onGracefulShutdown: {
                    continuation.finish()
                }
                try await writer.finish(nil)
            })
    }

    private enum StreamItem: Sendable {
        case event(ServiceEvent)
        case keepAlive
    }

    static func eventData(_ event: ServiceEvent) -> JSONValue {
        switch event {
        case .statusReported(let app, let device, let state):
            ["kind": "status", "app": .string(app), "device": .string(device), "state": .string(state.rawValue)]
        case .settingsChanged(let app, let scope): ["kind": "settings", "app": .string(app), "scope": .string(scope.description)]
        case .deviceChanged(let device): ["kind": "device", "device": .string(device)]
        case .unknown: ["kind": "unknown"]
        }
    }

    // MARK: - Answers

    private func app(_ context: FleetRequestContext) throws -> String {
        context.parameters.get("app") ?? ""
    }

    private func page(_ html: HTML, status: HTTPResponse.Status = .ok) -> Response {
        var headers = Self.securityHeaders
        headers[.contentType] = "text/html; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: html.text)))
    }

    private func redirect(_ location: String) -> Response {
        var headers = Self.securityHeaders
        headers[.location] = location
        headers[.cacheControl] = "no-store"
        return Response(status: .seeOther, headers: headers)
    }

    private func errorPage(_ error: ServiceError, session: ConsoleSessions.Session?) -> Response {
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
