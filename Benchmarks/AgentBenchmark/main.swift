// AgentBenchmark: drives a running fleetsetd through a fleetset-server and measures it.
//
//   AgentBenchmark changes SERVER ADMIN_TOKEN_FILE APP SETTINGS_FILE AGENT_PID COUNT
//       COUNT admin changes of APP's `counter`, one at a time; for each, the time from sending
//       the admin PATCH to the new revision in SETTINGS_FILE (seen by inotify on its folder);
//       and the agent's CPU time over all of them (from /proc/PID/schedstat). Prints the
//       median, p90, p99 and max, and the CPU per applied change.
//   AgentBenchmark cpu AGENT_PID SECONDS
//       The agent's CPU time over SECONDS (for the idle and polling costs).
//   AgentBenchmark machine COUNT
//       The sync machine alone, in memory (what each of the fleet simulator's devices runs):
//       COUNT machines, each serving revision 1 and waiting in a long-poll, are given revision 2;
//       prints the CPU per machine to decide on it and write it (median of 5 rounds).
import Curl
import FileWatch
import FleetAgentCore
import FleetClient
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Nanoseconds the process's threads have run on a CPU: the first field of
/// /proc/PID/task/TID/schedstat, summed (the process's own schedstat is its main thread only).
func cpuNanoseconds(_ pid: String) -> Int64 {
    guard let threads = try? FileSystem.entryNames(of: "/proc/\(pid)/task"), !threads.isEmpty else {
        fatalError("cannot list the threads of process \(pid)")
    }
    var total: Int64 = 0
    for thread in threads {
        guard let bytes = try? FileSystem.readFile("/proc/\(pid)/task/\(thread)/schedstat"),
            let first = String(decoding: bytes, as: UTF8.self).split(separator: " ").first, let value = Int64(first)
        else { continue }
        total += value
    }
    return total
}

func revision(of path: String) -> Int64? {
    guard let bytes = try? FileSystem.readFile(path), case .object(let object)? = try? JSONParser.parse(bytes),
        case .number(let number)? = object["revision"]
    else { return nil }
    return number.int64Value
}

func percentile(_ sorted: [Duration], _ fraction: Double) -> Duration {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * fraction).rounded(.up)) - 1)]
}

func milliseconds(_ duration: Duration) -> String {
    let (seconds, attoseconds) = duration.components
    let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
    return "\(microseconds / 1000).\(String(microseconds % 1000 + 1000).dropFirst()) ms"
}

let arguments = CommandLine.arguments
switch arguments.count > 1 ? arguments[1] : "" {
case "cpu" where arguments.count == 4:
    let pid = arguments[2]
    let before = cpuNanoseconds(pid)
    try await Task.sleep(for: .seconds(Int64(arguments[3]) ?? 10))
    print("cpu_ns=\(cpuNanoseconds(pid) - before)")

case "changes" where arguments.count == 8:
    let (server, tokenFile, app, settingsFile, pid, count) = (
        arguments[2], arguments[3], arguments[4], arguments[5], arguments[6], Int(arguments[7]) ?? 100
    )
    let token = String(decoding: try FileSystem.readFile(tokenFile), as: UTF8.self).split(separator: "\n").first.map(String.init) ?? ""
    let directory = String(settingsFile[..<settingsFile.lastIndex(of: "/")!])
    let watcher = try DirectoryWatcher(directories: [directory])
    try await withHTTPClient(configuration: .init(allowInsecureHTTP: true)) { http in
        var events = watcher.events.makeAsyncIterator()
        let admin = FleetClient(http: http, baseURL: server, token: token)
        var latencies: [Duration] = []
        let cpuBefore = cpuNanoseconds(pid)
        for round in 1...count {
            let before = revision(of: settingsFile) ?? -1
            // Let the agent settle into its next long-poll before the change.
            try await Task.sleep(for: .milliseconds(20))
            let start = ContinuousClock.now
            _ = try await admin.patchValues(app: app, scope: "app", patch: ["counter": .number(.integer(Int64(round)))])
            while revision(of: settingsFile) == before {
                guard let event = await events.next() else { fatalError("the watcher stopped") }
                _ = event
            }
            latencies.append(ContinuousClock.now - start)
        }
        let cpu = cpuNanoseconds(pid) - cpuBefore
        let sorted = latencies.sorted()
        print(
            "changes=\(count) median=\(milliseconds(percentile(sorted, 0.5))) p90=\(milliseconds(percentile(sorted, 0.9))) "
                + "p99=\(milliseconds(percentile(sorted, 0.99))) max=\(milliseconds(sorted.last!)) "
                + "agent_cpu_per_change=\(milliseconds(.nanoseconds(cpu / Int64(count))))")
    }
    watcher.stop()

case "machine" where arguments.count == 3:
    let count = Int(arguments[2]) ?? 10_000
    typealias Machine = SyncMachine<ContinuousClock.Instant, MemoryAppFiles>
    let metadata = MetadataDocument(
        bytes: Array(
            #"{"app": "fleetsim", "version": 1, "schema": {"type": "object", "additionalProperties": false, "properties": {"message": {"type": "string", "default": "hello"}, "volume": {"type": "integer", "minimum": 0, "maximum": 10, "default": 5, "x-writable": true}}}}"#
                .utf8), etag: "\"1\"")
    func document(_ revision: Int64) -> SettingsDocument {
        SettingsDocument(app: "fleetsim", schemaVersion: 1, revision: revision, values: ["message": .string("m\(revision)"), "volume": 5])
    }
    func now() -> Machine.Moment { Machine.Moment(.now, wall: 1_800_000_000) }
    var rounds: [Duration] = []
    for _ in 0..<5 {
        var machines = (0..<count).map { _ in
            var machine = Machine(
                rules: SyncRules(app: "fleetsim", longPollWait: 300, pollInterval: .seconds(60), jitter: .seconds(10)),
                random: SystemRandomNumberGenerator(), files: MemoryAppFiles())
            _ = machine.handle(.started(LoadedState()), at: now())
            _ = machine.handle(.online(requests: []), at: now())
            _ = machine.handle(.settingsAnswer(SettingsAnswer(document: document(1), acceptsStatus: true)), at: now())
            _ = machine.handle(.metadataAnswer(metadata), at: now())
            return machine
        }
        let start = ContinuousClock.now
        var actions = 0
        for index in machines.indices {
            actions += machines[index].handle(.settingsAnswer(SettingsAnswer(document: document(2), acceptsStatus: true)), at: now()).count
        }
        rounds.append(ContinuousClock.now - start)
        precondition(machines.allSatisfy { $0.settings?.revision == 2 } && actions > 0, "revision 2 was not applied")
    }
    let median = rounds.sorted()[2]
    print(
        "machines=\(count) per_machine=\(Double(median.components.attoseconds / 1_000_000_000_000 + median.components.seconds * 1_000_000) / Double(count)) µs"
    )

default:
    print("usage: AgentBenchmark changes SERVER ADMIN_TOKEN_FILE APP SETTINGS_FILE AGENT_PID COUNT | cpu AGENT_PID SECONDS | machine COUNT")
    exit(2)
}
