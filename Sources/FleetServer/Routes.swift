import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

/// Protocol v1 over HTTP: reads each request, calls one ``FleetServices`` method and writes
/// its answer. `openapi/fleetset-v1.yaml` is the contract; the tests hold the two together.
struct Routes: Sendable {
    /// The largest body accepted on settings, values, status and token routes: 1 MiB.
    static let bodyLimit = 1 << 20
    /// The largest enrollment request: 4 KiB (a token and a request id; anyone may send one).
    static let enrollLimit = 4 << 10
    /// Tells a device, in its settings and metadata answers, that the admin asked it to rotate its token.
    static let rotateTokenHeader = HTTPField.Name(FleetHeader.rotateToken)!
    /// The tag of the device's agent policy: the one it has on requests, the one it should
    /// have on answers (only when they differ).
    static let policyHeader = HTTPField.Name(FleetHeader.policy)!
    /// When a busy server asks the device to send its next request, in seconds.
    static let nextPollHeader = HTTPField.Name(FleetHeader.nextPoll)!
    /// Names the client behind a trusted reverse proxy.
    static let forwardedForHeader = HTTPField.Name("X-Forwarded-For")!
    /// The largest metadata document accepted: 4 MiB.
    static let metadataLimit = 4 << 20

    let service: FleetServices
    let logger: Logger
    let limits: RequestLimits
    let connections: OpenConnections
    let metrics: PrometheusCollectorRegistry?
    /// The admin console's routes (`nil`: no console).
    let console: ConsoleRoutes?

    func router() -> Router<FleetRequestContext> {
        var routes: [(method: HTTPRequest.Method, path: String, access: Access, handler: Handler)] = []
        defineRoutes { method, path, access, handler in routes.append((method, path, access, handler)) }
        let router = Router(context: FleetRequestContext.self)
        // Middleware applies to the routes added after it: add it first. The metrics see the
        // answer the error middleware makes of a refusal.
        router.add(middleware: RequestMetricsMiddleware(metrics: service.metrics))
        router.add(middleware: ErrorBodyMiddleware(logger: logger, routes: RouteTable(routes.map { ($0.method, $0.path) })))
        // The admin's and the devices' routes each behind one authentication, which puts who
        // sent the request on its context.
        let admins = router.group().add(middleware: Authentication(required: .admin, authenticate: authenticate))
        let devices = router.group().add(middleware: Authentication(required: .device, authenticate: authenticate))
        for route in routes {
            switch route.access {
            case .anyone: router.on(RouterPath(route.path), method: route.method, use: route.handler)
            case .admin: admins.on(RouterPath(route.path), method: route.method, use: route.handler)
            case .device: devices.on(RouterPath(route.path), method: route.method, use: route.handler)
            }
        }
        return router
    }

    typealias Handler = @Sendable (Request, FleetRequestContext) async throws -> Response

    /// Who may call a route.
    enum Access {
        /// Anyone: the route checks what it needs itself (enrollment, health, the console's pages).
        case anyone
        /// The admin token.
        case admin
        /// A device's token.
        case device
    }

