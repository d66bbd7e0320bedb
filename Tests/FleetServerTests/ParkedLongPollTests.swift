import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import Foundation
import Testing

@testable import FleetServer

/// The server's own HTTP/1.1 connections (ParkingHTTP1Channel): a waiting long-poll is parked
/// in the notifier, its task gone, and answered on its connection when the wait ends. Raw
/// sockets, to see exactly what goes over the connection.
@Suite("Parked long-polls: connections without a task")
struct ParkedLongPollTests {
    /// A long-poll of `device` for the revision it has, waiting up to `wait` seconds.
    static func longPoll(token: String, revision: Int64, wait: Int = 60) -> [UInt8] {
        Array(
            ("GET /v1/apps/kiosk/settings?wait=\(wait) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\n"
                + "If-None-Match: \(RevisionTag.etag(revision))\r\n\r\n").utf8)
    }

    static let health = Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8)

    /// Waits until the server holds `count` long-polls (10 s at most).
    static func waitUntilHeld(_ server: TestFleetServer, _ count: Int) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while await server.notifier.heldCount != count {
            guard ContinuousClock.now < deadline else { throw TestServerFailed() }
            try await Task.sleep(for: .milliseconds(5))
        }
    }

    /// A new connection with a long-poll of `token`'s device for `revision`, once the server holds it.
    static func heldLongPoll(_ server: TestFleetServer, token: String, revision: Int64) async throws -> LoopbackSocket {
        let connection = try LoopbackSocket(port: server.port)
        #expect(connection.send(longPoll(token: token, revision: revision)))
        try await waitUntilHeld(server, 1)
        return connection
    }

    /// The server with the kiosk app and one device; its token and revision.
    static func withDevice(_ body: (TestFleetServer, _ token: String, _ revision: Int64) async throws -> Void) async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let revision = try #require(try await device.client.settings(app: "kiosk")).revision
            try await body(server, device.token, revision)
        }
    }

    @Test("a woken long-poll is answered on its connection, which then serves the next request; one whose client left leaves nothing held")
    func wokenAndGone() async throws {
        try await Self.withDevice { server, token, revision in
            let connection = try await Self.heldLongPoll(server, token: token, revision: revision)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 3])
            let woken = try #require(await connection.readResponseHead())
            #expect(woken.hasPrefix("HTTP/1.1 200") && woken.contains(RevisionTag.etag(revision + 1)), "\(woken)")
            #expect(connection.send(Self.health))
            #expect(await connection.readResponseHead()?.hasPrefix("HTTP/1.1 200") == true)

            do {
                _ = try await Self.heldLongPoll(server, token: token, revision: revision + 1)
            }  // closed here
            try await Self.waitUntilHeld(server, 0)
        }
    }

    @Test("a long-poll whose client stops sending (half-close) is answered 304 at once, and the connection closed")
    func halfClosed() async throws {
        try await Self.withDevice { server, token, revision in
            let connection = try await Self.heldLongPoll(server, token: token, revision: revision)
            connection.closeSending()
            let head = try #require(await connection.readResponseHead())
            #expect(head.hasPrefix("HTTP/1.1 304") && head.lowercased().contains("connection: close"), "\(head)")
            #expect(await connection.waitForClose(timeout: .seconds(10)))
            #expect(await server.notifier.heldCount == 0)
        }
    }

    @Test("requests sent together are answered in order: one behind a waiting long-poll waits for its answer")
    func pipelined() async throws {
        try await Self.withDevice { server, token, revision in
            let connection = try LoopbackSocket(port: server.port)
            #expect(connection.send(Self.health + Self.longPoll(token: token, revision: revision, wait: 1) + Self.health))
            let heads = [await connection.readResponseHead(), await connection.readResponseHead(), await connection.readResponseHead()]
            #expect(heads[0]?.hasPrefix("HTTP/1.1 200") == true && heads[0]?.contains("ETag") == false, "\(heads)")
            #expect(heads[1]?.hasPrefix("HTTP/1.1 304") == true && heads[1]?.contains(RevisionTag.etag(revision)) == true, "\(heads)")
            #expect(heads[2]?.hasPrefix("HTTP/1.1 200") == true, "\(heads)")
        }
    }

    @Test(
        "Connection: close is answered and then closed, and what came after it is not run; a body past every route's limit is refused at once when announced, and meets the route's own 413 when chunked"
    )
    func closeAndLimits() async throws {
        try await Self.withDevice { server, _, _ in
            // A write sent after the request that closes the connection is never run (RFC 9112 §9.6).
            let afterClose =
                "PATCH /v1/admin/apps/kiosk/values?scope=app HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestFleetServer.adminToken)\r\n"
                + "Content-Type: application/merge-patch+json\r\nContent-Length: 13\r\n\r\n{\"volume\": 9}"
            let closing = try LoopbackSocket(port: server.port)
            #expect(closing.send(Array(("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n" + afterClose).utf8)))
            let head = try #require(await closing.readResponseHead())
            #expect(head.hasPrefix("HTTP/1.1 200") && head.lowercased().contains("connection: close"), "\(head)")
            #expect(await closing.waitForClose(timeout: .seconds(10)))
            let values = try await server.admin.values(app: "kiosk", scope: "app")
            #expect(values.values["volume"] != .number(.integer(9)), "\(values)")

            // What is not HTTP is answered 400, saying so, and the connection closed.
            let garbled = try LoopbackSocket(port: server.port)
            #expect(garbled.send(Array("GET / HTTP/1.1\r\nHost x\r\n\r\n".utf8)))
            let refusedGarble = try #require(await garbled.readResponseHead())
            #expect(refusedGarble.hasPrefix("HTTP/1.1 400"), "\(refusedGarble)")
            #expect(await garbled.waitForClose(timeout: .seconds(10)))

            // A body past every route's limit, announced: 413 at once, unread, and closed.
            let announced = try LoopbackSocket(port: server.port)
            let announcedHead =
                "PUT /v1/admin/apps/kiosk/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestFleetServer.adminToken)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(FleetConnectionHandler.largestRouteBody + 1)\r\n\r\n"
            #expect(announced.send(Array(announcedHead.utf8)))
            let refusedAtOnce = try #require(await announced.readResponseHead())
            #expect(refusedAtOnce.hasPrefix("HTTP/1.1 413") && refusedAtOnce.lowercased().contains("connection: close"), "\(refusedAtOnce)")
            #expect(await announced.waitForClose(timeout: .seconds(10)))

            // The same, chunked (no length said): read up to the limit and a byte, and the
            // route's own limit refuses it; the connection goes on.
            let chunked = try LoopbackSocket(port: server.port)
            let chunkedHead =
                "PUT /v1/admin/apps/kiosk/metadata HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(TestFleetServer.adminToken)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            let chunk = Array("100000\r\n".utf8) + [UInt8](repeating: 0x20, count: 0x100000) + Array("\r\n".utf8)
            let chunks = (0..<5).flatMap { _ in chunk }
            #expect(chunked.send(Array(chunkedHead.utf8) + chunks + Array("0\r\n\r\n".utf8)))
            let refused = try #require(await chunked.readResponseHead())
            #expect(refused.hasPrefix("HTTP/1.1 413"), "\(refused)")
            #expect(chunked.send(Self.health))
            #expect(await chunked.readResponseHead()?.hasPrefix("HTTP/1.1 200") == true)
        }
    }

    @Test("a graceful stop answers parked long-polls 304 with Connection: close, closes idle connections, and ends")
    func gracefulStop() async throws {
        try await Self.withDevice { server, token, revision in
            let idle = try LoopbackSocket(port: server.port)
            #expect(idle.send(Self.health))
            #expect(await idle.readResponseHead()?.hasPrefix("HTTP/1.1 200") == true)
            let waiting = try await Self.heldLongPoll(server, token: token, revision: revision)
            let started = ContinuousClock.now
            let stopping = Task { await server.stopGracefully() }
            let head = try #require(await waiting.readResponseHead())
            #expect(head.hasPrefix("HTTP/1.1 304") && head.lowercased().contains("connection: close"), "\(head)")
            #expect(await waiting.waitForClose(timeout: .seconds(10)))
            #expect(await idle.waitForClose(timeout: .seconds(10)))
            await stopping.value
            #expect(ContinuousClock.now - started < .seconds(30))
            #expect(await server.notifier.heldCount == 0)
        }
    }

    @Test("the heap is trimmed once a burst has ended: enough jobs since the last trim, none running; the job count may wrap")
    func trimAfterBurst() {
        #expect(HeapTrimmer.burstEnded(submitted: 1_500, trimmedAt: 400, running: 0, burst: 1_000))
        #expect(!HeapTrimmer.burstEnded(submitted: 1_399, trimmedAt: 400, running: 0, burst: 1_000), "not a burst yet")
        #expect(!HeapTrimmer.burstEnded(submitted: 5_000, trimmedAt: 400, running: 3, burst: 1_000), "still running")
        #expect(HeapTrimmer.burstEnded(submitted: Int.min &+ 600, trimmedAt: Int.max &- 499, running: 0, burst: 1_000), "wrapped")
        #expect(!HeapTrimmer.burstEnded(submitted: 400, trimmedAt: 400, running: 0, burst: 1_000), "an idle server never trims")
    }

    @Test("the Date header is RFC 9110's IMF-fixdate, in GMT, across leap days and centuries")
    func dates() {
        #expect(HTTPDate.text(secondsSince1970: 0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.text(secondsSince1970: 784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.text(secondsSince1970: 951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.text(secondsSince1970: 4_107_542_399) == "Sun, 28 Feb 2100 23:59:59 GMT")
        #expect(HTTPDate.text(secondsSince1970: 1_795_000_000) == "Wed, 18 Nov 2026 11:06:40 GMT")
        #expect(HTTPDate.text(secondsSince1970: -1) == "Wed, 31 Dec 1969 23:59:59 GMT")
    }
}
