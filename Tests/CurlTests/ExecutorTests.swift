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
