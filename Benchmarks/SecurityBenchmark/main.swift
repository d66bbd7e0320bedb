// Measures what issues 13 and 34 ask for, in one run (release build: Benchmarks/security-run):
//
// 1. The worst-case time of one validation with the pattern step budget, against the
//    40-character attack on `^(a+)+$`, beside the same validation of an ordinary value.
// 2. The server's long-poll wake-up cost for one device-scope write while 1,000 devices of the
//    app wait: the service and its SQLite store in this process (no HTTP: what is measured is the
//    waking), with the scoped wake-up of today against the app-wide wake-up every write caused
//    before (emulated by waking the app after the same write, which is exactly what the old
//    notifier did).
// 3. The write-back flood: history rows and bytes per 1,000 no-op and 1,000 real device writes
//    (before: a no-op write was committed like any other, emulated by the same commit), the
//    store read behind `GET history?limit=10` at 1,000, 10,000 and 100,000 entries (before: the
//    whole history read and the newest 10 kept), and admin writes while 10 devices alternate a
//    value, with and without the per-device write rate.

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
try? FileManager.default.removeItem(atPath: directory)  // a crashed run's, whose pid this one got again
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
let store = try SQLiteStore(path: directory + "/fleet.sqlite")
let notifier = ChangeNotifier()
var logger = Logger(label: "bench")
logger.logLevel = .critical
let adminToken = "fsa_bench"
let service = FleetServices(
    store: store, adminTokenHash: Credentials.hash(adminToken), wallClock: FixedClock(), notifier: notifier, logger: logger)
let metadata = """
    {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
      "volume": {"type": "integer", "minimum": 0, "maximum": 100, "default": 5, "x-writable": true}}}}
    """
_ = try await service.admin.putMetadata(app: "kiosk", document: Array(metadata.utf8), force: false, actor: "benchmark")
let token = try await service.directory.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], uses: Int64(devices)))
var enrolling: [Device] = []
for index in 0..<devices {
    let identity = try await service.gateway.enroll(
        EnrollRequest(enrollmentToken: token.enrollmentToken, requestId: "bench-request-\(String(index + 100_000))"))
    guard case .device(let device) = try await service.auth.authenticate(authorization: "Bearer " + identity.deviceToken) else {
        fatalError()
    }
    enrolling.append(device)
}
let enrolled = enrolling

