import Curl
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The name of the thread running the caller (`/proc/thread-self/comm`).
private func currentThreadName() -> String {
    guard let file = fopen("/proc/thread-self/comm", "r") else { return "" }
    defer { fclose(file) }
    var name = [CChar](repeating: 0, count: 32)
    guard fgets(&name, Int32(name.count), file) != nil else { return "" }
    return String(decoding: name.prefix { $0 != 0 && $0 != 10 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

@Suite("The client's transfer thread as a task executor")
struct ExecutorTests {
    @Test("a task that prefers the client's executor runs on its transfer thread, before and after its request")
    func runsOnTheTransferThread() async throws {
        try await withTestClient { client, servers in
            let names = try await Task(executorPreference: client.executor) { () async throws -> (String, Int, String) in
                let before = currentThreadName()
                let response = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
                return (before, response.status, currentThreadName())
            }.value
            #expect(names.0 == "fleetset-http" && names.1 == 200 && names.2 == "fleetset-http", "\(names)")
            // A task that does not ask for it stays off that thread.
            #expect(currentThreadName() != "fleetset-http")
        }
    }

    /// On the transfer thread, handing over a request or a cancellation sends no wakeup (the
    /// thread looks at its inbox before it waits). Were one lost, the thread would take it only
    /// at its one-second safety net: 20 requests in a row would take 20 s, not a fraction of one.
    @Test("requests and a cancellation handed over on the transfer thread go at once, without waiting for its safety net")
    func handedOverOnTheThread() async throws {
        try await withTestClient { client, servers in
            let clock = ContinuousClock()
            let started = clock.now
            let outcome = try await Task(executorPreference: client.executor) { () async throws -> (Int, String) in
                var answered = 0
                for _ in 0..<20 where try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag")).status == 200 {
                    answered += 1
                }
                // A request that never ends, cancelled from this thread: its error comes back at once.
                let hanging = Task(executorPreference: client.executor) {
                    try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=executor-\(answered)"))
                }
                hanging.cancel()
                switch await hanging.result {
                case .failure(is CancellationError): return (answered, "cancelled")
                case let other: return (answered, "\(other)")
                }
            }.value
            #expect(outcome == (20, "cancelled"))
            #expect(started.duration(to: clock.now) < .seconds(10), "a request waited for the safety net")
        }
    }

    @Test("a task that prefers a client shut down still runs (on the thread that starts it), and its request says so")
    func afterShutdown() async throws {
        let servers = try await TestServers.shared
        let client = try HTTPClient(configuration: testConfiguration(servers))
        await client.shutdown()
        let outcome = await Task(executorPreference: client.executor) { () async -> String in
            do {
                _ = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag"))
                return "answered"
            } catch let error as HTTPClientError {
                return "\(error.kind)"
            } catch {
                return "\(error)"
            }
        }.value
        #expect(outcome == "clientShutDown")
    }
}
