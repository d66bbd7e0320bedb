// What issue 38's outbox costs, in one run (release build: Benchmarks/webhook-run), on the
// SQLite store in a temporary folder:
//
// 1. An admin value write (the service's `patchValues`, history entry included) with no
//    subscription (the baseline: what every write cost before issue 38), with 10 subscriptions
//    none of which receives it (the cost every write now pays: the subscriptions are read in its
//    transaction), and with a rollout start that 10 subscriptions receive (10 outbox rows
//    written in the same transaction).
// 2. The dispatcher's idle look: a claim on an outbox with nothing due (what each instance does
//    every --webhooks-look-interval), beside a store read of one device (a long-poll's cost).
//
// Each figure is the median of ROUNDS rounds of N operations; the rounds of the cases
// interleave, so the machine's noise falls on each alike.

import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStoreSQLite
import Foundation
import Logging

func say(_ line: String) {
    print(line)
    fflush(nil)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

final class FixedClock: WallClock {
    func secondsSinceEpoch() -> Int64 { Int64(Date().timeIntervalSince1970) }
}

let metadata = Array(
    #"{"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {"volume": {"type": "integer", "default": 5}, "title": {"type": "string", "default": "x"}}}}"#
        .utf8)

/// A service over a fresh SQLite store with kiosk's metadata and `subscriptions` subscriptions
/// to `events`.
func makeService(subscriptions: Int, events: [String]) async throws -> (FleetServices, String) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-webhook-bench-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    let service = FleetServices(
        store: try SQLiteStore(path: folder + "/fleet.sqlite"), adminTokenHash: "", wallClock: FixedClock(),
        logger: Logger(label: "bench") { _ in SwiftLogNoOpLogHandler() })
    _ = try await service.admin.putMetadata(app: "kiosk", document: metadata, force: false, actor: "bench")
    for index in 0..<subscriptions {
        _ = try await service.webhooks.create(WebhookRequest(url: "https://hooks.example.com/\(index)", events: events), actor: "bench")
    }
    return (service, folder)
}

let writes = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 500
let rounds = Int(CommandLine.arguments.dropFirst(2).first ?? "") ?? 7
say(
    "fleetset webhook benchmark: \(writes) operations per round, \(rounds) rounds, medians; SQLite in \(FileManager.default.temporaryDirectory.path)"
)

let cases: [(name: String, subscriptions: Int, events: [String])] = [
    ("no subscription (before issue 38)", 0, ["rollout.paused"]),
    ("10 subscriptions, none receives it", 10, ["rollout.paused"]),
]
var perWrite: [String: [Double]] = [:]
var services: [(String, FleetServices, String)] = []
for item in cases {
    let (service, folder) = try await makeService(subscriptions: item.subscriptions, events: item.events)
    services.append((item.name, service, folder))
}
for round in 0..<rounds {
    for (name, service, _) in services {
        let start = ContinuousClock.now
        for index in 0..<writes {
            _ = try await service.admin.patchValues(
                app: "kiosk", scope: .app, patch: ["volume": .number(.integer(Int64((round * writes + index) % 10)))], actor: "bench")
        }
        let elapsed = ContinuousClock.now - start
        perWrite[name, default: []].append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
    }
}
say("\n1. An admin value write (SQLite, history entry, fsync), µs per write:")
for item in cases {
    say(
        "   " + item.name.padding(toLength: 46, withPad: " ", startingAt: 0)
            + String(format: "%8.1f", median(perWrite[item.name]!) / Double(writes)))
}

// A rollout start that 10 subscriptions receive: 10 outbox rows in the write's transaction.
var startTimes: [String: [Double]] = [:]
let starting: [(String, Int)] = [("rollout started and aborted, no subscription", 0), ("… 10 subscriptions receive both", 10)]
var rolloutServices: [(String, FleetServices)] = []
for (name, count) in starting {
    rolloutServices.append((name, try await makeService(subscriptions: count, events: ["rollout.started", "rollout.aborted"]).0))
}
let rolloutPairs = max(10, writes / 10)
for _ in 0..<rounds {
    for (name, service) in rolloutServices {
        let start = ContinuousClock.now
        for _ in 0..<rolloutPairs {
            _ = try await service.rollouts.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "y"], waves: [.everyone]), actor: "bench")
            _ = try await service.rollouts.abortRollout(app: "kiosk", actor: "bench")
        }
        let elapsed = ContinuousClock.now - start
        startTimes[name, default: []].append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
    }
}
say("\n   A rollout started and aborted (two writes), µs per pair:")
for (name, _) in starting {
    say(
        "   " + name.padding(toLength: 46, withPad: " ", startingAt: 0)
            + String(format: "%8.1f", median(startTimes[name]!) / Double(rolloutPairs)))
}
let queued = try await rolloutServices[1].1.context.store.outboxCounts()[.pending] ?? 0
say("   (outbox rows written by the second: \(queued))")

// The dispatcher's idle look, beside a store read of one device.
let (idle, _) = try await makeService(subscriptions: 10, events: ["rollout.paused"])
let device = Device(id: "d-1", tokenHash: "h", apps: ["kiosk"], groups: [], enrolledAt: 0)
try await idle.context.store.addDevice(device)
var looks: [Double] = []
var reads: [Double] = []
for _ in 0..<rounds {
    var start = ContinuousClock.now
    for _ in 0..<writes { _ = try await idle.context.store.claimOutboxEntries(now: idle.now, claimedUntil: idle.now + 60, limit: 20) }
    var elapsed = ContinuousClock.now - start
    looks.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
    start = ContinuousClock.now
    for _ in 0..<writes { _ = try await idle.context.store.device(id: "d-1") }
    elapsed = ContinuousClock.now - start
    reads.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
}
say("\n2. The dispatcher's look at an outbox with nothing due (a write transaction), µs per look:")
say(
    "   " + "claim, nothing due".padding(toLength: 46, withPad: " ", startingAt: 0)
        + String(format: "%8.1f", median(looks) / Double(writes)))
say(
    "   " + "beside: a store read of one device".padding(toLength: 46, withPad: " ", startingAt: 0)
        + String(format: "%8.1f", median(reads) / Double(writes)))
say(String(format: "   at one look per 5 s per instance: %.4f %% of one core", median(looks) / Double(writes) / 5e6 * 100))
for (_, _, folder) in services { try? FileManager.default.removeItem(atPath: folder) }