    private func defineRoutes(_ on: (HTTPRequest.Method, String, Access, @escaping Handler) -> Void) {
        on(.get, "healthz", .anyone) { _, _ in json(.ok, ["status": "ok"]) }

        console?.define { method, path, handler in on(method, path, .anyone, handler) }

        // Prometheus' text format, for the admin token (a scraper sends it as a bearer token).
        if let metrics {
            on(.get, "metrics", .admin) { request, context in
                return Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }

        on(.post, "v1/enroll", .anyone) { request, context in
            let client = client(request, context)
            try limits.admit(client: client)
            let body = try await jsonBody(request, limit: Self.enrollLimit)
            // The token is checked first: a valid one is never refused for others' guesses.
            do {
                return json(.created, try await service.gateway.enroll(ServiceError.decode(body, as: EnrollRequest.init(json:))).json)
            } catch let error as ServiceError where error.status == 401 {
                try limits.recordFailure(client: client, credential: body["enrollmentToken"]?.stringValue)
                throw error
            }
        }

        // Every device route answers an app the device was not given exactly as an app that
        // does not exist (requireDevice(_:app:)).
        on(.get, "v1/apps/:app/metadata", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            return withRotationRequest(try await metadataResponse(request, app: app), device)
        }

        on(.get, "v1/apps/:app/settings", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            let (answer, unchanged) = try await settingsLongPoll(request, context, app: app, device: device)
            guard let settings = answer.settings else { return unchanged }
            return withDeviceHints(settingsResponse(settings.document, body: settings.body), answer, request)
        }

        // One value of the settings, at a key path (for devices that need only it): the same
        // revision ETag, If-None-Match and wait as the whole document.
        on(.get, "v1/apps/:app/settings/**", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            let path = try keyPath(context)
            let (answer, unchanged) = try await settingsLongPoll(request, context, app: app, device: device)
            guard let document = answer.document else { return unchanged }
            guard let value = JSONValue.object(document.values)[pointer: path] else {
                throw ServiceError(404, .unknownKey, "revision \(document.revision) of \(app) has no value at \(path.keyPath)")
            }
            var response = json(.ok, value)
            response.headers[.eTag] = RevisionTag.etag(document.revision)
            response.headers[.cacheControl] = "no-store"
            return withDeviceHints(response, answer, request)
        }

        on(.patch, "v1/apps/:app/settings", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            try limits.admit(deviceWrite: device.id)
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of settings")
            let document = try await service.gateway.patchSettings(
                app: app, device: device, ifMatch: request.headers[.ifMatch], patch: patch)
            return settingsResponse(document)
        }

        // A device's own explanation: which scope set each of its values (secrets masked).
        on(.get, "v1/apps/:app/explain", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            return json(.ok, try await service.admin.explain(app: app, deviceID: device.id).json)
        }

        on(.post, "v1/apps/:app/status", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            let report = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit)) { json throws(DocumentError) in
                try StatusReport(json: json)
            }
            try await service.gateway.recordStatus(app: app, device: device, report)
            return Response(status: .accepted)
        }

        // What the server asks of the calling device's agent; its ETag is the policy's tag.
        on(.get, "v1/device/policy", .device) { request, context in
            let device = try context.device()
            let policy = try await service.gateway.devicePolicy(device)
            var response = json(.ok, policy.json)
            response.headers[.eTag] = "\"\(policy.tag)\""
            response.headers[.cacheControl] = "no-store"
            return response
        }

        // The calling device's facts: a merge patch of those that changed.
        on(.patch, "v1/device/info", .device) { request, context in
            let device = try context.device()
            try limits.admit(deviceWrite: device.id)
            let body = try await jsonBody(request, limit: DeviceInfo.maximumSize * 2, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of facts")
            return json(.ok, ["info": .object(try await service.gateway.patchDeviceInfo(device: device, patch: patch))])
        }

        // A new token for the calling device; the old one works until the new one is used.
        on(.post, "v1/device/token", .device) { request, context in
            let device = try context.device()
            try limits.admit(deviceWrite: device.id)
            return json(.created, try await service.gateway.rotateToken(device: device).json)
        }

        on(.get, "v1/admin/devices", .admin) { request, context in
            let filters = try request.uri.queryParameters.getAll("where").map { text throws(ServiceError) in
                guard let filter = DeviceInfoFilter(String(text)) else {
                    throw ServiceError(400, .badParameter, "where must be FACT=VALUE or FACT!=VALUE, e.g. os.version=12")
                }
                return filter
            }
            return json(.ok, try await service.directory.allDevices(matching: filters).json)
        }

        on(.get, "v1/admin/devices/:id/policy", .admin) { request, context in
            return json(.ok, try await service.directory.devicePolicy(id: context.parameters.get("id") ?? "").json)
        }

        on(.get, "v1/admin/policies", .admin) { request, context in
            return json(.ok, try await service.directory.policyList().json)
        }

        on(.patch, "v1/admin/policies/:scope", .admin) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            guard let scope = PolicyScope(PercentEncoding.decoded(context.parameters.get("scope") ?? "") ?? "") else {
                throw ServiceError(400, .badParameter, "a policy scope is app:APP, group:NAME or device:ID")
            }
            let patch = try ServiceError.object(body, what: "the policy patch")
            return json(.ok, try await service.directory.patchPolicy(scope: scope, patch: patch).json)
        }

