// Measures what issue 13 asks for, in one run (release build: Benchmarks/security-run):
//
// 1. The worst-case time of one validation with the pattern step budget, against the
//    40-character attack on `^(a+)+$`, beside the same validation of an ordinary value.
// 2. The server's long-poll wake-up cost for one device-scope write while 1,000 devices of the
//    app wait: the service and its SQLite store in this process (no HTTP: what is measured is the
//    waking), with the scoped wake-up of today against the app-wide wake-up every write caused
//    before (emulated by waking the app after the same write, which is exactly what the old
//    notifier did).

import ECMARegex
import FleetJSON
import FleetProtocol
import FleetSchema
import FleetServerCore
import FleetStoreSQLite
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#endif

func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}

/// Prints a line at once (standard output may be a pipe).
func say(_ line: String) {
    print(line)
    fflush(nil)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted[sorted.count / 2]
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

// MARK: - 1. Validation with the step budget

let schema = try JSONSchema(["type": "object", "properties": ["greeting": ["type": "string", "pattern": "^(a+)+$"]]])
let attack: JSONValue = ["greeting": .string(String(repeating: "a", count: 40) + "!")]
let ordinary: JSONValue = ["greeting": .string(String(repeating: "a", count: 40))]
var attackTimes: [Double] = []
var ordinaryTimes: [Double] = []
let clock = ContinuousClock()
for _ in 0..<51 {
    let start = clock.now
    let errors = schema.validate(attack)
    attackTimes.append(milliseconds(clock.now - start))
    precondition(errors.count == 1 && errors[0].message.contains("too expensive"))
    let startOrdinary = clock.now
    precondition(schema.validate(ordinary).isEmpty)
    ordinaryTimes.append(milliseconds(clock.now - startOrdinary))
}
say(
    "validation of the 40-character attack on ^(a+)+$ (51 runs): median \(String(format: "%.2f", median(attackTimes))) ms, worst \(String(format: "%.2f", attackTimes.max()!)) ms"
)
say("validation of an ordinary 40-character value (same schema):  median \(String(format: "%.4f", median(ordinaryTimes))) ms")

// Without the budget (the matcher's unbudgeted form, as every match was before): the time
// doubles with each `a`, so the 40-character attack is extrapolated from shorter ones.
let pattern = try ECMAScriptPattern("^(a+)+$")
var unbudgeted: [(Int, Double)] = []
for length in [18, 20, 22, 24] {
    let text = String(repeating: "a", count: length) + "!"
    let start = clock.now
    precondition(!pattern.matches(text))
    unbudgeted.append((length, milliseconds(clock.now - start)))
}
for (length, time) in unbudgeted { say("  without a budget, \(length) a's and a '!': \(String(format: "%.1f", time)) ms") }
if let (length, time) = unbudgeted.last {
    let hours = time * pow(2, Double(40 - length)) / 3_600_000
    say("  without a budget, 40 a's and a '!' (extrapolated, x2 per character): about \(String(format: "%.0f", hours)) hours of one core")
}

// MARK: - 2. Wake-up cost of one device-scope write with 1,000 long-polls waiting

struct FixedClock: WallClock {
    func secondsSinceEpoch() -> Int64 { 1_795_000_000 }
}

let devices = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 1000
let directory = NSTemporaryDirectory() + "fleetset-security-bench-\(getpid())"
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let store = try SQLiteStore(path: directory + "/fleet.sqlite")
let notifier = ChangeNotifier()
var logger = Logger(label: "bench")
logger.logLevel = .critical
let adminToken = "fsa_bench"
let service = SettingsService(
    store: store, adminTokenHash: Credentials.hash(adminToken), wallClock: FixedClock(), notifier: notifier, logger: logger)
let metadata = """
    {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
      "volume": {"type": "integer", "minimum": 0, "maximum": 100, "default": 5}}}}
    """
_ = try await service.putMetadata(app: "kiosk", document: Array(metadata.utf8), force: false)
let token = try await service.makeEnrollmentToken(["apps": ["kiosk"], "uses": .number(.integer(Int64(devices)))])
var enrolling: [Device] = []
for index in 0..<devices {
    let identity = try await service.enroll([
        "enrollmentToken": .string(token.enrollmentToken), "requestId": .string("bench-request-\(String(index + 100_000))"),
    ])
    guard case .device(let device) = try await service.authenticate(authorization: "Bearer " + identity.deviceToken) else { fatalError() }
    enrolling.append(device)
}
let enrolled = enrolling

/// Every device long-polls, waiting on revision 1.
let waits = enrolled.map { device in
    Task { try await service.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(600)) }
}
func settle(_ count: Int) async {
    while await notifier.waiterCount(of: "kiosk") < count { try? await Task.sleep(for: .milliseconds(1)) }
}
say("\(devices) devices enrolled; waiting for their long-polls")
await settle(devices)

func measureWrite(round: Int, appWide: Bool) async throws -> (cpu: Double, wall: Double, woken: Int) {
    let target = enrolled[round % devices]
    let cpu = cpuSeconds()
    let start = clock.now
    _ = try await service.patchValues(app: "kiosk", scope: "device:\(target.id)", patch: ["volume": .number(.integer(Int64(round % 90)))])
    var woken = await notifier.lastWakeCount
    if appWide {
        await notifier.changed("kiosk", scope: .app)  // what every write did before: wake the whole app
        woken = await notifier.lastWakeCount + woken
    }
    // Woken long-polls recompute their device's revision; all but the target's wait again.
    await settle(devices - 1)
    return (cpuSeconds() - cpu, milliseconds(clock.now - start), woken)
}

/// The device whose long-poll a write answered long-polls again, on its new revision.
func relaunch(_ device: Device) async throws {
    let revision = try await service.settings(app: "kiosk", device: device).revision
    _ = Task { try await service.longPoll(app: "kiosk", device: device, knownRevision: revision, wait: .seconds(600)) }
    await settle(devices)
}

var scoped: [(cpu: Double, wall: Double, woken: Int)] = []
var appWide: [(cpu: Double, wall: Double, woken: Int)] = []
for round in 0..<11 {
    // The target's long-poll answered; it polls again before the next write.
    let first = try await measureWrite(round: round * 2, appWide: false)
    scoped.append(first)
    try await relaunch(enrolled[(round * 2) % devices])
    let second = try await measureWrite(round: round * 2 + 1, appWide: true)
    appWide.append(second)
    try await relaunch(enrolled[(round * 2 + 1) % devices])
}
say("one device-scope write with \(devices) long-polls waiting (11 writes each, medians):")
func row(_ name: String, _ runs: [(cpu: Double, wall: Double, woken: Int)]) -> String {
    let cpu = String(format: "%.1f", median(runs.map(\.cpu)) * 1000)
    let wall = String(format: "%.1f", median(runs.map(\.wall)))
    return "  \(name) \(cpu) ms CPU, \(wall) ms until every long-poll waits again, \(runs[0].woken) woken"
}
say(row("before (every write woke the whole app):", appWide))
say(row("after (only the device's long-poll):    ", scoped))
for wait in waits { wait.cancel() }
try? FileManager.default.removeItem(atPath: directory)  // exit(0) runs no defer
exit(0)
