import FleetProtocol
import FleetServerCore
import Hummingbird
import NIOCore
import PosixThreads

/// The request context of fleetset's routes: Hummingbird's core context plus the connection the
/// request came on, so that a long-poll ends when its client goes away, and limits can be kept
/// per client address.
struct FleetRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection (for HTTP/2, the request's stream).
    let channel: any Channel
    /// Who sent the request, once ``Authentication`` found it (`nil` on routes anyone may call).
    var principal: Authenticator.Principal?
    /// What an account's write did beyond its path and query, for its audit entry: the route
    /// notes it here (the middleware made it before calling the route).
    var auditNote: AuditNote?
    /// Where a long-poll that waits sends its answer later, when the connection is served
    /// without a task per request (``ParkingHTTP1Channel``); `nil`: the request's task waits.
    var parkedAnswer: ParkedAnswer?

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    var remoteAddress: SocketAddress? { channel.remoteAddress ?? channel.parent?.remoteAddress }

    /// Who sent the request; 401 on a route no ``Authentication`` guards (a route defined with
    /// the wrong access, which the tests would show).
    func caller() throws(ServiceError) -> Authenticator.Principal {
        guard let principal else { throw ServiceError(401, .unauthenticated, "send a token") }
        return principal
    }

    /// The account that sent the request, on an account's route.
    func account() throws(ServiceError) -> Caller { try Authenticator.requireAccount(try caller()) }

    /// What an account's request names, for its authorization: the path's app, its device
    /// (on routes whose `:id` is one), the `scope` query parameter.
    ///
    /// - Throws: 400 `bad-parameter` for a malformed scope (as the route would).
    func operationTarget(_ operation: AdminOperation, _ request: Request) throws(ServiceError) -> OperationTarget {
        OperationTarget(
            app: parameters.get("app"), deviceID: operation.targetsDevice ? parameters.get("id") : nil,
            scope: try request.uri.queryParameters.get("scope").map { text throws(ServiceError) in try Scope.named(String(text)) })
    }

    /// What the request names, for the audit trail: `app=kiosk scope=device:d-1 key=/a/b`.
    /// Anything that looks like one of fleetset's secrets (pasted as an id) is left out.
    func auditTarget(_ request: Request) -> String {
        var parts: [String] = []
        for name in ["app", "id", "name", "scope", "tokenId"] {
            if let value = parameters.get(name) { parts.append("\(name)=\(PercentEncoding.decoded(value) ?? value)") }
        }
        if let scope = request.uri.queryParameters.get("scope") { parts.append("scope=\(scope)") }
        let keyPath = parameters.getCatchAll()
        if !keyPath.isEmpty { parts.append("key=/" + keyPath.map { PercentEncoding.decoded($0) ?? String($0) }.joined(separator: "/")) }
        return Credentials.redacted(parts.joined(separator: " "))
    }

    /// The device that sent the request, on a device route.
    func device() throws(ServiceError) -> Device { try Authenticator.requireDevice(try caller()) }

    /// The device that sent the request about `app`, which must be one of its apps (else
    /// exactly what an app that does not exist gets, 404 `unknown-app`).
    func device(app: String) throws(ServiceError) -> Device { try Authenticator.requireDevice(try caller(), app: app) }
}

/// Runs `operation` with a ``WaitCancellation`` that is handed to `cancel` as soon as `channel`
/// goes away (the client disconnected or shut its sending side): a waiting long-poll then ends
/// at once and its waiter goes away, instead of holding memory for minutes. No task is made for
/// it: the close runs `cancel` where it happens. A channel the guard does not know runs
/// `operation` as it is.
func whileOpen<T>(
    _ channel: any Channel, connections: OpenConnections, cancel: @escaping @Sendable (WaitCancellation) -> Void,
    _ operation: (WaitCancellation) async throws -> T
) async rethrows -> T {
    let cancellation = WaitCancellation()
    guard let hook = connections.onClose(channel, { cancel(cancellation) }) else {
        if channel.isActive == false { cancel(cancellation) }
        return try await operation(cancellation)
    }
    defer { connections.remove(channel, hook) }
    return try await operation(cancellation)
}

/// The answer of a request that is not answered by the task that ran its route: a long-poll
/// parked in the ``ChangeNotifier`` while it waits. The route marks it ``park()`` and returns at
/// once (what it returns is not sent); whoever ends the wait sends the answer with
/// ``send(_:)``, once.
final class ParkedAnswer: Sendable {
    /// Ends the wait (304) when the client goes away or the server shuts down.
    let cancellation: WaitCancellation
    private let parked = Locked(false)
    private let sender: @Sendable (Response) async -> Void

    /// - Parameters:
    ///   - cancellation: what the connection cancels when its client goes away.
    ///   - send: writes the answer on the request's connection.
    init(cancellation: WaitCancellation, send: @escaping @Sendable (Response) async -> Void) {
        self.cancellation = cancellation
        self.sender = send
    }

    /// The route's answer will come through ``send(_:)``, not from the route.
    func park() { parked.withLock { $0 = true } }

    /// Whether the route parked the request.
    var isParked: Bool { parked.withLock { $0 } }

    /// Sends the parked request's answer.
    func send(_ response: Response) async { await sender(response) }
}

/// What an account's write adds to its audit entry beyond the path and query (the account a
/// token was made for, the role given, a revert's scope): a route writes it, the
/// ``Authentication`` middleware reads it after the route returned.
final class AuditNote: Sendable {
    private let parts = Locked<(target: [String], reason: String?)>(([], nil))

    /// Adds `what=value` pairs to the entry's target.
    func add(_ pairs: KeyValuePairs<String, String>) {
        parts.withLock { $0.target += pairs.map { "\($0.key)=\($0.value)" } }
    }

    /// The reason given in the body (a revert's or a rollout's message).
    func reason(_ text: String) {
        guard !text.isEmpty else { return }
        parts.withLock { $0.reason = text }
    }

    var text: String { Credentials.redacted(parts.withLock { $0.target.joined(separator: " ") }) }
    var reason: String? { parts.withLock { $0.reason } }
}