        on(.get, "v1/admin/devices/:id", .admin) { request, context in
            return json(.ok, try await service.directory.device(id: context.parameters.get("id") ?? "").json)
        }

        on(.patch, "v1/admin/devices/:id", .admin) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let update = try ServiceError.decode(body, as: DeviceUpdate.init(json:))
            return json(.ok, try await service.directory.updateDevice(id: context.parameters.get("id") ?? "", update).json)
        }

        on(.delete, "v1/admin/devices/:id", .admin) { request, context in
            try await service.directory.deleteDevice(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }

        on(.put, "v1/admin/apps/:app/metadata", .admin) { request, context in
            let app = try app(context)
            let force = try booleanParameter(request, "force")
            try requireMediaType(request, "application/json")
            let bytes = try await bodyBytes(request, limit: Self.metadataLimit)
            let message = try messageParameter(request)
            return json(
                .ok,
                try await service.admin.putMetadata(
                    app: app, document: bytes, force: force, actor: service.auth.adminActor, message: message
                ).json)
        }

        on(.get, "v1/admin/apps/:app/metadata", .admin) { request, context in
            return try await metadataResponse(request, app: try app(context))
        }

        on(.get, "v1/admin/apps/:app/values", .admin) { request, context in
            let app = try app(context)
            let values = try await service.admin.values(app: app, scope: Scope.named(request.uri.queryParameters.get("scope")))
            return json(.ok, values.json)
        }

        on(.patch, "v1/admin/apps/:app/values", .admin) { request, context in
            let app = try app(context)
            let scope = try Scope.named(request.uri.queryParameters.get("scope"))
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of settings")
            let message = try messageParameter(request)
            let force = try booleanParameter(request, "force")
            return json(
                .ok,
                try await service.admin.patchValues(
                    app: app, scope: scope, patch: patch, actor: service.auth.adminActor, message: message, force: force
                ).json)
        }

        // One value inside a setting at a scope, by key path: set (PUT, the value as the body)
        // or removed (DELETE); the service makes it a merge patch of the whole setting.
        for method in [HTTPRequest.Method.put, .delete] {
            on(method, "v1/admin/apps/:app/values/**", .admin) { request, context in
                let app = try app(context)
                // (Not a ternary: its `nil` would become JSON's null, which JSONValue takes as a literal.)
                var value: JSONValue?
                if method == .put { value = try await jsonBody(request, limit: Self.bodyLimit) }
                let scope = try Scope.named(request.uri.queryParameters.get("scope"))
                let values = try await service.admin.setValue(
                    app: app, scope: scope, keyPath: try keyPath(context).keyPath, to: value,
                    actor: service.auth.adminActor, message: try messageParameter(request), force: try booleanParameter(request, "force"))
                return json(.ok, values.json)
            }
        }

        on(.get, "v1/admin/apps/:app/history", .admin) { request, context in
            let limit = try request.uri.queryParameters.get("limit").map { text throws(ServiceError) in
                guard let limit = Int(text) else { throw ServiceError(400, .badParameter, "limit must be a positive number of entries") }
                return limit
            }
            let before = try request.uri.queryParameters.get("before").map { text throws(ServiceError) in
                guard let before = Int64(text) else {
                    throw ServiceError(400, .badParameter, "before must be a history entry's number (the oldest one shown)")
                }
                return before
            }
            let scope = try request.uri.queryParameters.get("scope").map { text throws(ServiceError) in try Scope.named(String(text)) }
            let history = try await service.admin.history(app: try app(context), scope: scope, before: before, limit: limit)
            return json(.ok, history.json)
        }

        on(.post, "v1/admin/apps/:app/revert", .admin) { request, context in
            let revert = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RevertRequest.init(json:))
            return json(.created, try await service.admin.revert(app: try app(context), revert, actor: service.auth.adminActor).json)
        }

        on(.post, "v1/admin/apps/:app/rollouts", .admin) { request, context in
            let rollout = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RolloutRequest.init(json:))
            return json(
                .created, try await service.rollouts.startRollout(app: try app(context), rollout, actor: service.auth.adminActor).json)
        }

        on(.get, "v1/admin/apps/:app/rollout", .admin) { request, context in
            return json(.ok, try await service.rollouts.rolloutStatus(app: try app(context)).json)
        }

        on(.post, "v1/admin/apps/:app/rollout/resume", .admin) { request, context in
            return json(.ok, try await service.rollouts.resumeRollout(app: try app(context), actor: service.auth.adminActor).json)
        }

        on(.post, "v1/admin/apps/:app/rollout/abort", .admin) { request, context in
            return json(.ok, try await service.rollouts.abortRollout(app: try app(context), actor: service.auth.adminActor).json)
        }

        on(.get, "v1/admin/apps/:app/devices", .admin) { request, context in
            return json(.ok, try await service.admin.devices(app: try app(context)).json)
        }

        on(.get, "v1/admin/apps/:app/devices/:id/explain", .admin) { request, context in
            let id = context.parameters.get("id") ?? ""
            return json(.ok, try await service.admin.explain(app: try app(context), deviceID: id).json)
        }

        on(.post, "v1/admin/enrollment-tokens", .admin) { request, context in
            let token = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: EnrollmentTokenRequest.init(json:))
            return json(.created, try await service.directory.makeEnrollmentToken(token).json)
        }

        on(.get, "v1/admin/enrollment-tokens", .admin) { request, context in
            return json(.ok, try await service.directory.enrollmentTokens().json)
        }

        on(.delete, "v1/admin/enrollment-tokens/:id", .admin) { request, context in
            try await service.directory.revokeEnrollmentToken(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }
    }

    // MARK: - Reading requests

    /// The caller, within the limits: its address's, then its own (see ``RequestLimits``). A
    /// failed authentication counts against the address.
    @Sendable private func authenticate(_ request: Request, _ context: FleetRequestContext) async throws -> Authenticator.Principal {
        let client = client(request, context)
        try limits.admit(client: client)
        let principal: Authenticator.Principal
        do {
            let authorization = request.headers[.authorization]
            if let known = try service.auth.knownPrincipal(authorization: authorization) {
                principal = known
            } else {
                principal = try await service.auth.authenticate(authorization: authorization)
            }
        } catch let error as ServiceError where error.status == 401 {
            try limits.recordFailure(client: client, credential: Authenticator.bearerToken(request.headers[.authorization]))
            throw error
        }
        if case .device(let device) = principal { try limits.admit(device: device.id) }
        return principal
    }

    private func client(_ request: Request, _ context: FleetRequestContext) -> String { limits.client(of: request, context) }

    private func app(_ context: FleetRequestContext) throws -> String {
        context.parameters.get("app") ?? ""
    }

    /// The key path the rest of the URL's path names (each segment percent-decoded; `~1` and
    /// `~0` escapes as in a JSON pointer).
    private func keyPath(_ context: FleetRequestContext) throws(ServiceError) -> JSONPointer {
        let segments = context.parameters.getCatchAll().map { PercentEncoding.decoded($0) }
        guard segments.allSatisfy({ $0 != nil }), let path = JSONPointer(segments: segments.compactMap(\.self)) else {
            throw ServiceError(400, .badKeyPath, "a key path is percent-encoded segments, ~1 for a / and ~0 for a ~ inside a name")
        }
        return path
    }

    private func waitParameter(_ request: Request) throws(ServiceError) -> Int {
        guard let text = request.uri.queryParameters.get("wait") else { return 0 }
        guard !text.isEmpty, text.utf8.count <= 3, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(text),
            (0...DeviceGateway.maximumWait).contains(seconds)
        else {
            throw ServiceError(400, .badParameter, "wait must be a whole number of seconds from 0 to \(DeviceGateway.maximumWait)")
        }
        return seconds
    }

    /// The `message` query parameter (why, for the history): at most 1,024 characters.
    private func messageParameter(_ request: Request) throws(ServiceError) -> String {
        let message = request.uri.queryParameters.get("message") ?? ""
        guard message.unicodeScalars.count <= 1024 else {
            throw ServiceError(400, .badParameter, "message must be at most 1024 characters")
        }
        return message
    }

    private func booleanParameter(_ request: Request, _ name: String) throws(ServiceError) -> Bool {
        switch request.uri.queryParameters.get(name) {
        case nil, "false": return false
        case "true": return true
        default: throw ServiceError(400, .badParameter, "\(name) must be true or false")
        }
    }

    private func requireMediaType(_ request: Request, _ expected: String) throws(ServiceError) {
        let given = request.headers[.contentType] ?? ""
        let mediaType = given.split(separator: ";", maxSplits: 1).first.map { String($0.trimmingSpaces()) } ?? ""
        guard mediaType.lowercased() == expected else {
            throw ServiceError(
                415, .unsupportedMediaType,
                given.isEmpty ? "send the body as Content-Type: \(expected)" : "the body must be \(expected), not \(given)")
        }
    }

    private func bodyBytes(_ request: Request, limit: Int) async throws -> [UInt8] {
        Array(try await collectBody(request, limit: limit, what: "the body").readableBytesView)
    }

    private func jsonBody(_ request: Request, limit: Int, mediaType: String = "application/json") async throws -> JSONValue {
        try requireMediaType(request, mediaType)
        let bytes = try await bodyBytes(request, limit: limit)
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw ServiceError(400, .badRequest, "the body is not JSON: \(error)")
        }
    }

    // MARK: - Writing answers

    private func metadataResponse(_ request: Request, app: String) async throws -> Response {
        let (document, etag) = try await service.gateway.metadataDocument(app: app)
        if let tags = request.headers[.ifNoneMatch], tags.split(separator: ",").contains(where: { $0.trimmingSpaces() == Substring(etag) })
        {
            return Response(status: .notModified, headers: [.eTag: etag])
        }
        return Response(
            status: .ok, headers: [.eTag: etag, .contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: document)))
    }

    /// `response` with ``rotateTokenHeader`` when the admin asked `device` to rotate its token.
    private func withRotationRequest(_ response: Response, _ device: Device) -> Response {
        guard device.rotationRequested else { return response }
        var response = response
        response.headers[Self.rotateTokenHeader] = "requested"
        return response
    }

    /// The long-poll of a settings request (`If-None-Match`, `Fleetset-Policy`, `wait`), and the
    /// 304 to answer when it found the settings unchanged. A request with `wait` ends when the
    /// client goes away, and on a graceful shutdown (304); one without answers at once: it needs
    /// neither.
    private func settingsLongPoll(
        _ request: Request, _ context: FleetRequestContext, app: String, device: Device
    ) async throws -> (answer: DeviceGateway.LongPollAnswer, unchanged: Response) {
        let wait = try waitParameter(request)
        let known = request.headers[.ifNoneMatch].flatMap(RevisionTag.revision)
        let knownPolicy = request.headers[Self.policyHeader]
        let service = service
        let answer =
            wait == 0
            ? try await service.gateway.longPoll(app: app, device: device, knownRevision: known, knownPolicyTag: knownPolicy, wait: .zero)
            : try await whileOpen(context.channel, connections: connections, cancel: service.gateway.cancelLongPoll) { cancellation in
                try await withGracefulShutdownHandler {
                    try await service.gateway.longPoll(
                        app: app, device: device, knownRevision: known, knownPolicyTag: knownPolicy, wait: .seconds(wait),
                        cancellation: cancellation)
                } onGracefulShutdown: {
                    service.gateway.cancelLongPoll(cancellation)
                }
            }
        let unchanged = withDeviceHints(
            Response(status: .notModified, headers: [.eTag: RevisionTag.etag(known ?? 0), .cacheControl: "no-store"]), answer, request)
        return (answer, unchanged)
    }

    /// A settings answer with what the device should know besides: a token rotation the admin
    /// asked for, its agent policy's tag when the request's differs, and when to poll next
    /// when the server is busy.
    private func withDeviceHints(_ response: Response, _ answer: DeviceGateway.LongPollAnswer, _ request: Request) -> Response {
        var response = withRotationRequest(response, answer.device)
        if (request.headers[Self.policyHeader] ?? "0") != answer.policyTag {
            response.headers[Self.policyHeader] = answer.policyTag
        }
        if let nextPoll = answer.nextPoll {
            response.headers[Self.nextPollHeader] = "\(max(1, nextPoll.components.seconds))"
        }
        return response
    }

    /// `document`'s answer; `body`, when given, is its text written already.
    private func settingsResponse(_ document: SettingsDocument, body: String? = nil) -> Response {
        var response = Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: body ?? document.json.serialized())))
        response.headers[.eTag] = RevisionTag.etag(document.revision)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}

