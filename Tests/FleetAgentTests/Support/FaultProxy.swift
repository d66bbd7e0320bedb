import Curl
import FleetJSON
import FleetTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PosixThreads

/// An HTTP proxy in front of the real server that can misbehave the way no `fleetset-server`
/// does: answer settings requests with 500, with garbage, or with a body over the agent's size
/// cap, and serve metadata that a newer server could send but this agent cannot honour.
/// Everything else is passed through to the server unchanged (long-polls included).
final class FaultProxy: Sendable {
    enum Fault: Sendable, Equatable {
        case none
        /// 500 with `Retry-After: seconds`.
        case serverError(retryAfter: Int)
        /// 200 with a body that is not JSON.
        case garbage
        /// 200 with a body of this many bytes.
        case oversized(bytes: Int)
        /// The server's metadata, its schema marked as written for draft 7 (unsupported here).
        case unsupportedMetadata
        /// A device's PATCH is held (never answered while this fault is in force).
        case holdPatch
        /// A device's PATCH is answered with this status and a protocol error body (`code`, one
        /// detail at `/greeting`), without reaching the server.
        case refusePatch(status: Int, code: String)
        /// An enrollment reaches the server, but its answer is lost: the agent gets a 502.
        case loseEnrollAnswer
        /// Settings requests reach the server without `If-None-Match` and without `wait`: every
        /// one is answered 200 at once with the current revision, as by a server or proxy that
        /// ignores conditional requests.
        case ignoreConditionalRequests
        /// A device's PATCH and status reports are answered with this status and an HTML page
        /// (no fleetset error body), as a proxy or captive portal in the way would.
        case proxyPage(status: Int)
    }

    /// The fault in force, how often each was served, and every Authorization header seen.
    final class State: Sendable {
        let fault = Locked(Fault.none)
        let counts = Locked<[String: Int]>([:])
        let authorizations = Locked<[String]>([])
    }

    /// The Authorization headers of every request the proxy received.
    var authorizationsSeen: [String] { state.authorizations.withLock { $0 } }

    let port: Int
    private let state: State
    var url: String { "http://127.0.0.1:\(port)" }

    private init(port: Int, state: State) {
        self.port = port
        self.state = state
    }

    /// Sets the fault for the requests from now on.
    func inject(_ new: Fault) { state.fault.withLock { $0 = new } }

    /// How many settings requests got a fault answer.
    func faultsServed(_ key: String) -> Int { state.counts.withLock { $0[key] ?? 0 } }

    /// How many settings requests the server answered with `status` through the proxy.
    func settingsAnswers(_ status: Int) -> Int { state.counts.withLock { $0["settings \(status)"] ?? 0 } }

