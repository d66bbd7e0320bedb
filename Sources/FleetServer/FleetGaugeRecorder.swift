import FleetConsole
import FleetServerCore
import Logging
import PosixThreads
import ServiceLifecycle

/// How often the fleet's gauges are recorded, and when a device counts as silent (see
/// ``FleetGaugeRecorder``).
public struct GaugeRecording: Sendable, Hashable {
    /// How long between two recordings.
    public var interval: Duration
    /// Seconds since a device was last seen beyond which `fleetset_devices_silent` counts it.
    public var silentAfter: Int64

    public init(interval: Duration, silentAfter: Int64) {
        self.interval = interval
        self.silentAfter = silentAfter
    }
}

/// Records the fleet's gauges (``FleetGauges``: devices, silent devices, latest reports and
/// rollouts per app) on the server's metrics at start and then every interval, while the
/// server runs: what the alert rules read. Each pass reads the fleet's overview from the store,
/// as the console's Apps page does; a failed pass (the database away) is logged, keeps the
/// values of the last one and is tried again at the next tick.
public struct FleetGaugeRecorder: Service, CustomStringConvertible {
    let service: FleetServices
    let recording: GaugeRecording
    let logger: Logger
    /// The gauges set last, for zeroing the series of an app no longer there.
    private let last = Locked<FleetGauges?>(nil)

    public init(service: FleetServices, recording: GaugeRecording, logger: Logger) {
        self.service = service
        self.recording = recording
        self.logger = logger
    }

    /// How the service lifecycle names it in its debug lines.
    public var description: String { "FleetGaugeRecorder" }

    /// Reads the gauges from the store and sets them once.
    public func record() async throws {
        let gauges = try await ConsoleQueries(service).gauges(silentAfter: recording.silentAfter)
        let metrics = service.context.metrics
        let previous = last.withLock { last in
            defer { last = gauges }
            return last
        }
        for (series, value) in gauges.changes(after: previous) { metrics.set(series.name, series.dimensions, to: value) }
    }

    public func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await record()
                } catch {
                    logger.error("gauges not recorded", metadata: ["event": "gauges", "error": "\(error)"])
                }
                try? await Task.sleep(for: recording.interval)
            }
        }
    }
}