/// A JSON answer.
func json(_ status: HTTPResponse.Status, _ value: JSONValue) -> Response {
    Response(
        status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: value.serialized())))
}

/// Turns every refusal into an ``ErrorBody`` answer: a ``ServiceError`` as it is, Hummingbird's
/// own errors (no such route, 404/405) with a code, anything else as 500 `internal`, logged
/// with its detail (the answer does not carry it). Every answer, refusal or not, carries
/// `X-Content-Type-Options: nosniff`: a browser never guesses HTML or script from a settings
/// document a device or an admin wrote.
struct ErrorBodyMiddleware: RouterMiddleware {
    let logger: Logger
    let routes: RouteTable

    func handle(_ request: Request, context: FleetRequestContext, next: (Request, FleetRequestContext) async throws -> Response)
        async throws
        -> Response
    {
        var response = try await answer(request, context: context, next: next)
        response.headers[.xContentTypeOptions] = "nosniff"
        return response
    }

    private func answer(_ request: Request, context: FleetRequestContext, next: (Request, FleetRequestContext) async throws -> Response)
        async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let error as ServiceError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError where error.status == .notFound && !routes.methods(for: request.uri.path).isEmpty {
            let allowed = routes.methods(for: request.uri.path).map(\.rawValue).joined(separator: ", ")
            var response = json(
                .methodNotAllowed,
                ErrorBody(error: .methodNotAllowed, message: "\(request.method) is not served here; use \(allowed)").json)
            response.headers[.allow] = allowed
            return response
        } catch let error as HTTPError {
            let code: ErrorCode =
                switch error.status {
                case .notFound: .notFound
                case .methodNotAllowed: .methodNotAllowed
                case .contentTooLarge: .tooLarge
                default: .badRequest
                }
            let message = error.status == .notFound ? "no such route: \(request.method) \(request.uri.path)" : error.status.reasonPhrase
            var response = json(error.status, ErrorBody(error: code, message: message).json)
            response.headers.append(contentsOf: error.headers)
            return response
        } catch is CancellationError {
            return json(.serviceUnavailable, ErrorBody(error: .shuttingDown, message: "the server is shutting down; retry").json)
        } catch {
            logger.error(
                "request failed",
                metadata: ["event": "internal-error", "method": "\(request.method)", "path": "\(request.uri.path)", "error": "\(error)"])
            return json(.internalServerError, ErrorBody(error: .internalError, message: "the server failed; its log says why").json)
        }
    }
}

