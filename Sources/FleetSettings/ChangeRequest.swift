import FileWatch
import FleetDeviceFiles

/// A change left in the inbox, whose outcome can be looked up or awaited.
public struct ChangeRequest: Sendable, Hashable {
    /// The app.
    public let app: FleetApp
    /// The request's id (its file name in the inbox without `.json`).
    public let id: String

    /// Where the change stands now.
    public var outcome: ChangeOutcome { app.outcome(ofRequest: id) }

    /// Waits until the change is applied or refused, or `timeout` passes (then ``ChangeOutcome/pending``).
    /// Watches `changes.json` with inotify; no polling.
    public func outcome(waitingUpTo timeout: Duration) async -> ChangeOutcome {
        let directory = app.layout.appDirectory(app.id)
        guard let watcher = try? DirectoryWatcher(directories: [directory]) else { return outcome }
        defer { watcher.stop() }
        let request = self
        return await withTaskGroup(of: ChangeOutcome?.self) { group in
            group.addTask {
                var current = request.outcome
                guard current == .pending else { return current }
                for await event in watcher.events {
                    switch event {
                    case .appeared(_, "changes.json"), .overflow:
                        current = request.outcome
                        if current != .pending { return current }
                    default:
                        continue
                    }
                }
                return nil
            }
            group.addTask {
                try? await Task.sleep(for: timeout)
                return nil
            }
            let first = await group.next() ?? nil
            group.cancelAll()
            return first ?? request.outcome
        }
    }
}

/// How a change ended, as far as the device knows.
public enum ChangeOutcome: Sendable, Hashable {
    /// Queued, sent, or confirmed but not yet in `settings.json`.
    case pending
    /// In `settings.json` at `revision`.
    case applied(revision: Int64)
    /// Refused by the device or the server; the text says why.
    case refused(String)
}
