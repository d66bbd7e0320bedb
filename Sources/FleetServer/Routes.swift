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
    /// The largest sign-in or password body read: 4 KiB.
    static let signInLimit = 4 << 10

    let service: FleetServices
    let logger: Logger
    let limits: RequestLimits
    let connections: OpenConnections
    let metrics: PrometheusCollectorRegistry?
    /// The admin console's routes (`nil`: no console).
    let console: ConsoleRoutes?
    /// Sign-in through the organization's OpenID Provider, when configured.
    let singleSignOn: SingleSignOn?

    func router() -> Router<FleetRequestContext> {
        var routes: [(method: HTTPRequest.Method, path: String, access: Access, handler: Handler)] = []
        defineRoutes { method, path, access, handler in routes.append((method, path, access, handler)) }
        let router = Router(context: FleetRequestContext.self)
        // Middleware applies to the routes added after it: add it first. The metrics see the
        // answer the error middleware makes of a refusal.
        router.add(middleware: RequestMetricsMiddleware(metrics: service.metrics))
        router.add(middleware: ErrorBodyMiddleware(logger: logger, routes: RouteTable(routes.map { ($0.method, $0.path) })))
        // The accounts' and the devices' routes each behind one authentication, which puts who
        // sent the request on its context; an account's operation is authorized and audited there.
        let devices = router.group().add(middleware: Authentication(required: .device, authenticate: authenticate, accounts: nil))
        for route in routes {
            switch route.access {
            case .anyone: router.on(RouterPath(route.path), method: route.method, use: route.handler)
            case .account(let operation):
                router.group().add(
                    middleware: Authentication(
                        required: .account(operation), authenticate: authenticate, accounts: .init(service: service, limits: limits))
                ).on(RouterPath(route.path), method: route.method, use: route.handler)
            case .device: devices.on(RouterPath(route.path), method: route.method, use: route.handler)
            }
        }
        return router
    }

    typealias Handler = @Sendable (Request, FleetRequestContext) async throws -> Response

    /// Who may call a route.
    enum Access: Sendable {
        /// Anyone: the route checks what it needs itself (enrollment, health, the console's pages).
        case anyone
        /// An account whose role and scope allow the operation (the permission table).
        case account(AdminOperation)
        /// A device's token.
        case device
    }

    func defineRoutes(_ on: (HTTPRequest.Method, String, Access, @escaping Handler) -> Void) {
        on(.get, "healthz", .anyone) { _, _ in json(.ok, ["status": "ok"]) }

        console?.define { method, path, handler in on(method, path, .anyone, handler) }

        // Prometheus' text format, for an account with read-metrics (a scraper sends its API
        // token, or the admin token file's, as a bearer token).
        if let metrics {
            on(.get, "metrics", .account(.getMetrics)) { request, context in
                return Response(
                    status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                    body: .init(byteBuffer: ByteBuffer(bytes: metrics.emitToBuffer())))
            }
        }

        // A person's name and password (and code) for a personal API token (`fleetset admin
        // login`): no token yet, so the route checks everything itself.
        on(.post, "v1/admin/sign-in", .anyone) { request, context in try await signIn(request, context) }
        defineSingleSignOn(on)

        defineDeviceRoutes(on)
        defineAdminRoutes { operation, handler in on(operation.route.method, operation.route.path, .account(operation), handler) }
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
                principal = try await service.auth.authenticate(authorization: authorization, from: client)
            }
        } catch let error as ServiceError where error.status == 401 {
            try limits.recordFailure(client: client, credential: Authenticator.bearerToken(request.headers[.authorization]))
            throw error
        }
        if case .device(let device) = principal { try limits.admit(device: device.id) }
        return principal
    }

    func client(_ request: Request, _ context: FleetRequestContext) -> String { limits.client(of: request, context) }

    /// `POST /v1/admin/sign-in`: within the address's limits (refused before any hashing while
    /// its failed-authentication budget is spent; a failure counts against it) and the
    /// account's (``SignInGuard``). Every answer but a 429 is audited.
    func signIn(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
        let client = try admitSignIn(request, context)
        if let singleSignOn, !singleSignOn.passwordSignIn { throw SingleSignOn.passwordsOff(singleSignOn) }
        let sent = try ServiceError.decode(try await jsonBody(request, limit: Self.signInLimit), as: SignInRequest.init(json:))
        // Who: the account's name when there is one (never a name typed that is none: it may be a password).
        let actor = try await service.accounts.exists(sent.name) ? sent.name : "-"
        let audit = { (status: Int, outcome: String, detail: String) in
            await service.audit.recordAfterTheFact(
                AuditDraft(
                    actor: actor, credential: "password", address: limits.address(of: request, context), action: "signIn",
                    target: "token-name=\(sent.tokenName)", status: status, outcome: outcome, detail: detail))
        }
        do {
            let account = try await service.accounts.signIn(name: sent.name, password: sent.password, code: sent.code)
            let response = try await tokenAnswer(
                APITokenRequest(name: sent.tokenName, expiresIn: sent.expiresIn), for: Caller(account: account, credential: .password))
            await audit(201, "ok", "")
            return response
        } catch let error as ServiceError {
            if error.status != .tooManyRequests { await audit(Int(error.status.code), error.code.rawValue, error.message) }
            if error.status == .unauthorized && error.code != .twoFactorRequired {
                try limits.recordFailure(client: client, credential: sent.name)
            }
            throw error
        }
    }

    /// The caller's address, once it is within its limits and its failed sign-ins' budget (a
    /// sign-in route checks this before it reads anything).
    func admitSignIn(_ request: Request, _ context: FleetRequestContext) throws -> String {
        let client = client(request, context)
        try limits.admit(client: client)
        try limits.admitSignIn(client: client)
        return client
    }

    /// What both sign-in routes answer: 201 with a new personal API token for `caller`, never cached.
    func tokenAnswer(_ token: APITokenRequest, for caller: Caller) async throws -> Response {
        var response = json(.created, try await service.accounts.createToken(token, by: caller).json)
        response.headers[.cacheControl] = "no-store"
        return response
    }

    func app(_ context: FleetRequestContext) throws -> String {
        context.parameters.get("app") ?? ""
    }

    /// The key path the rest of the URL's path names (each segment percent-decoded; `~1` and
    /// `~0` escapes as in a JSON pointer).
    func keyPath(_ context: FleetRequestContext) throws(ServiceError) -> JSONPointer {
        let segments = context.parameters.getCatchAll().map { PercentEncoding.decoded($0) }
        guard segments.allSatisfy({ $0 != nil }), let path = JSONPointer(segments: segments.compactMap(\.self)) else {
            throw ServiceError(400, .badKeyPath, "a key path is percent-encoded segments, ~1 for a / and ~0 for a ~ inside a name")
        }
        return path
    }

    func waitParameter(_ request: Request) throws(ServiceError) -> Int {
        guard let text = request.uri.queryParameters.get("wait") else { return 0 }
        guard !text.isEmpty, text.utf8.count <= 3, text.utf8.allSatisfy({ (0x30...0x39).contains($0) }), let seconds = Int(text),
            (0...DeviceGateway.maximumWait).contains(seconds)
        else {
            throw ServiceError(400, .badParameter, "wait must be a whole number of seconds from 0 to \(DeviceGateway.maximumWait)")
        }
        return seconds
    }

    /// The `message` query parameter (why, for the history): at most 1,024 characters.
    func messageParameter(_ request: Request) throws(ServiceError) -> String {
        let message = request.uri.queryParameters.get("message") ?? ""
        guard message.unicodeScalars.count <= 1024 else {
            throw ServiceError(400, .badParameter, "message must be at most 1024 characters")
        }
        return message
    }

    func booleanParameter(_ request: Request, _ name: String) throws(ServiceError) -> Bool {
        switch request.uri.queryParameters.get(name) {
        case nil, "false": return false
        case "true": return true
        default: throw ServiceError(400, .badParameter, "\(name) must be true or false")
        }
    }

    func requireMediaType(_ request: Request, _ expected: String) throws(ServiceError) {
        let given = request.headers[.contentType] ?? ""
        let mediaType = given.split(separator: ";", maxSplits: 1).first.map { String($0.trimmingSpaces()) } ?? ""
        guard mediaType.lowercased() == expected else {
            throw ServiceError(
                415, .unsupportedMediaType,
                given.isEmpty ? "send the body as Content-Type: \(expected)" : "the body must be \(expected), not \(given)")
        }
    }

    func bodyBytes(_ request: Request, limit: Int) async throws -> [UInt8] {
        Array(try await collectBody(request, limit: limit, what: "the body").readableBytesView)
    }

    func jsonBody(_ request: Request, limit: Int, mediaType: String = "application/json") async throws -> JSONValue {
        try requireMediaType(request, mediaType)
        let bytes = try await bodyBytes(request, limit: limit)
        do {
            return try JSONParser.parse(bytes)
        } catch {
            throw ServiceError(400, .badRequest, "the body is not JSON: \(error)")
        }
    }

    // MARK: - Writing answers

    func metadataResponse(_ request: Request, app: String) async throws -> Response {
        let (document, etag) = try await service.gateway.metadataDocument(app: app)
        if let tags = request.headers[.ifNoneMatch], tags.split(separator: ",").contains(where: { $0.trimmingSpaces() == Substring(etag) })
        {
            return Response(status: .notModified, headers: [.eTag: etag])
        }
        return Response(
            status: .ok, headers: [.eTag: etag, .contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: document)))
    }

    /// `response` with ``rotateTokenHeader`` when the admin asked `device` to rotate its token.
    func withRotationRequest(_ response: Response, _ device: Device) -> Response {
        guard device.rotationRequested else { return response }
        var response = response
        response.headers[Self.rotateTokenHeader] = "requested"
        return response
    }

    /// The answer to a settings request (`If-None-Match`, `Fleetset-Policy`, `wait`): `respond`
    /// makes it of the long-poll's answer and the 304 to send when the settings are unchanged.
    /// A request with `wait` ends when the client goes away, and on a graceful shutdown (304);
    /// one without answers at once: it needs neither.
    ///
    /// On a connection served without a task per request (the request's context has a
    /// ``ParkedAnswer``), a long-poll that must wait is parked: this returns at once, and the
    /// answer is sent when the wait ends (``sendParked(_:_:_:)``).
    func settingsLongPoll(
        _ request: Request, _ context: FleetRequestContext, app: String, device: Device,
        respond: @escaping @Sendable (_ answer: DeviceGateway.LongPollAnswer, _ unchanged: Response) throws -> Response
    ) async throws -> Response {
        let wait = try waitParameter(request)
        let known = request.headers[.ifNoneMatch].flatMap(RevisionTag.revision)
        let knownPolicy = request.headers[Self.policyHeader]
        let service = service
        let answerOf = { @Sendable [self] (answer: DeviceGateway.LongPollAnswer) throws -> Response in
            let unchanged = withDeviceHints(
                Response(status: .notModified, headers: [.eTag: RevisionTag.etag(known ?? 0), .cacheControl: "no-store"]), answer, request)
            return try respond(answer, unchanged)
        }
        if wait == 0 {
            return try answerOf(
                try await service.gateway.longPoll(app: app, device: device, knownRevision: known, knownPolicyTag: knownPolicy, wait: .zero)
            )
        }
        if let parked = context.parkedAnswer {
            let answer = try await service.gateway.longPoll(
                app: app, device: device, knownRevision: known, knownPolicyTag: knownPolicy, wait: .seconds(wait),
                cancellation: parked.cancellation
            ) { result in
                await sendParked(Result { try answerOf(try result.get()) }, request, context)
            }
            guard let answer else {
                parked.park()
                return Response(status: .accepted)
            }
            return try answerOf(answer)
        }
        return try answerOf(
            try await whileOpen(context.channel, connections: connections, cancel: service.gateway.cancelLongPoll) { cancellation in
                try await withGracefulShutdownHandler {
                    try await service.gateway.longPoll(
                        app: app, device: device, knownRevision: known, knownPolicyTag: knownPolicy, wait: .seconds(wait),
                        cancellation: cancellation)
                } onGracefulShutdown: {
                    service.gateway.cancelLongPoll(cancellation)
                }
            })
    }

    /// Sends the answer of a parked long-poll, as the middleware would have made it: a refusal
    /// as its ``ErrorBody``, `nosniff`, counted in the request metrics.
    func sendParked(_ result: Result<Response, any Error>, _ request: Request, _ context: FleetRequestContext) async {
        guard let parked = context.parkedAnswer else { return }
        var response: Response
        switch result {
        case .success(let answer): response = answer
        case .failure(let error): response = ErrorBodyMiddleware.answer(to: error, of: request, context: context, logger: logger)
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        service.metrics.request(
            route: context.endpointPath ?? "unmatched", method: RequestMetricsMiddleware.method(request), status: response.status.code)
        await parked.send(response)
    }

    /// A settings answer with what the device should know besides: a token rotation the admin
    /// asked for, its agent policy's tag when the request's differs, and when to poll next
    /// when the server is busy.
    func withDeviceHints(_ response: Response, _ answer: DeviceGateway.LongPollAnswer, _ request: Request) -> Response {
        var response = withRotationRequest(response, answer.device)
        response.headers[Self.acceptsHeader] = StatusOnPoll.acceptsToken  // this server records Fleetset-Status
        if (request.headers[Self.policyHeader] ?? "0") != answer.policyTag {
            response.headers[Self.policyHeader] = answer.policyTag
        }
        if let nextPoll = answer.nextPoll {
            response.headers[Self.nextPollHeader] = "\(max(1, nextPoll.components.seconds))"
        }
        return response
    }

    /// `document`'s answer; `body`, when given, is its text written already.
    func settingsResponse(_ document: SettingsDocument, body: String? = nil) -> Response {
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