/// Counts every answer by route pattern, method and status (``ServerMetrics/request(route:method:status:)``).
/// A path no route matches counts as `unmatched`, so that scanners cannot make a series per path.
struct RequestMetricsMiddleware: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: FleetRequestContext, next: (Request, FleetRequestContext) async throws -> Response)
        async throws -> Response
    {
        do {
            let response = try await next(request, context)
            metrics.request(route: context.endpointPath ?? "unmatched", method: Self.method(request), status: response.status.code)
            return response
        } catch {
            // Errors become answers in the middleware after this one; what gets here is a
            // failure of the connection itself.
            metrics.request(route: context.endpointPath ?? "unmatched", method: Self.method(request), status: 500)
            throw error
        }
    }

    /// The method as a label: one of the methods fleetset serves, or `other` (any token is a
    /// method to HTTP; a label per token would let a client make series without end).
    static func method(_ request: Request) -> String {
        let method = request.method
        return [.get, .put, .post, .patch, .delete, .head, .options].contains(method) ? method.rawValue : "other"
    }
}

/// Which methods each route pattern serves, so that a known path with another method is
/// answered 405 with `Allow` (the router itself only knows "no match": 404).
struct RouteTable: Sendable {
    private let routes: [(method: HTTPRequest.Method, segments: [Substring])]

