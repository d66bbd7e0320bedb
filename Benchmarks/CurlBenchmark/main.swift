// Benchmark of the Curl HTTP client (run it through Benchmarks/run, which starts the server).
//
//   CurlBenchmark 304 URL CAFILE ETAG REQUESTS ROUNDS
//       sequential conditional GETs answered 304 on a kept-alive connection; prints, per
//       round, the process CPU time (user + system, all threads) per request in µs.
//   CurlBenchmark cancel URL CAFILE ROUNDS
//       starts a request the server never answers, cancels its task, and prints, per round,
//       the time from `cancel()` until the request has thrown, in µs.

import Curl

#if canImport(Glibc)
import Glibc
#endif

func cpuMicroseconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    let user = Double(usage.ru_utime.tv_sec) * 1e6 + Double(usage.ru_utime.tv_usec)
    let system = Double(usage.ru_stime.tv_sec) * 1e6 + Double(usage.ru_stime.tv_usec)
    return user + system
}

func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

struct BenchmarkFailed: Error, CustomStringConvertible {
    let description: String
}

func notModifiedCost(client: HTTPClient, url: String, etag: String, requests: Int, rounds: Int) async throws {
    var request = HTTPClient.Request(url: url)
    request.setIfNoneMatch(etag)
    for round in 0...rounds {  // round 0 warms up
        let start = cpuMicroseconds()
        for _ in 0..<requests {
            let response = try await client.execute(request)
            guard response.status == 304 else { throw BenchmarkFailed(description: "expected 304, got \(response.status)") }
        }
        if round > 0 { print((cpuMicroseconds() - start) / Double(requests)) }
    }
}

func cancellationLatency(client: HTTPClient, url: String, rounds: Int) async throws {
    for _ in 0..<rounds {
        let request = Task { try await client.execute(HTTPClient.Request(url: url)) }
        try await Task.sleep(for: .milliseconds(50))  // let it reach the server
        let start = ContinuousClock.now
        request.cancel()
        let result = await request.result
        let latency = ContinuousClock.now - start
        guard case .failure(let error) = result, error is CancellationError else {
            throw BenchmarkFailed(description: "expected CancellationError, got \(result)")
        }
        print(microseconds(latency))
    }
}

let arguments = CommandLine.arguments
guard arguments.count >= 5, let mode = arguments.dropFirst().first else {
    print("usage: CurlBenchmark 304 URL CAFILE ETAG REQUESTS ROUNDS | cancel URL CAFILE ROUNDS")
    exit(2)
}
let client = try HTTPClient(configuration: .init(tls: .init(caFile: arguments[3])))
switch mode {
case "304" where arguments.count == 7:
    try await notModifiedCost(
        client: client, url: arguments[2], etag: arguments[4], requests: Int(arguments[5]) ?? 1000, rounds: Int(arguments[6]) ?? 5)
case "cancel":
    try await cancellationLatency(client: client, url: arguments[2], rounds: Int(arguments[4]) ?? 20)
default:
    print("unknown mode \(mode)")
    exit(2)
}
await client.shutdown()
