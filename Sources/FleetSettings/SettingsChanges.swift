import FileWatch
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata

/// A new revision of an app's settings in `settings.json`.
public struct SettingsChange: Sendable, Hashable {
    /// The new settings.
    public let settings: AppSettings
    /// The revision before, `nil` when there were no settings.
    public let previousRevision: Int64?
    /// The top-level keys whose values changed, sorted.
    public let changedKeys: [String]
}

extension FleetApp {
    /// Every new revision written to `settings.json` after `revision` (by default, the one there
    /// now), in order, as the agent writes them: an inotify watch on the app's folder sees each
    /// atomic rename. A reader that falls one revision behind gets it from
    /// `settings.previous.json`; one that falls further behind skips to the newest. The sequence
    /// ends when the task iterating it is cancelled.
    ///
    /// While the app's folder does not exist yet (the agent has not run), the sequence checks
    /// for it every second.
    public func changes(after revision: Int64? = nil) -> AsyncStream<SettingsChange> {
        let (stream, continuation) = AsyncStream.makeStream(of: SettingsChange.self, bufferingPolicy: .unbounded)
        let app = self
        let directory = layout.appDirectory(id)
        // Watch before reading, so nothing written after this call returns is missed.
        let watching = try? DirectoryWatcher(directories: [directory])
        let generations = readGenerations()
        var sequencer = SettingsSequencer(start: revision.map { .revision($0) } ?? .current, on: generations)
        let first = sequencer.advance(generations)
        let task = Task {
            var watcher = watching
            while watcher == nil, !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                watcher = try? DirectoryWatcher(directories: [directory])
            }
            guard let watcher else { return }
            for change in first { continuation.yield(change) }
            // The folder may have appeared just now: look at what it holds.
            for change in sequencer.advance(app.readGenerations()) { continuation.yield(change) }
            await withTaskCancellationHandler {
                for await event in watcher.events {
                    switch event {
                    case .appeared(_, "settings.json"), .overflow:
                        for change in sequencer.advance(app.readGenerations()) { continuation.yield(change) }
                    default:
                        continue
                    }
                }
            } onCancel: {
                watcher.stop()
            }
            continuation.finish()
        }
        continuation.onTermination = { _ in task.cancel() }
        return stream
    }

    /// `settings.json`, then `settings.previous.json` (read in that order, so the previous
    /// generation is never newer than the current one read).
    func readGenerations() -> SettingsSequencer.Generations {
        let file = layout.settingsFile(id)
        func read(_ bytes: [UInt8]??) -> AppSettings? {
            guard let bytes = bytes ?? nil, let settings = try? DeviceSettings(json: JSONParser.parse(bytes)), settings.app == id else {
                return nil
            }
            return AppSettings(settings)
        }
        let current = read(try? file.readCurrent())
        let previous = read(try? file.readPrevious())
        return SettingsSequencer.Generations(current: current, previous: previous)
    }
}

/// Turns what is on disk at each inotify event into the revisions not yet reported, in order.
struct SettingsSequencer {
    /// What the reader has seen when the sequence starts.
    enum Seen {
        /// The revision on disk when the sequence starts.
        case current
        /// A given revision.
        case revision(Int64)
    }

    /// The two generations on disk.
    struct Generations {
        var current: AppSettings?
        var previous: AppSettings?
    }

    private(set) var last: AppSettings?
    private(set) var lastRevision: Int64?

    /// Starts from what the reader has seen; for a given revision, its values are taken from
    /// whichever generation on disk holds it, so the first change's keys are exact.
    init(start: Seen, on generations: Generations) {
        switch start {
        case .current:
            last = generations.current
            lastRevision = generations.current?.revision
        case .revision(let revision):
            last = [generations.current, generations.previous].compactMap { $0 }.first { $0.revision == revision }
            lastRevision = revision
        }
    }

    /// The changes to report for what is on disk now: the previous generation first when it is
    /// newer than the last one reported (the reader fell one behind), then the current one.
    mutating func advance(_ generations: Generations) -> [SettingsChange] {
        // A different revision is a change, even an older one (the agent restored the previous
        // generation): the app must see what the file holds.
        guard let current = generations.current, current.revision != lastRevision else { return [] }
        var changes: [SettingsChange] = []
        if let previous = generations.previous, let lastRevision, previous.revision > lastRevision, previous.revision < current.revision {
            changes.append(change(to: previous))
        }
        changes.append(change(to: current))
        return changes
    }

    private mutating func change(to settings: AppSettings) -> SettingsChange {
        let change = SettingsChange(
            settings: settings, previousRevision: lastRevision,
            changedKeys: SettingsValues.changedKeys(last?.values ?? [:], settings.values))
        last = settings
        lastRevision = settings.revision
        return change
    }
}
