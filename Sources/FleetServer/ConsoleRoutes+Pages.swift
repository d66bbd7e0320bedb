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

extension ConsoleRoutes {
    // MARK: - Pages

    /// The app's history page: its rollout (active or latest, `nil` when it never had one)
    /// and its newest 200 writes.
    func historyPage(app: String, signed: SignedIn, notice: HTML?) async throws -> HTML {
        let history = try await service.admin.history(app: app, scope: nil, limit: Self.historyShown, visibleTo: signed.caller)
        var rollout: RolloutView?
        do {
            // A rollout's box names devices of every group: only for those who may see the whole app's rollout.
            try await service.accounts.authorize(signed.caller, .getRollout, OperationTarget(app: app))
            rollout = try await service.rollouts.rolloutStatus(app: app)
        } catch let error as ServiceError where error.code == .noRollout || error.status == .forbidden {
            rollout = nil
        }
        return ConsolePages.history(app: app, entries: history.entries, rollout: rollout, csrf: signed.csrf, notice: notice)
    }

    /// How many history entries the console's history page shows (the newest).
    static let historyShown = 200

    func settingsPage(_ request: Request, app: String, signed: SignedIn) async throws -> Response {
        let scope = request.uri.queryParameters.get("scope").map { String($0) } ?? "app"
        let view = try await service.admin.scopeValues(app: app, scope: Scope.named(scope))
        let notice = request.uri.queryParameters.get("saved") != nil ? ConsoleFrame.notice("Saved.") : nil
        return page(
            ConsolePages.appSettings(
                app: app, form: SettingsForm(view: view), scopes: try await scopes(app: app, for: signed.caller), csrf: signed.csrf,
                notice: notice))
    }

    /// The most devices the scope picker suggests (any other can be typed).
    static let suggestedDevices = 500

    /// The scopes the picker suggests: the app, every group of its devices, and its first
    /// ``suggestedDevices`` devices (of those `caller` sees).
    func scopes(app: String, for caller: Caller) async throws -> [String] {
        let devices = try await service.directory.allDevices(visibleTo: caller).devices.filter { $0.apps.contains(app) }
        return ["app"] + Set(devices.flatMap(\.groups)).sorted().map { "group:" + $0 }
            + devices.prefix(Self.suggestedDevices).map { "device:" + $0.id }
    }

