import FleetServerCore
import Logging
import ServiceLifecycle

/// Applies the history retention (`--history-keep`) at start and then every ``interval``,
/// while the server runs (see ``FleetServices/pruneHistory(keeping:)``).
struct HistoryPruner: Service, CustomStringConvertible {
    let service: FleetServices
    let retention: HistoryRetention
    let interval: Duration
    let logger: Logger

    /// How the service lifecycle names it in its debug lines.
    var description: String { "HistoryPruner" }

    func run() async throws {
        guard retention != .everything else {
            // Nothing to prune; but a service that returns ends the server (the service group
            // cancels the others), so it waits for the shutdown.
            try? await gracefulShutdown()
            return
        }
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    _ = try await service.admin.pruneHistory(keeping: retention)
                } catch {
                    logger.error("history retention failed", metadata: ["event": "history-pruned", "error": "\(error)"])
                }
                try? await Task.sleep(for: interval)
            }
        }
    }
}
