import FileWatch
import FleetDeviceFiles
import FleetDeviceState

/// A change left in the inbox, whose outcome can be looked up or awaited.
public struct ChangeRequest: Sendable, Hashable {
    /// The app.
    public let app: FleetApp
    /// The request's id (its file name in the inbox without `.json`).
    public let id: String

    /// How long a request may be out of the inbox and not yet in `changes.json` (the agent
    /// records a change a moment after it takes it) before it counts as unknown.
    public static let unrecordedGrace: Duration = .seconds(2)

    /// Where the change stands now.
    public var outcome: ChangeOutcome { app.outcome(ofRequest: id) }

    /// Waits until the change is applied or refused, or `timeout` passes (then
    /// ``ChangeOutcome/pending``). Watches `changes.json` with inotify; twice a second it also
    /// checks whether the request left the inbox without being recorded (refused by the inbox
    /// from a user who may not write): after ``unrecordedGrace`` of that, ``ChangeOutcome/unknown``.
    public func outcome(waitingUpTo timeout: Duration) async -> ChangeOutcome {
        let directory = app.layout.appDirectory(app.id)
        guard let watcher = try? DirectoryWatcher(directories: [directory]) else { return outcome }
        defer { watcher.stop() }
        let request = self
        return await withTaskGroup(of: ChangeOutcome?.self) { group in
            group.addTask {
                var current = request.outcome
                guard !current.isSettled else { return current }
                for await event in watcher.events {
                    switch event {
                    case .appeared(_, "changes.json"), .overflow:
                        current = request.outcome
                        if current.isSettled { return current }
                    default:
                        continue
                    }
                }
                return nil
            }
            group.addTask {
                // A request the inbox refused from a user who may not write never reaches
                // changes.json: once it has been gone from the inbox unrecorded for a while, say so.
                var unknownSince: ContinuousClock.Instant?
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    guard request.outcome == .unknown else {
                        unknownSince = nil
                        continue
                    }
                    let since = unknownSince ?? .now
                    unknownSince = since
                    if ContinuousClock.now - since >= Self.unrecordedGrace { return .unknown }
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
public indirect enum ChangeOutcome: Sendable, Hashable {
    /// Queued, sent, or confirmed but not yet in `settings.json`.
    case pending
    /// In `settings.json` at `revision`.
    case applied(revision: Int64)
    /// Refused by the device or the server; the text says why.
    case refused(String)
    /// Not in the inbox and not in `changes.json`: refused by the inbox (see the agent's log
    /// and the inbox's `refused/` folder), or ended so long ago that it is no longer remembered
    /// (the last 50 outcomes are).
    case unknown
    /// A later change of the same setting took this one's place before it was sent, so the
    /// value this one asked for was never sent: `by` is the change that carried its keys on (the
    /// last of the chain when that one was superseded too), `outcome` what became of it. Never
    /// `.superseded` itself.
    case superseded(by: String, outcome: ChangeOutcome)

    /// Whether the change has ended: applied or refused (for a superseded change: whether the
    /// change that took its place has).
    public var isSettled: Bool {
        switch self {
        case .applied, .refused: true
        case .pending, .unknown: false
        case .superseded(_, let outcome): outcome.isSettled
        }
    }
}
