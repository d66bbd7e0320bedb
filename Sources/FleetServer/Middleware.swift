import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

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
        } catch {
            return Self.answer(to: error, of: request, context: context, logger: logger)
        }
    }

    /// The answer to a refusal that is not the router's own: a ``ServiceError`` as itself, a
    /// cancellation as 503 `shutting-down`, anything else as 500 `internal`, logged with its detail.
    static func answer(to error: any Error, of request: Request, context: FleetRequestContext, logger: Logger) -> Response {
        switch error {
        case let error as ServiceError:
            return error.answer
        case is CancellationError:
            return json(.serviceUnavailable, ErrorBody(error: .shuttingDown, message: "the server is shutting down; retry").json)
        default:
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
            // A parked long-poll is counted when its answer is sent (Routes.sendParked).
            if context.parkedAnswer?.isParked == true { return response }
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
    public func response(from request: Request, context: some RequestContext) throws -> Response { answer }

    /// The answer that says this refusal.
    var answer: Response {
        var response = json(status, body.json)
        if status == .unauthorized { response.headers[.wwwAuthenticate] = "Bearer realm=\"fleetset\"" }
        if let seconds = retryAfterSeconds { response.headers[.retryAfter] = String(seconds) }
        return response
    }
}

/// Authenticates every request of a group of routes, refuses one from the wrong kind of
/// caller (403 `admin-only` or `device-only`), and puts who sent it on the request's context
/// (``FleetRequestContext/principal``) for the route.
///
/// On an account's route it is also the one place where the request is authorized (the
/// operation's right from the permission table, and what the request names against the
/// caller's scope: ``AccountService/authorize(_:_:_:)``) and audited: every write, whatever its
/// outcome, and every refusal (401, 403) of a read, becomes an entry of the audit trail.
struct Authentication: RouterMiddleware {
    typealias Context = FleetRequestContext

    /// The caller the routes are for.
    let required: Routes.Access
    /// Finds who sent the request (rate limits and failures counted), or throws 401.
    let authenticate: @Sendable (Request, FleetRequestContext) async throws -> Authenticator.Principal
    /// What account routes need besides (`nil` on the devices' routes).
    let accounts: AccountChecks?

    /// The authorization and the audit trail of account routes.
    struct AccountChecks: Sendable {
        let service: FleetServices
        let limits: RequestLimits
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard case .account(let operation) = required else {
            var context = context
            let principal = try await authenticate(request, context)
            if case .device = required { _ = try Authenticator.requireDevice(principal) }
            context.principal = principal
            return try await next(request, context)
        }
        var context = context
        var caller: Caller?
        do {
            let principal = try await authenticate(request, context)
            caller = try Authenticator.requireAccount(principal)
            try await accounts?.service.accounts.authorize(caller!, operation, try context.operationTarget(operation, request))
            context.principal = principal
            if operation.isWrite { context.auditNote = AuditNote() }
            let response = try await next(request, context)
            if operation.isWrite { await record(operation, request, context, caller, status: Int(response.status.code), outcome: "ok") }
            return response
        } catch let error as ServiceError {
            // A rate limit is not an action: 429s are counted, not written down (a flood of them
            // would flood the trail).
            if error.status != .tooManyRequests && (operation.isWrite || error.status == .unauthorized || error.status == .forbidden) {
                await record(
                    operation, request, context, caller, status: Int(error.status.code), outcome: error.code.rawValue,
                    detail: error.message,
                    refused: error.refusedCaller)
            }
            throw error
        } catch {
            if operation.isWrite {
                await record(operation, request, context, caller, status: 500, outcome: ErrorCode.internalError.rawValue)
            }
            throw error
        }
    }

    private func record(
        _ operation: AdminOperation, _ request: Request, _ context: Context, _ caller: Caller?, status: Int, outcome: String,
        detail: String? = nil, refused: ServiceError.RefusedCaller? = nil
    ) async {
        guard let accounts else { return }
        let draft = AuditDraft(
            actor: caller?.name ?? refused?.account ?? "-", credential: caller?.credential.description ?? refused?.credential ?? "-",
            address: accounts.limits.address(of: request, context),
            action: operation.rawValue,
            target: [context.auditTarget(request), context.auditNote?.text ?? ""].filter { !$0.isEmpty }
                .joined(separator: " "), status: status, outcome: outcome,
            detail: detail ?? request.uri.queryParameters.get("message") ?? context.auditNote?.reason ?? "")
        await accounts.service.audit.recordAfterTheFact(draft)
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
    /// The address `request` came from (behind a trusted proxy, the one it names), for the
    /// audit trail.
    func address(of request: Request, _ context: FleetRequestContext) -> String {
        address(peer: context.remoteAddress?.ipAddress ?? "unknown", forwardedFor: request.headers[Routes.forwardedForHeader])
    }

    /// Who `request` counts against (see ``client(peer:forwardedFor:)``): its peer's address, or
    /// behind a trusted proxy the address the proxy names.
    func client(of request: Request, _ context: FleetRequestContext) -> String {
        client(peer: context.remoteAddress?.ipAddress ?? "unknown", forwardedFor: request.headers[Routes.forwardedForHeader])
    }
}