/// Every device long-polls, waiting on revision 1.
let waits = enrolled.map { device in
    Task { try await service.gateway.longPoll(app: "kiosk", device: device, knownRevision: 1, wait: .seconds(600)) }
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
    _ = try await service.admin.patchValues(
        app: "kiosk", scope: .device(target.id), patch: ["volume": .number(.integer(Int64(round % 90)))], actor: "benchmark")
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
    let revision = try await service.gateway.settings(app: "kiosk", device: device).revision
    _ = Task { try await service.gateway.longPoll(app: "kiosk", device: device, knownRevision: revision, wait: .seconds(600)) }
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

// MARK: - 3. The write-back flood (issue 34)

/// The history's rows of `app` and their bytes as stored (the scopes' text, actor and message).
func historySize(_ store: SQLiteStore, app: String) async throws -> (rows: Int, bytes: Int) {
    let entries = try await store.history(app: app)
    return (
        entries.count,
        entries.reduce(0) { $0 + $1.change.scopesText.utf8.count + $1.change.actor.utf8.count + $1.change.message.utf8.count }
    )
}

say("the write-back flood:")
let flood = enrolled[0]
var floodRevision = try await service.gateway.settings(app: "kiosk", device: flood).revision
let floodBase = try await historySize(store, app: "kiosk")
// Before: a write that changed nothing was committed like any other, with the device's whole
// values in its history entry (emulated with the same commit the old code made).
let deviceValues: JSONObject = ["volume": 42]
floodRevision = try await service.gateway.patchSettings(
    app: "kiosk", device: flood, ifMatch: "\"\(floodRevision)\"", patch: deviceValues
).revision
let afterFirst = try await historySize(store, app: "kiosk")
for _ in 0..<1000 {
    let change = ChangeRecord(
        at: 1_795_000_000, actor: "device \(flood.id)", kind: .values,
        scopes: [.init(scope: .device(flood.id), patch: deviceValues, after: deviceValues)])
    _ = try await store.commit(AppWrite(app: "kiosk", values: [.device(flood.id): deviceValues], change: change))
}
let afterOldNoOps = try await historySize(store, app: "kiosk")
for _ in 0..<1000 {
    _ = try await service.gateway.patchSettings(app: "kiosk", device: flood, ifMatch: "\"\(floodRevision)\"", patch: deviceValues)
}
let afterNoOps = try await historySize(store, app: "kiosk")
for index in 0..<1000 {
    floodRevision = try await service.gateway.patchSettings(
        app: "kiosk", device: flood, ifMatch: "\"\(floodRevision)\"", patch: ["volume": .number(.integer(Int64(index % 2)))]
    ).revision
}
let afterReal = try await historySize(store, app: "kiosk")
_ = floodBase
say(
    "  1,000 no-op device writes, before (each committed; emulated without the masked copy the old entries also held): \(afterOldNoOps.rows - afterFirst.rows) history rows, \(afterOldNoOps.bytes - afterFirst.bytes) bytes"
)
say(
    "  1,000 no-op device writes, after:                   \(afterNoOps.rows - afterOldNoOps.rows) history rows, \(afterNoOps.bytes - afterOldNoOps.bytes) bytes"
)
say(
    "  1,000 real device writes (alternating a value):     \(afterReal.rows - afterNoOps.rows) history rows, \(afterReal.bytes - afterNoOps.bytes) bytes"
)

/// `GET history?limit=10`'s store read at `count` entries: before (the whole history read, then
/// the newest 10 kept) and after (one page in SQL). Medians of 11.
func historyReadTimes(entries count: Int) async throws -> (before: Double, after: Double) {
    let path = directory + "/history-\(count).sqlite"
    let filled = try SQLiteStore(path: path)
    var snapshot = StoreSnapshot()
    snapshot.metadata = [StoredMetadata(app: "kiosk", version: 1, document: metadata)]
    snapshot.history = (1...count).map { number in
        let values: JSONObject = ["volume": .number(.integer(Int64(number % 100)))]
        return HistoryEntry(
            app: "kiosk", number: Int64(number),
            change: ChangeRecord(
                at: 1_795_000_000 + Int64(number), actor: "device d-\(number % 1000)", kind: .values,
                scopes: [.init(scope: .device("d-\(number % 1000)"), patch: values, after: values)]))
    }
    try await filled.restore(snapshot)
    var before: [Double] = []
    var after: [Double] = []
    for _ in 0..<11 {
        var start = clock.now
        let whole = try await filled.history(app: "kiosk").suffix(10)
        before.append(milliseconds(clock.now - start))
        start = clock.now
        let page = try await filled.history(app: "kiosk", page: HistoryPage(limit: 10))
        after.append(milliseconds(clock.now - start))
        precondition(Array(whole) == page)
    }
    return (median(before), median(after))
}
for count in [1_000, 10_000, 100_000] {
    let (before, after) = try await historyReadTimes(entries: count)
    say(
        "  history?limit=10 at \(count) entries (store read, median of 11): before \(String(format: "%.2f", before)) ms, after \(String(format: "%.3f", after)) ms"
    )
}

/// Admin writes to the app while 10 devices alternate a value as fast as they may, for `seconds`:
/// how many of 40 admin writes succeed, and how many device writes were made. `limit`: the
/// server's per-device write rate (the same `RateLimiter` the HTTP layer holds each device's
/// writes to), or none (before).
func adminWritesDuringFlood(limit: RateLimiter<String>.Limit?) async throws -> (succeeded: Int, conflicts: Int, deviceWrites: Int) {
    let writers = Array(enrolled.dropFirst(1).prefix(10))
    let limiter = limit.map { LockedLimiter(RateLimiter<String>($0)) }
    let started = clock.now
    let deviceWrites = LockedCount()
    let flooding = writers.map { device in
        Task {
            var revision = try await service.gateway.settings(app: "kiosk", device: device).revision
            var value: Int64 = 0
            while !Task.isCancelled {
                if let limiter, !limiter.take(device.id, now: started.duration(to: clock.now)) {
                    try? await Task.sleep(for: .milliseconds(50))
                    continue
                }
                value = 1 - value
                do {
                    revision = try await service.gateway.patchSettings(
                        app: "kiosk", device: device, ifMatch: "\"\(revision)\"", patch: ["volume": .number(.integer(value))]
                    ).revision
                    deviceWrites.add()
                } catch {
                    revision = try await service.gateway.settings(app: "kiosk", device: device).revision
                }
            }
        }
    }
    var succeeded = 0
    var conflicts = 0
    for round in 0..<40 {
        do {
            _ = try await service.admin.patchValues(
                app: "kiosk", scope: .app, patch: ["volume": .number(.integer(Int64(50 + round % 2)))], actor: "benchmark")
            succeeded += 1
        } catch let error as ServiceError where error.code == .concurrentWrite {
            conflicts += 1
        }
        try await Task.sleep(for: .milliseconds(25))
    }
    for task in flooding { task.cancel() }
    for task in flooding { _ = await task.result }
    return (succeeded, conflicts, deviceWrites.value)
}
let unlimited = try await adminWritesDuringFlood(limit: nil)
let limited = try await adminWritesDuringFlood(limit: .init(rate: 0.2, burst: 30))
say("  40 admin writes while 10 devices alternate a value as fast as they may:")
say(
    "    before (no device write rate):    \(unlimited.succeeded) succeeded, \(unlimited.conflicts) refused 409 concurrent-write; \(unlimited.deviceWrites) device writes"
)
say(
    "    after (0.2 writes/s, burst 30):  \(limited.succeeded) succeeded, \(limited.conflicts) refused 409 concurrent-write; \(limited.deviceWrites) device writes"
)

try? FileManager.default.removeItem(atPath: directory)  // exit(0) runs no defer
exit(0)

/// A rate limiter shared by the flooding tasks.
final class LockedLimiter: @unchecked Sendable {
    private var limiter: RateLimiter<String>
    private let lock = NSLock()
    init(_ limiter: RateLimiter<String>) { self.limiter = limiter }
    func take(_ key: String, now: Duration) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return limiter.take(key, now: now) == nil
    }
}

/// A counter shared by the flooding tasks.
final class LockedCount: @unchecked Sendable {
    private var count = 0
    private let lock = NSLock()
    func add() {
        lock.lock()
        count += 1
        lock.unlock()
    }
    var value: Int {
        lock.lock()
        defer { lock.unlock() }
        return count
    }
}
