import FleetServerCore
import Logging
import PosixThreads
import ServiceLifecycle

/// Turns what happens to many devices into few webhook events while the server runs: error
/// and unsupported reports this instance receives, one event per app and state per minute
/// (``ReportDigest``), and devices gone silent, looked for every ``silenceInterval``
/// (``SilenceWatch``).
struct WebhookDigester: Service, CustomStringConvertible {
    /// How often finished minutes of reports are written: 5 s.
    static let flushInterval: Duration = .seconds(5)
    /// How often every device's last request is looked at: a minute.
    static let silenceInterval: Int64 = 60

    let service: FleetServices
    let silentAfter: Int64
    let logger: Logger

    var description: String { "WebhookDigester" }

    func run() async throws {
        let digest = Locked(ReportDigest())
        // Every report counts: a mass failure is when the count matters most.
        let events = service.events.subscribe(buffer: 1_000_000)
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    for await event in events {
                        guard case .statusReported(let app, let device, let state) = event else { continue }
                        let now = service.now
                        digest.withLock { $0.record(app: app, device: device, state: state, at: now) }
                    }
                }
                group.addTask {
                    var watch = SilenceWatch(threshold: silentAfter)
                    var lookedAt: Int64?
                    while !Task.isCancelled {
                        let now = service.now
                        var drafts = digest.withLock { $0.due(now: now) }
                        if lookedAt.map({ now - $0 >= Self.silenceInterval }) ?? true {
                            lookedAt = now
                            if let devices = try? await service.context.store.devices() { drafts += watch.look(devices, now: now) }
                        }
                        await write(drafts)
                        try? await Task.sleep(for: Self.flushInterval)
                    }
                }
                await group.next()
                group.cancelAll()
            }
        }
    }

    private func write(_ drafts: [WebhookEventDraft]) async {
        guard !drafts.isEmpty else { return }
        do {
            try await service.context.store.enqueue(drafts)
            service.events.publish(.webhooksQueued)
        } catch {
            logger.error("webhook events not queued", metadata: ["event": "webhook-outbox", "error": "\(error)"])
        }
    }
}
