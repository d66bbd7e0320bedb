import Curl
import Foundation
import Testing

@Suite("Timeouts, low-speed limit, size cap and cancellation")
struct LimitsTests {
    @Test("a request the server never answers ends at its total timeout")
    func totalTimeout() async throws {
        try await withTestClient { client, servers in
            // Connected and through TLS first, so that a loaded machine's slow handshake cannot
            // use up the 300 ms (libcurl would call that a connect timeout).
            _ = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/echo"))
            var hanging = HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=\(UUID())")
            var limits = TransferLimits()
            limits.timeout = .milliseconds(300)
            hanging.limits = limits
            let error = await #expect(throws: HTTPClientError.self) { try await client.execute(hanging) }
            #expect(error?.kind == .timeout)
            #expect(error?.message.contains("took longer than its timeout") == true)
        }
    }

    @Test("a server that accepts TCP but never completes TLS hits the connect timeout")
    func connectTimeout() async throws {
        let listener = try SilentListener()
        try await withTestClient({ $0.limits.connectTimeout = .milliseconds(300) }) { client, _ in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "https://127.0.0.1:\(listener.port)/"))
            }
            #expect(error?.kind == .connectTimeout, "\(String(describing: error))")
            #expect(error?.message == "connecting to 127.0.0.1:\(listener.port) took longer than the connect timeout of 0.3 seconds")
        }
    }

    @Test("a port where nothing listens is reported as such")
    func connectionRefused() async throws {
        let port = try SilentListener.closedPort()
        try await withTestClient { client, _ in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "https://127.0.0.1:\(port)/"))
            }
            #expect(error?.kind == .couldNotConnect)
            #expect(error?.message == "could not connect to 127.0.0.1:\(port)")
        }
    }

    @Test("a transfer slower than the low-speed limit is aborted")
    func lowSpeedLimit() async throws {
        try await withTestClient({
            $0.limits.lowSpeedLimit = .init(bytesPerSecond: 1000, duration: .seconds(1))
        }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/drip"))
            }
            #expect(error?.kind == .lowSpeed)
            #expect(error?.message.contains("stayed below 1000 bytes/s") == true)
        }
    }

    @Test(
        "the size cap holds for announced and for streamed bodies, and a body of exactly the cap passes",
        arguments: ["", "&stream=1"])
    func sizeCap(streaming: String) async throws {
        try await withTestClient({ $0.limits.maxResponseBytes = 4096 }) { client, servers in
            let exact = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/bytes?count=4096\(streaming)"))
            #expect(exact.body.count == 4096)
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/bytes?count=100000\(streaming)"))
            }
            #expect(error?.kind == .responseTooLarge)
            #expect(error?.message.contains("larger than the limit of 4 KiB") == true)
        }
    }

    @Test("the size cap counts decoded bytes, so a small compressed body cannot expand past it")
    func sizeCapCountsDecodedBytes() async throws {
        try await withTestClient({ $0.limits.maxResponseBytes = 8192 }) { client, servers in
            let error = await #expect(throws: HTTPClientError.self) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/compressed"))
            }
            #expect(error?.kind == .responseTooLarge)
        }
    }

    @Test("per-request limits override the client's")
    func perRequestLimits() async throws {
        try await withTestClient({ $0.limits.maxResponseBytes = 10 }) { client, servers in
            var request = HTTPClient.Request(url: "\(servers.httpsBase)/bytes?count=1000")
            request.limits = TransferLimits(maxResponseBytes: 1000)
            let response = try await client.execute(request)
            #expect(response.body.count == 1000)
        }
    }

    /// Limits under which a request the server never answers is held for ten minutes.
    static let heldTenMinutes = TransferLimits(timeout: .seconds(600), lowSpeedLimit: nil)

    // The request's own timeout is far longer than the time limit: only cancellation can end it
    // in time.
    @Test("cancelling the task aborts a long-poll the server never answers", .timeLimit(.minutes(1)))
    func cancellation() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let longPoll = Task {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=\(id)", limits: Self.heldTenMinutes))
            }
            await servers.signals.waitForArrival(of: id)
            longPoll.cancel()
            let result = await longPoll.result
            // Ended by the cancellation, not by a timeout (the latency is in the benchmark, docs/measured.md).
            #expect(throws: CancellationError.self) { try result.get() }
        }
    }

    @Test("a task cancelled before its request starts never reaches the server")
    func cancelledBeforeStart() async throws {
        try await withTestClient { client, servers in
            let task = Task {
                withUnsafeCurrentTask { $0?.cancel() }
                return try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
            }
            await #expect(throws: CancellationError.self) { try await task.value }
        }
    }

    @Test("shutting the client down fails requests in flight with clientShutDown")
    func shutdownFailsInFlightRequests() async throws {
        let servers = try await TestServers.shared
        let client = try HTTPClient(configuration: testConfiguration(servers))
        let id = UUID().uuidString
        let longPoll = Task { try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=\(id)")) }
        await servers.signals.waitForArrival(of: id)
        await client.shutdown()
        let error = await #expect(throws: HTTPClientError.self) { try await longPoll.value }
        #expect(error?.kind == .clientShutDown)
        let late = await #expect(throws: HTTPClientError.self) {
            try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
        }
        #expect(late?.kind == .clientShutDown)
    }
}

@Suite("Start delay: a request on a timer waits in the client")
struct StartDelayTests {
    @Test("a request with a start delay reaches the server no sooner than the delay after it was handed over")
    func waitsItsDelay() async throws {
        try await withTestClient { client, servers in
            _ = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/echo"))  // connected first
            let id = UUID().uuidString
            let handedOver = ContinuousClock.now
            let request = Task {
                try await client.execute(
                    HTTPClient.Request(
                        url: "\(servers.httpsBase)/hang?id=\(id)", limits: LimitsTests.heldTenMinutes, startDelay: .milliseconds(500)))
            }
            await servers.signals.waitForArrival(of: id)
            let arrived = try #require(await servers.signals.arrivals[id])
            #expect(arrived - handedOver >= .milliseconds(500))
            request.cancel()
            await #expect(throws: CancellationError.self) { try await request.value }
        }
    }

    @Test("cancelled while it waits: CancellationError at once, and the server never sees it")
    func cancelledWhileWaiting() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let request = Task {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=\(id)", startDelay: .seconds(60)))
            }
            try await Task.sleep(for: .milliseconds(50))
            request.cancel()
            await #expect(throws: CancellationError.self) { try await request.value }
            #expect(await !servers.signals.hasArrived(id))
            // The client goes on serving.
            #expect(try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/echo")).status == 200)
        }
    }
}
