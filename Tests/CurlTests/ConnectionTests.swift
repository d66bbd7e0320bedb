import Curl
import Foundation
import Testing

@Suite("Connection reuse and concurrency")
struct ConnectionTests {
    @Test("sequential requests reuse one kept-alive connection", arguments: [false, true])
    func connectionReuse(plainHTTP: Bool) async throws {
        try await withTestClient({ $0.allowInsecureHTTP = true }) { client, servers in
            let base = plainHTTP ? servers.plainHTTPBase : servers.httpsBase
            var newConnections: [Int] = []
            for _ in 0..<5 {
                var request = HTTPClient.Request(url: "\(base)/etag")
                request.setIfNoneMatch("\"v1\"")
                let response = try await client.execute(request)
                #expect(response.status == 304)
                newConnections.append(response.metrics.newConnections)
            }
            #expect(newConnections == [1, 0, 0, 0, 0])
        }
    }

    @Test("50 requests are in flight at once, multiplexed on one HTTP/2 connection")
    func fiftyConcurrentRequests() async throws {
        try await withTestClient({ $0.limits.timeout = .seconds(20) }) { client, servers in
            // The server answers none of them until all 50 have arrived: a client that sent
            // them one after another would time out instead.
            let group = UUID().uuidString
            let responses = try await withThrowingTaskGroup(of: HTTPClient.Response.self) { tasks in
                for _ in 0..<50 {
                    tasks.addTask {
                        try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/barrier?group=\(group)&count=50"))
                    }
                }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
            #expect(responses.count == 50)
            #expect(responses.allSatisfy { $0.status == 200 && $0.bodyText == group })
            #expect(responses.map(\.metrics.newConnections).reduce(0, +) == 1)
        }
    }

    /// Over plain HTTP/1.1 each request held by the server needs a connection of its own: the
    /// client's thread then watches hundreds of sockets at once (libcurl's multi_socket API over
    /// epoll, as the fleet simulator does with thousands).
    @Test("300 requests over plain HTTP are held at once, each on its own connection, and all are answered")
    func manyHeldConnections() async throws {
        try await withTestClient({
            $0.allowInsecureHTTP = true; $0.limits.timeout = .seconds(30)
        }) { client, servers in
            let group = UUID().uuidString
            let responses = try await withThrowingTaskGroup(of: HTTPClient.Response.self) { tasks in
                for _ in 0..<300 {
                    tasks.addTask {
                        try await client.execute(HTTPClient.Request(url: "\(servers.plainHTTPBase)/barrier?group=\(group)&count=300"))
                    }
                }
                return try await tasks.reduce(into: []) { $0.append($1) }
            }
            #expect(responses.count == 300)
            #expect(responses.allSatisfy { $0.status == 200 && $0.bodyText == group })
            #expect(responses.map(\.metrics.newConnections).reduce(0, +) == 300)
        }
    }

    /// Over plain HTTP libcurl cannot know whether a connection could carry more than one
    /// request until a response arrives on it: with `CURLOPT_PIPEWAIT` a second request would
    /// wait for the first long-poll's answer (a fleet simulator found this after a server
    /// restart). A fresh client, whose first request is held, shows it.
    @Test("one client serves many tasks' requests while others are held by the server", arguments: [false, true])
    func longPollDoesNotBlockOtherRequests(plainHTTP: Bool) async throws {
        try await withTestClient({
            // 30 s: the three requests below must end well before it even on a machine busy with
            // other builds and tests (a 10-s limit was reached under such load).
            $0.allowInsecureHTTP = true; $0.limits.timeout = .seconds(30)
        }) { client, servers in
            let base = plainHTTP ? servers.plainHTTPBase : servers.httpsBase
            let id = UUID().uuidString
            let longPoll = Task { try await client.execute(HTTPClient.Request(url: "\(base)/hang?id=\(id)")) }
            await servers.signals.waitForArrival(of: id)
            for _ in 0..<3 {
                let response = try await client.execute(HTTPClient.Request(url: "\(base)/etag"))
                #expect(response.status == 200)
            }
            // The long-poll was still held when the others were done: it ends by being cancelled,
            // not by its timeout (which would have freed the others only then).
            longPoll.cancel()
            let ending = await longPoll.result
            #expect(throws: CancellationError.self) { try ending.get() }
        }
    }
}
