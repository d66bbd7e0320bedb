// The console's cost for a large fleet (release build: Benchmarks/console-run [DEVICES]).
//
// A fleet of DEVICES devices (default 5,000) in 10 groups, all with the kiosk app, each served
// its settings and reporting on them, in a SQLite store in this process; no HTTP (what is
// measured is what the console adds to the server's work per page). Side by side, in one run:
//   - baseline: the admin API's device list of the app (`GET /v1/admin/apps/kiosk/devices`, what
//     `fleetset admin devices` shows): `SettingsService.devices(app:)` and its JSON;
//   - the console's Apps page, Devices page and one Device page: the service's overview (and
//     the device's explanation and recent reports) and the HTML.
// Each is timed 21 times; the medians are printed with the page's size.

import FleetConsole
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStoreSQLite
import Foundation
import Logging

struct FixedClock: WallClock {
    func secondsSinceEpoch() -> Int64 { 1_795_000_000 }
}

let deviceCount = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 5_000
let folder = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-console-benchmark-\(getpid())").path
try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: folder) }

let store = try SQLiteStore(path: folder + "/fleet.sqlite")
let service = FleetServices(
    store: store, adminTokenHash: Credentials.hash("fsa_benchmark"), wallClock: FixedClock(),
    logger: Logger(label: "benchmark") { _ in SwiftLogNoOpLogHandler() })
let metadata = try String(contentsOfFile: "Tests/Browser/kiosk.metadata.json", encoding: .utf8)
_ = try await service.admin.putMetadata(app: "kiosk", document: Array(metadata.utf8), force: false, actor: "benchmark")
_ = try await service.admin.patchValues(app: "kiosk", scope: .group("group-3"), patch: ["volume": 3], actor: "benchmark")

print("making \(deviceCount) devices, each served its settings and reporting…")
for index in 0..<deviceCount {
    let device = Device(
        id: String(format: "d-%06d", index), tokenHash: Credentials.hash("fsd_\(index)"), apps: ["kiosk"], groups: ["group-\(index % 10)"],
        enrolledAt: 1_794_990_000, lastSeenAt: 1_794_999_000)
    try await store.addDevice(device)
    let settings = try await service.gateway.settings(app: "kiosk", device: device)
    let state: StatusReport.State = index % 50 == 0 ? .error : .applied
    try await service.gateway.recordStatus(
        app: "kiosk", device: device, StatusReport(revision: settings.revision, schemaVersion: 1, state: state, source: .agent))
}

/// The median of 21 runs of `body`, in milliseconds, and what the last run returned.
func timed<T>(_ body: () async throws -> T) async rethrows -> (milliseconds: Double, result: T) {
    var times: [Double] = []
    var result: T?
    for _ in 0..<21 {
        let start = ContinuousClock.now
        result = try await body()
        let elapsed = ContinuousClock.now - start
        times.append(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)
    }
    return (times.sorted()[times.count / 2], result!)
}

let csrf = "benchmark"
let api = try await timed { try await service.admin.devices(app: "kiosk").json.serialized() }
let apps = try await timed { ConsolePages.apps(try await ConsoleQueries(service).overview(), csrf: csrf).text }
let devices = try await timed {
    ConsolePages.devices(try await ConsoleQueries(service).overview(), filter: .init(), now: service.now, csrf: csrf).text
}
let filtered = try await timed {
    ConsolePages.devices(
        try await ConsoleQueries(service).overview(), filter: .init(group: "group-3", state: "error"), now: service.now, csrf: csrf
    ).text
}
let one = try await timed { () async throws -> String in
    let (device, standings) = try await ConsoleQueries(service).standings(deviceID: "d-000042")
    return ConsolePages.device(
        device, standings: standings,
        explanations: ["kiosk": ScopeValuesExplanation(try await service.admin.explain(app: "kiosk", deviceID: device.id))],
        recentReports: try await ConsoleQueries(service).recentReports(deviceID: device.id), now: service.now, csrf: csrf
    ).text
}

print("\(deviceCount) devices, median of 21 runs (in-process, no HTTP):")
print("| answer | median | size |")
print("|---|---|---|")
for (name, measured) in [
    ("admin API device list (baseline)", api), ("console Apps page", apps), ("console Devices page (first 200 of all)", devices),
    ("console Devices page, group and state filtered", filtered), ("console Device page", one),
] {
    print("| \(name) | \(String(format: "%.1f", measured.milliseconds)) ms | \(measured.result.utf8.count / 1024) KiB |")
}
