import FleetServerCore
import Logging
import ServiceLifecycle

/// Moves staged rollouts on: every `interval`, ``FleetServices/superviseRollouts(onlyWhenDue:)``
/// looks at each running rollout with news (a report, a wave's time up) and admits, completes or
/// pauses it. Runs beside the HTTP server
/// until a graceful shutdown; a failed pass (the database away) is logged and tried again at
/// the next tick, never ending the server.
struct RolloutSupervisor: Service {
    let service: FleetServices
    let interval: Duration
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    try await service.rollouts.superviseRollouts(onlyWhenDue: true)
                } catch {
                    logger.error("rollout supervision failed", metadata: ["event": "rollout-supervision", "error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
