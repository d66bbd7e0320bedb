@_spi(Testing) import Curl
import Foundation
import Synchronization
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
    /// at its safety net, lengthened here to 600 s: the requests would not be done in 240 s, of
    /// which a loaded machine needs a fraction (0.1 s alone, 20 s under the whole suite). The test
    /// does not wait for them past that; the client's shutdown ends them.
    @Test("requests and a cancellation handed over on the transfer thread go at once, without waiting for its safety net")
    func handedOverOnTheThread() async throws {
        try await withTestClient({ $0.safetyNetWait = .seconds(600) }) { client, servers in
            let outcome = Mutex<String?>(nil)
            let work = Task(executorPreference: client.executor) {
                let said = await Self.requestsThenCancellation(client, servers)
                outcome.withLock { $0 = said }
            }
            let deadline = ContinuousClock.now.advanced(by: .seconds(240))
            while outcome.withLock({ $0 }) == nil, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(20))
            }
            work.cancel()
            #expect(outcome.withLock { $0 } == "done", "not done in 240 s: a request waited for the safety net")
        }
    }

    /// Five requests one after another, then one that never ends, cancelled: `"done"`, or what went wrong.
    private static func requestsThenCancellation(_ client: HTTPClient, _ servers: TestServers) async -> String {
        do {
            for _ in 0..<5 {
                let status = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/etag")).status
                guard status == 200 else { return "answered \(status)" }
            }
            let hanging = Task(executorPreference: client.executor) {
                try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/hang?id=executor-\(UUID())"))
            }
            hanging.cancel()
            switch await hanging.result {
            case .failure(is CancellationError): return "done"
            case let other: return "the cancelled request ended with \(other)"
            }
        } catch {
            return "\(error)"
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
