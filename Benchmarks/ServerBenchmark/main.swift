// The time from an admin change to the answer of a device's waiting long-poll, against a
// running fleetset-server (release build), over fleetset's libcurl client.
//
//   swift run -c release ServerBenchmark URL ADMIN_TOKEN DEVICE_TOKEN APP [TRIES]
//
// Each try: the device long-polls (wait 30 s) with its current revision; 20 ms later (so the
// poll is surely waiting) the admin PATCHes a value at app scope; the clock runs from just
// before the PATCH is sent until the long-poll's answer is in. The baseline, measured the
// same way in the same run, is the PATCH round trip on its own: the difference is what waking
// the long-poll and answering it costs. Prints median and p99 of each.
import Curl
import FleetClient
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

let arguments = CommandLine.arguments
guard arguments.count >= 5 else {
    print("usage: ServerBenchmark URL ADMIN_TOKEN DEVICE_TOKEN APP [TRIES]")
    exit(2)
}
let (url, adminToken, deviceToken, app) = (arguments[1], arguments[2], arguments[3], arguments[4])
let tries = arguments.count > 5 ? Int(arguments[5]) ?? 200 : 200

func percentile(_ samples: [Duration], _ fraction: Double) -> Double {
    let sorted = samples.sorted()
    let index = min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)
    let value = sorted[max(0, index)].components
    return Double(value.seconds) * 1000 + Double(value.attoseconds) / 1e15
}

try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
    let admin = FleetClient(http: http, baseURL: url, token: adminToken)
    let device = FleetClient(http: http, baseURL: url, token: deviceToken)
    guard var revision = try await device.settings(app: app)?.revision else { fatalError("no settings") }
    var wakeLatencies: [Duration] = []
    var patchRoundTrips: [Duration] = []
    for attempt in 0..<tries {
        let known = revision
        let poll = Task { try await device.settings(app: app, knownRevision: known, wait: 30) }
        try await Task.sleep(for: .milliseconds(20))
        let started = ContinuousClock.now
        _ = try await admin.patchValues(app: app, scope: "app", patch: ["title": .string("try \(attempt)")])
        let patched = ContinuousClock.now
        guard let document = try await poll.value else { fatalError("the long-poll timed out") }
        wakeLatencies.append(ContinuousClock.now - started)
        patchRoundTrips.append(patched - started)
        revision = document.revision
    }
    func row(_ name: String, _ samples: [Duration]) -> String {
        let median = percentile(samples, 0.5)
        let p99 = percentile(samples, 0.99)
        return "\(name)  median \(String(Int(median * 1000)))µs  p99 \(String(Int(p99 * 1000)))µs"
    }
    print("\(tries) tries")
    print(row("admin PATCH → long-poll answered", wakeLatencies))
    print(row("admin PATCH round trip (baseline)", patchRoundTrips))
}
