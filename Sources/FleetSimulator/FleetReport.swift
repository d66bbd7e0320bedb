import FleetJSON

/// The distribution of how long devices took: count, median, 95th and 99th percentile, most.
public struct LatencySummary: Sendable, Equatable {
    public var count: Int
    public var p50: Duration
    public var p95: Duration
    public var p99: Duration
    public var max: Duration

    /// The summary of `samples` (nearest-rank percentiles); all zero for none.
    public init(_ samples: [Duration]) {
        let sorted = samples.sorted()
        count = sorted.count
        func rank(_ percentile: Int) -> Duration {
            guard !sorted.isEmpty else { return .zero }
            // Nearest rank: the smallest sample with at least `percentile`% of samples at or below it.
            let index = (percentile * sorted.count + 99) / 100 - 1
            return sorted[Swift.max(0, Swift.min(sorted.count - 1, index))]
        }
        p50 = rank(50)
        p95 = rank(95)
        p99 = rank(99)
        max = sorted.last ?? .zero
    }

    /// `{"count": 1000, "p50_ms": 12.5, …}`.
    public var json: JSONValue {
        [
            "count": .number(.integer(Int64(count))), "p50_ms": Self.milliseconds(p50), "p95_ms": Self.milliseconds(p95),
            "p99_ms": Self.milliseconds(p99), "max_ms": Self.milliseconds(max),
        ]
    }

    /// `p50 12 ms, p95 40 ms, p99 51 ms, max 60 ms`.
    public var text: String {
        "p50 \(Self.text(p50)), p95 \(Self.text(p95)), p99 \(Self.text(p99)), max \(Self.text(max))"
    }

    static func milliseconds(_ duration: Duration) -> JSONValue {
        let (seconds, attoseconds) = duration.components
        let microseconds = seconds * 1_000_000 + attoseconds / 1_000_000_000_000
        return .number(.double(Double(microseconds) / 1000))
    }

    static func text(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let milliseconds = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return milliseconds >= 10_000 ? "\(milliseconds / 1000) s" : "\(milliseconds) ms"
    }
}

/// A server process's use of the machine, read from `/proc` (see ``ProcessUsage``).
public struct ServerUsage: Sendable, Equatable {
    /// Resident memory now, in bytes.
    public var residentBytes: Int64
    /// The most resident memory so far (`VmHWM`), in bytes.
    public var peakResidentBytes: Int64
    /// CPU time (user and system) used during the phase measured.
    public var cpu: Duration

    public var json: JSONValue {
        [
            "rss_mb": .number(.double(Double(residentBytes) / 1_048_576)),
            "peak_rss_mb": .number(.double(Double(peakResidentBytes) / 1_048_576)),
            "cpu_s": .number(.double(Self.seconds(cpu))),
        ]
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// What one scenario run found: the simulator's answer, as JSON and as text.
public struct FleetReport: Sendable {
    /// One measured phase of a scenario (the fleet settling, a change reaching it, a restart).
    public struct Phase: Sendable {
        public var name: String
        /// How long it took in all.
        public var duration: Duration
        /// Devices the phase expected to reach (hold the change, come back).
        public var expected: Int
        /// How long each device that was reached took, from the start of the phase.
        public var latency: LatencySummary
        /// The server's memory and the CPU it used during the phase, when it runs here.
        public var server: ServerUsage?
        /// The CPU the simulator itself used during the phase (its devices' requests and
        /// answers): it shares the machine with the server, and must not be what limits a figure.
        public var simulatorCPU: Duration?
        /// Requests the fleet sent during the phase, by kind (`settings 304`, `report`, …).
        public var requests: [String: Int]
        /// Requests answered during the phase (the agent's log events counted beside them,
        /// `event …`, left out).
        public var answered: Int { requests.filter { !$0.key.hasPrefix("event ") }.values.reduce(0, +) }
        /// Failed requests during the phase, by kind (`503 overloaded`, `couldNotConnect`, …).
        public var errors: [String: Int]

        /// Devices the phase expected to reach that it did not.
        public var missing: Int { expected - latency.count }

        public var json: JSONValue {
            var object: JSONObject = [
                "phase": .string(name), "duration_ms": LatencySummary.milliseconds(duration),
                "expected": .number(.integer(Int64(expected))),
                "reached": .number(.integer(Int64(latency.count))), "latency": latency.json,
                "requests": .object(Self.counts(requests)), "errors": .object(Self.counts(errors)),
            ]
            let seconds = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
            if seconds > 0 {
                object["requests_per_second"] = .number(.double((Double(answered) / seconds * 10).rounded() / 10))
            }
            if let server { object["server"] = server.json }
            if let simulatorCPU { object["simulator"] = ["cpu_s": .number(.double(ServerUsage.seconds(simulatorCPU)))] }
            return .object(object)
        }

        static func counts(_ counts: [String: Int]) -> JSONObject {
            var object = JSONObject()
            for key in counts.keys.sorted() { object[key] = .number(.integer(Int64(counts[key] ?? 0))) }
            return object
        }
    }

    public var scenario: String
    public var devices: Int
    /// Devices with a long-poll in flight at the end.
    public var waiting: Int
    public var phases: [Phase]
    /// What a scenario found beside its phases (the rollout's outcome).
    public var notes: [String]

    public init(scenario: String, devices: Int, waiting: Int, phases: [Phase], notes: [String] = []) {
        self.scenario = scenario
        self.devices = devices
        self.waiting = waiting
        self.phases = phases
        self.notes = notes
    }

    public var json: JSONValue {
        [
            "scenario": .string(scenario), "devices": .number(.integer(Int64(devices))), "waiting": .number(.integer(Int64(waiting))),
            "phases": .array(phases.map(\.json)), "notes": .array(notes.map(JSONValue.string)),
        ]
    }

    /// A few lines for the terminal.
    public var text: String {
        var lines = ["\(scenario): \(devices) devices, \(waiting) waiting at the end"]
        for phase in phases {
            var line = "  \(phase.name): \(phase.latency.count)/\(phase.expected) in \(LatencySummary.text(phase.duration))"
            if phase.latency.count > 0 { line += " (\(phase.latency.text))" }
            line += "; \(phase.answered) requests"
            if let server = phase.server {
                line += "; server RSS \(server.residentBytes / 1_048_576) MB, CPU \(LatencySummary.text(server.cpu))"
            }
            if let simulatorCPU = phase.simulatorCPU { line += "; simulator CPU \(LatencySummary.text(simulatorCPU))" }
            let errors = phase.errors.keys.sorted().map { "\($0) ×\(phase.errors[$0] ?? 0)" }
            line += errors.isEmpty ? "; no errors" : "; errors: " + errors.joined(separator: ", ")
            lines.append(line)
        }
        for note in notes { lines.append("  \(note)") }
        return lines.joined(separator: "\n")
    }
}