    /// One merge patch from the form. A browser with the script gets JSON (the errors by
    /// pointer, which it puts next to their fields); without it, the page again with the
    /// errors in place, or a redirect to the saved page.
    func saveSettings(_ request: Request, app: String, fields: FormFields, signed: SignedIn) async throws
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
            return errorPage(error, signed: signed)
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
                    app: app, scope: view.scope, patch: patch, actor: signed.caller.name, precondition: unchangedSinceDrawn)
                logger.notice(
                    "console change",
                    metadata: ["event": "console-values", "app": "\(app)", "scope": "\(scope)", "session": "\(signed.session.id)"])
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
                app: app, form: SettingsForm(view: view, errors: errors, submitted: submitted),
                scopes: try await scopes(app: app, for: signed.caller),
                csrf: signed.csrf),
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

    func settingsPath(_ app: String, scope: String, saved: Bool) -> String {
        "/console/apps/\(app)?scope=\(ConsolePages.percentEncoded(scope))" + (saved ? "&saved=1" : "")
    }

    func uploadMetadata(app: String, fields: FormFields, signed: SignedIn) async throws -> Response {
        let document = fields["document"] ?? ""
        let csrf = signed.csrf
        let current = try? await service.admin.currentMetadata(app: app)
        // A refusal (unreadable, invalid, not a newer version, values it breaks) is drawn on the
        // page with the document as sent, whichever button was pressed.
        do {
            if fields["action"] == "store" {
                let result = try await service.admin.putMetadata(
                    app: app, document: Array(document.utf8), force: fields["force"] == "true", actor: signed.caller.name)
                logger.notice(
                    "console metadata",
                    metadata: [
                        "event": "console-metadata", "app": "\(app)", "version": "\(result.version)", "session": "\(signed.session.id)",
                    ])
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

    func devicePage(id: String, signed: SignedIn, notice: HTML?) async throws -> Response {
        let (device, allStandings) = try await queries.standings(deviceID: id)
        // A scoped account sees the device's apps it is scoped to, not the others.
        let standings = allStandings.filter { signed.caller.scope.covers(app: $0.key) }
        var explanations: [String: ScopeValuesExplanation] = [:]
        for app in standings.keys {
            explanations[app] = ScopeValuesExplanation(try await service.admin.explain(app: app, deviceID: id))
        }
        let covers = { (app: String) in signed.caller.scope.covers(app: app) }
        var policy = try await service.gateway.devicePolicy(device)
        policy.apps = policy.apps.filter { covers($0.key) }
        return page(
            ConsolePages.device(
                device, standings: standings, explanations: explanations,
                recentReports: try await queries.recentReports(deviceID: id).filter { covers($0.app) },
                facts: try await service.directory.deviceFacts(id: id), policy: policy,
                now: service.now,
                csrf: signed.csrf, notice: notice))
    }

    func manageDevice(id: String, action: String, fields: FormFields, signed: SignedIn) async throws -> Response {
        switch action {
        case "disable", "enable":
            _ = try await service.directory.updateDevice(id: id, DeviceUpdate(disabled: action == "disable"))
            logger.notice(
                "console device",
                metadata: ["event": "console-device", "device": "\(id)", "action": "\(action)", "session": "\(signed.session.id)"])
            return try await devicePage(id: id, signed: signed, notice: ConsoleFrame.notice("The device is \(action)d."))
        case "delete":
            guard fields["confirm"] == "yes" else {
                throw ServiceError(400, .notConfirmed, "Tick the box to confirm the deletion.")
            }
            try await service.directory.deleteDevice(id: id)
            logger.notice(
                "console device",
                metadata: ["event": "console-device", "device": "\(id)", "action": "delete", "session": "\(signed.session.id)"])
            return redirect("/console/devices")
        default:
            throw ServiceError(404, .notFound, "No such action on a device: \(action).")
        }
    }

    func tokensPage(created: EnrollmentTokenResponse?, signed: SignedIn, notice: HTML?) async throws -> Response {
        let apps = try await overview(for: signed.caller).apps.map(\.app)
        return page(
            ConsolePages.tokens(
                try await service.directory.enrollmentTokens(), apps: apps, created: created, now: service.now,
                csrf: signed.csrf,
                notice: notice))
    }

    func makeToken(fields: FormFields, signed: SignedIn) async throws -> Response {
        let apps = fields.pairs.filter { $0.name == "apps" }.map(\.value)
        let groups = (fields["groups"] ?? "").split(separator: ",").map { $0.trimmingSpaces() }.filter { !$0.isEmpty }.map(String.init)
        guard let uses = Int64(fields["uses"] ?? ""), let expires = Int64(fields["expiresIn"] ?? "") else {
            throw ServiceError(400, .badRequest, "Uses and validity must be whole numbers.")
        }
        let created = try await service.directory.makeEnrollmentToken(
            EnrollmentTokenRequest(apps: apps, groups: groups, expiresInSeconds: expires, uses: uses))
        // Shown once, on this answer: no redirect, and the page is not stored (no-store).
        return try await tokensPage(created: created, signed: signed, notice: nil)
    }

    /// Server-sent events: one `change` event per service event, a comment every 25 s so that
    /// proxies keep the stream open. The page re-reads itself on each. A graceful shutdown ends
    /// every stream at once (a console left open must not hold up a restart); the session's end
    /// (signed out, expired, its account changed) ends its stream at the next comment.
    func events(for signed: SignedIn) -> Response {
        let session = signed.session
        let caller = signed.caller
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
                    for await event in subscription where await service.accounts.sees(caller, event: event) {
                        continuation.yield(.event(event))
                    }
                    continuation.finish()
                }
                let ticks = Task {
                    while !Task.isCancelled {
                        try? await Task.sleep(for: .seconds(25))
                        guard (try? await service.accounts.consoleCaller(session)) != nil else {
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
        case .webhooksQueued: ["kind": "webhooks"]
        case .unknown: ["kind": "unknown"]
        }
    }
}
