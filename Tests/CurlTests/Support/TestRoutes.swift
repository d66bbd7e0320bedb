import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// The routes every test server serves.
///
/// | route | answer |
/// |---|---|
/// | `GET /etag` | 200 with `ETag: "v1"`, or 304 when `If-None-Match: "v1"` |
/// | `GET /bytes?count=N[&stream=1]` | N bytes, with `Content-Length` or streamed without it |
/// | `GET /compressed` | ``compressedText`` gzip-encoded when the client accepts gzip |
/// | `GET /hang?id=X` | signals arrival of X, then never answers |
/// | `GET /drip` | one byte every 200 ms for 12 s |
/// | `* /echo` | the request body, with method and chosen headers echoed as `x-echo-*` |
/// | `GET /redirect?to=URL&status=N` | status N (default 302) with `Location: URL` (default: itself) |
/// | `GET /retry-after` | 503 with `Retry-After: 7` |
/// | `GET /barrier?group=G&count=N` | answers once N requests of group G are waiting |
/// | `GET /counted?id=X&changeAt=N&noteAt=M` | the Kth request of X: 304 with `x-count: K`, 200 when K = N, a 304 with `x-note` when K = M |
struct TestRoutes: Sendable {
    /// The body `/compressed` decodes to: repetitive text that gzip shrinks a lot.
    static let compressedText = String(repeating: "{\"setting\":\"idleResetMinutes\",\"value\":2}\n", count: 2_000)
    let signals: TestSignals
    private let gzippedText: [UInt8]

    init(signals: TestSignals) throws {
        self.signals = signals
        gzippedText = Array(try run("/bin/gzip", ["-c", "-9"], input: Data(Self.compressedText.utf8)))
    }

    func router() -> Router<BasicRequestContext> {
        let router = Router()
        let signals = signals
        let gzippedText = gzippedText

        router.get("etag") { request, _ -> Response in
            let etag = "\"v1\""
            if request.headers[.ifNoneMatch] == etag {
                return Response(status: .notModified, headers: [.eTag: etag])
            }
            return Response(
                status: .ok, headers: [.eTag: etag, .contentType: "application/json"],
                body: .init(byteBuffer: ByteBuffer(string: "{\"revision\":1}")))
        }

        router.get("bytes") { request, _ -> Response in
            let count = request.uri.queryParameters.get("count", as: Int.self) ?? 0
            let bytes = ByteBuffer(repeating: UInt8(ascii: "x"), count: count)
            guard request.uri.queryParameters.get("stream") != nil else {
                return Response(status: .ok, body: .init(byteBuffer: bytes))
            }
            return Response(
                status: .ok,
                body: ResponseBody { writer in
                    var remaining = bytes
                    while let chunk = remaining.readSlice(length: min(1024, remaining.readableBytes)), chunk.readableBytes > 0 {
                        try await writer.write(chunk)
                    }
                    try await writer.finish(nil)
                })
        }

        router.get("compressed") { request, _ -> Response in
            let accepted = request.headers[.acceptEncoding] ?? ""
            var headers: HTTPFields = [.contentType: "application/json"]
            headers[HTTPField.Name("x-accepted-encoding")!] = accepted
            guard accepted.contains("gzip") else {
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: Self.compressedText)))
            }
            headers[.contentEncoding] = "gzip"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: gzippedText)))
        }

        router.get("hang") { request, _ -> Response in
            await signals.arrive(request.uri.queryParameters.get("id") ?? "")
            try await Task.sleep(for: .seconds(3600))
            return Response(status: .noContent)
        }

        router.get("drip") { _, _ -> Response in
            Response(
                status: .ok,
                body: ResponseBody { writer in
                    for _ in 0..<60 {
                        try await writer.write(ByteBuffer(string: "."))
                        try await Task.sleep(for: .milliseconds(200))
                    }
                    try await writer.finish(nil)
                })
        }

        for method in [HTTPRequest.Method.get, .post, .put, .patch, .delete] {
            router.on("echo", method: method) { request, _ -> Response in
                let body = try await request.body.collect(upTo: 1 << 20)
                var headers: HTTPFields = [:]
                headers[HTTPField.Name("x-echo-method")!] = request.method.rawValue
                for name in ["if-match", "if-none-match", "content-type", "content-length", "user-agent", "x-custom", "expect"] {
                    if let value = request.headers[HTTPField.Name(name)!] {
                        headers[HTTPField.Name("x-echo-\(name)")!] = value
                    }
                }
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
            }
        }

        router.get("redirect") { request, _ -> Response in
            let status = request.uri.queryParameters.get("status", as: Int.self) ?? 302
            let target = request.uri.queryParameters.get("to") ?? "/redirect"  // without `to`: a loop
            return Response(status: .init(code: status), headers: [.location: target])
        }

        router.get("retry-after") { _, _ -> Response in
            Response(status: .serviceUnavailable, headers: [.retryAfter: "7"])
        }

        router.get("counted") { request, _ -> Response in
            let number = await signals.count(request.uri.queryParameters.get("id") ?? "")
            var headers: HTTPFields = [.eTag: "\"v1\""]
            headers[HTTPField.Name("x-count")!] = "\(number)"
            if number == request.uri.queryParameters.get("changeAt", as: Int.self) {
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: "changed")))
            }
            if number == request.uri.queryParameters.get("noteAt", as: Int.self) { headers[HTTPField.Name("x-note")!] = "yes" }
            return Response(status: .notModified, headers: headers)
        }

        router.get("barrier") { request, _ -> Response in
            let group = request.uri.queryParameters.get("group") ?? ""
            let count = request.uri.queryParameters.get("count", as: Int.self) ?? 1
            await signals.meet(group, count: count)
            return Response(status: .ok, body: .init(byteBuffer: ByteBuffer(string: group)))
        }
        return router
    }
}