    init(_ routes: [(method: HTTPRequest.Method, path: String)]) {
        self.routes = routes.map { ($0.method, $0.path.split(separator: "/")) }
    }

    /// The methods served at `path`, in registration order (empty: no such path).
    func methods(for path: String) -> [HTTPRequest.Method] {
        let segments = path.split(separator: "/")
        return routes.filter { route in
            route.segments.count == segments.count
                && zip(route.segments, segments).allSatisfy { pattern, segment in pattern.hasPrefix(":") || pattern == segment }
        }.map(\.method)
    }
}

/// A refusal of the core answers as itself: its status and ``ErrorBody``, `WWW-Authenticate`
/// with a 401, `Retry-After` when it says when to come back.
extension ServiceError: HTTPResponseError {
    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = json(status, body.json)
        if status == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer realm=\"fleetset\"" }
        if let seconds = retryAfterSeconds { response.headers[.retryAfter] = String(seconds) }
        return response
    }
}

/// Authenticates every request of a group of routes, refuses one from the wrong kind of
/// caller (403 `admin-only` or `device-only`), and puts who sent it on the request's context
/// (``FleetRequestContext/principal``) for the route.
struct Authentication: RouterMiddleware {
    typealias Context = FleetRequestContext

    /// The caller the routes are for.
    let required: Routes.Access
    /// Finds who sent the request (rate limits and failures counted), or throws 401.
    let authenticate: @Sendable (Request, FleetRequestContext) async throws -> Authenticator.Principal

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let principal = try await authenticate(request, context)
        switch required {
        case .admin: try Authenticator.requireAdmin(principal)
        case .device: _ = try Authenticator.requireDevice(principal)
        case .anyone: break
        }
        context.principal = principal
        return try await next(request, context)
    }
}

/// The body of `request`, up to `limit` bytes: 413 `too-large` past it, 400 `bad-request` when
/// the client ended the connection before sending it all (`what` names it in the message).
func collectBody(_ request: Request, limit: Int, what: String) async throws(ServiceError) -> ByteBuffer {
    do {
        return try await request.body.collect(upTo: limit)
    } catch is NIOTooManyBytesError {
        throw ServiceError(413, .tooLarge, "\(what) is larger than \(limit) bytes")
    } catch {
        throw ServiceError(400, .badRequest, "\(what) could not be read: the connection ended early")
    }
}

extension RequestLimits {
    /// Who `request` counts against (see ``client(peer:forwardedFor:)``): its peer's address, or
    /// behind a trusted proxy the address the proxy names.
    func client(of request: Request, _ context: FleetRequestContext) -> String {
        client(peer: context.remoteAddress?.ipAddress ?? "unknown", forwardedFor: request.headers[Routes.forwardedForHeader])
    }
}