    static func start(upstream: String, http: HTTPClient) async throws -> FaultProxy {
        let state = State()
        let router = Router()
        for method in [HTTPRequest.Method.get, .post, .patch] {
            router.on("**", method: method) { request, _ in try await forward(request, upstream: upstream, http: http, state: state) }
        }
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        var logger = Logger(label: "fault-proxy")
        logger.logLevel = .critical
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            }, logger: logger)
        Task.detached { try await app.run() }
        for await port in ports where port > 0 { return FaultProxy(port: port, state: state) }
        throw ProcessFailed(log: "the proxy did not start")
    }

    private static func forward(_ request: Request, upstream: String, http: HTTPClient, state: State) async throws -> Response {
        let path = request.uri.path
        let current = state.fault.withLock { $0 }
        if let authorization = request.headers[.authorization] { state.authorizations.withLock { $0.append(authorization) } }
        if request.method == .patch, current == .holdPatch {
            state.counts.withLock { $0["\(current)", default: 0] += 1 }
            while state.fault.withLock({ $0 }) == .holdPatch { try await Task.sleep(for: .milliseconds(50)) }
        }
        if request.method == .patch || (request.method == .post && path.hasSuffix("/status")), case .proxyPage(let status) = current {
            state.counts.withLock { $0["proxyPage \(request.method)", default: 0] += 1 }
            return Response(
                status: HTTPResponse.Status(code: status), headers: [.contentType: "text/html"],
                body: .init(byteBuffer: ByteBuffer(string: "<html><body><h1>\(status)</h1>Access denied by policy</body></html>")))
        }
        if request.method == .patch, case .refusePatch(let status, let code) = current {
            state.counts.withLock { $0["refusePatch", default: 0] += 1 }
            let body: JSONValue = [
                "error": .string(code), "message": "refused by the test's proxy",
                "details": [["pointer": "/greeting", "message": "is not what the proxy wants"]],
            ]
            return Response(
                status: HTTPResponse.Status(code: status), headers: [.contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: body.serialized())))
        }
        let isSettings = request.method == .get && path.hasSuffix("/settings")
        if isSettings, current != .none, current != Fault.unsupportedMetadata, current != .holdPatch, current != .loseEnrollAnswer,
            !current.isPatchFault
        {
            state.counts.withLock { $0["\(current)", default: 0] += 1 }
            switch current {
            case .serverError(let seconds):
                return Response(
                    status: .internalServerError, headers: [.retryAfter: "\(seconds)"], body: .init(byteBuffer: ByteBuffer(string: "oops")))
            case .garbage:
                return Response(
                    status: .ok, headers: [.contentType: "application/json", .eTag: "\"999\""],
                    body: .init(byteBuffer: ByteBuffer(string: "{\"app\": \"x\", garbage")))
            case .oversized(let bytes):
                let body = "{\"pad\": \"" + String(repeating: "x", count: bytes) + "\"}"
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(string: body)))
            default:
                break
            }
        }
        let ignoring = isSettings && current == .ignoreConditionalRequests
        var headers = HTTPClient.Headers()
        for name in [HTTPField.Name.authorization, .ifNoneMatch, .ifMatch, .contentType] where !(ignoring && name == .ifNoneMatch) {
            if let value = request.headers[name] { headers[name.rawName] = value }
        }
        let body = try await request.body.collect(upTo: 8 << 20)
        let query = ignoring ? "" : request.uri.query.map { "?" + $0 } ?? ""
        var limits = TransferLimits(timeout: .seconds(400), lowSpeedLimit: nil, maxResponseBytes: 16 << 20)
        limits.connectTimeout = .seconds(5)
        let upstreamRequest = HTTPClient.Request(
            method: HTTPClient.Method(rawValue: request.method.rawValue), url: upstream + path + query, headers: headers,
            body: body.readableBytes > 0 ? Array(buffer: body) : nil, limits: limits)
        let answer = try await http.execute(upstreamRequest)
        if isSettings { state.counts.withLock { $0["settings \(answer.status)", default: 0] += 1 } }
        if current == .loseEnrollAnswer, request.method == .post, path == "/v1/enroll" {
            state.counts.withLock { $0["loseEnrollAnswer", default: 0] += 1 }
            return Response(status: .badGateway, body: .init(byteBuffer: ByteBuffer(string: "the answer was lost on the way")))
        }
        var bytes = answer.body
        if current == Fault.unsupportedMetadata, request.method == .get, path.hasSuffix("/metadata"), answer.status == 200,
            case .object(var document) = try JSONParser.parse(bytes), case .object(var schema)? = document["schema"]
        {
            schema["$schema"] = "http://json-schema.org/draft-07/schema#"
            document["schema"] = .object(schema)
            bytes = Array(JSONValue.object(document).serialized().utf8)
        }
        var responseHeaders = HTTPFields()
        for name in ["ETag", "Content-Type", "Retry-After", "WWW-Authenticate"] {
            if let value = answer.headers[name], let field = HTTPField.Name(name) { responseHeaders[field] = value }
        }
        return Response(
            status: HTTPResponse.Status(code: answer.status), headers: responseHeaders, body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}

extension FaultProxy.Fault {
    /// Whether the fault is about device writes only.
    var isPatchFault: Bool {
        switch self {
        case .refusePatch, .proxyPage: true
        default: false
        }
    }
}
