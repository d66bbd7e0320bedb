import FleetAgentCore
import FleetJSON
import FleetProtocol

/// One simulated device, as a value: what the agent sends on the wire, and when, for each
/// answer it gets. Events go in, the next request comes out; the driver performs it.
///
/// It behaves as `fleetsetd` does: it long-polls with `If-None-Match` (``PollSchedule``, so a
/// proxy that ends long-polls early turns it to the jittered timer), reports `applied` for
/// every new revision, writes a setting back at device scope when the fleet asks it to (as an
/// app changing a writable setting would), and after a failure waits with exponential backoff
/// and full jitter, at least the server's `Retry-After` (``RetryBackoff``).
///
/// Its report goes on its next long-poll (`Fleetset-Status`) when the server's last settings
/// answer said `Fleetset-Accepts: status` (``heard(acceptsStatus:)``) and no write-back waits
/// (the agent sends a report before a change, by `POST`); by `POST …/status` otherwise, so a
/// fleet still measures an older server as its agents load it.
public struct SimulatedDevice: Sendable {
    /// A request to send.
    public enum Request: Sendable, Equatable {
        /// `GET …/settings` with `If-None-Match: "known"` (none without a revision yet),
        /// `?wait=` when `wait` is above 0, and the report of a revision in `Fleetset-Status`
        /// when `reporting` is given.
        case settings(knownRevision: Int64?, wait: Int, reporting: Revision? = nil)
        /// `POST …/status`: `applied` for the revision.
        case report(revision: Int64, schemaVersion: Int64)
        /// `PATCH …/settings` of the writable setting, based on the revision.
        case writeBack(basedOn: Int64)
    }

    /// A revision to report: its number and schema version.
    public struct Revision: Sendable, Hashable {
        public var revision: Int64
        public var schemaVersion: Int64

        public init(revision: Int64, schemaVersion: Int64) {
            self.revision = revision
            self.schemaVersion = schemaVersion
        }
    }

    /// The next request and how long to wait before sending it.
    public struct Action: Sendable, Equatable {
        public var request: Request
        public var after: Duration

        public init(request: Request, after: Duration) {
            self.request = request
            self.after = after
        }
    }

    /// How the last request ended.
    public enum Event: Sendable, Equatable {
        /// New settings (the answer to a settings request or a write-back).
        case settings(SettingsDocument)
        /// `304` after `elapsed`.
        case unchanged(elapsed: Duration)
        /// `304` from a busy server asking for the next request after this (`Fleetset-Next-Poll`).
        case deferred(nextPoll: Duration)
        /// The report was accepted.
        case reported
        /// The request failed; `retryAfter` is the server's `Retry-After`, if it sent one.
        case failed(retryAfter: Duration?)
        /// The write-back was refused for good (a stale revision, a setting no longer writable):
        /// the device gives it up, as the agent does after downloading again.
        case writeBackRefused
    }

    /// The revision the device holds.
    public private(set) var revision: Int64?
    private var schedule: PollSchedule
    private var backoff: RetryBackoff
    private var pending: Request
    /// Write-backs asked for and not sent yet.
    private var writeBacksWanted = 0
    /// The server's last settings answer said `Fleetset-Accepts: status`.
    private var serverTakesStatusOnPoll = false

    /// - Parameters:
    ///   - longPollWait: the long-poll's `wait` in seconds (0: poll on the timer).
    ///   - pollInterval: the timer's interval when not long-polling.
    ///   - revision: a revision the device holds already (a saved fleet), or `nil`.
    public init(
        longPollWait: Int, pollInterval: Duration = .seconds(60), jitter: Duration = .seconds(10), backoff: RetryBackoff = RetryBackoff(),
        revision: Int64? = nil
    ) {
        self.schedule = PollSchedule(longPollWait: longPollWait, pollInterval: pollInterval, jitter: jitter)
        self.backoff = backoff
        self.revision = revision
        self.pending = .settings(knownRevision: revision, wait: 0)
        pending = settingsRequest
    }

    /// The first request: the settings request, which a device without a revision gets
    /// answered at once, and one with a revision (a saved fleet) waits in.
    public var start: Action { Action(request: pending, after: .zero) }

    /// Asks the device to write a setting back after its next report.
    public mutating func requestWriteBack() { writeBacksWanted += 1 }

    /// What the last settings answer (200 or 304) said: whether the server takes a report on
    /// the settings request (`Fleetset-Accepts: status`). Told before the answer is handled.
    public mutating func heard(acceptsStatus: Bool) { serverTakesStatusOnPoll = acceptsStatus }

    /// The failures in a row so far (0 after any success).
    public var failuresInARow: Int { backoff.failures }

    /// Takes how the last request ended and returns the next one.
    public mutating func handle(_ event: Event, using random: inout some RandomNumberGenerator) -> Action {
        switch event {
        case .settings(let document):
            backoff.reset()
            revision = document.revision
            _ = schedule.delay(after: .changed, using: &random)
            guard serverTakesStatusOnPoll, writeBacksWanted == 0 else {
                return send(.report(revision: document.revision, schemaVersion: document.schemaVersion), after: .zero)
            }
            return send(
                settingsRequest(reporting: Revision(revision: document.revision, schemaVersion: document.schemaVersion)), after: .zero)
        case .unchanged(let elapsed):
            backoff.reset()
            let delay = schedule.delay(after: .unchanged(elapsed: elapsed), using: &random)
            return send(settingsRequest, after: delay)
        case .deferred(let nextPoll):
            backoff.reset()
            return send(settingsRequest, after: schedule.delay(after: .deferredByServer(nextPoll), using: &random))
        case .reported:
            backoff.reset()
            if writeBacksWanted > 0, let revision {
                writeBacksWanted -= 1
                return send(.writeBack(basedOn: revision), after: .zero)
            }
            return send(settingsRequest, after: .zero)
        case .writeBackRefused:
            backoff.reset()
            return send(settingsRequest, after: .zero)
        case .failed(let retryAfter):
            // The failed request is sent again after the backoff; a write-back gives way to a
            // download first (its revision may be stale by then).
            let delay = backoff.delayAfterFailure(retryAfter: retryAfter, using: &random)
            if case .writeBack = pending { return send(settingsRequest, after: delay) }
            return send(pending, after: delay)
        }
    }

    private var settingsRequest: Request { settingsRequest(reporting: nil) }

    private func settingsRequest(reporting report: Revision?) -> Request {
        switch schedule.nextRequest {
        case .longPoll(let wait): .settings(knownRevision: revision, wait: wait, reporting: report)
        case .poll: .settings(knownRevision: revision, wait: 0, reporting: report)
        }
    }

    private mutating func send(_ request: Request, after delay: Duration) -> Action {
        pending = request
        return Action(request: request, after: delay)
    }
}
