/// Whether the next settings request is a long-poll or a plain poll, and how long to wait before
/// sending it.
///
/// Long-polls are the normal case: the server holds the request until the settings change or
/// `longPollWait` passes, and the next one is sent at once, so a change arrives within the time
/// of one round trip. They are "not possible" when the configuration turns them off
/// (`longPollWait` 0), when the server refuses the `wait` parameter, or when something between
/// agent and server (a proxy, a NAT timing out idle connections) keeps ending them early:
/// ``earlyEndLimit`` long-polls in a row that come back unchanged in less than half their
/// wait. Then the agent polls on the jittered timer (`pollInterval` plus up to `jitter`) for
/// ``fallbackPolls`` polls, and tries long-polling again.
public struct PollSchedule: Sendable, Equatable {
    /// What to send next.
    public enum Request: Sendable, Equatable {
        /// `GET …/settings?wait=N` with `If-None-Match`.
        case longPoll(wait: Int)
        /// `GET …/settings` with `If-None-Match`.
        case poll
    }

    /// How a settings request ended.
    public enum Outcome: Sendable, Equatable {
        /// A new revision came (200).
        case changed
        /// No change (304), after `elapsed`.
        case unchanged(elapsed: Duration)
        /// The server refused the long-poll's `wait` parameter (400).
        case longPollRefused
        /// The server is busy and asked for the next request after this (`Fleetset-Next-Poll`):
        /// that, plus up to `jitter`; not an early end of a long-poll.
        case deferredByServer(Duration)
        /// A 200 carrying a revision the agent has decided on already (applied or refused): the
        /// server, or a proxy, ignored `If-None-Match` (and `wait`). It counts as unchanged, and
        /// the next request waits the timer's delay, so no server can make the agent spin.
        case repeated
    }

    /// Long-polls that end early, in a row, before the agent falls back to polling.
    public static let earlyEndLimit = 3
    /// Polls on the timer before long-polls are tried again.
    public static let fallbackPolls = 10

    public private(set) var longPollWait: Int
    public private(set) var pollInterval: Duration
    public private(set) var jitter: Duration
    private var earlyEnds = 0
    private var pollsLeftBeforeLongPoll = 0

    public init(longPollWait: Int, pollInterval: Duration, jitter: Duration) {
        self.longPollWait = longPollWait
        self.pollInterval = pollInterval
        self.jitter = jitter
    }

    /// Whether long-polls are in use right now.
    public var isLongPolling: Bool { longPollWait > 0 && pollsLeftBeforeLongPoll == 0 }

    /// The request to send next.
    public var nextRequest: Request { isLongPolling ? .longPoll(wait: longPollWait) : .poll }

    /// Records how a request ended and returns how long to wait before the next one.
    public mutating func delay(after outcome: Outcome, using random: inout some RandomNumberGenerator) -> Duration {
        let wasLongPolling = isLongPolling
        if !wasLongPolling, pollsLeftBeforeLongPoll > 0 { pollsLeftBeforeLongPoll -= 1 }
        switch outcome {
        case .changed:
            earlyEnds = 0
            return wasLongPolling ? .zero : timerDelay(using: &random)
        case .unchanged(let elapsed):
            guard wasLongPolling else { return timerDelay(using: &random) }
            if elapsed * 2 >= .seconds(longPollWait) {
                earlyEnds = 0
                return .zero
            }
            earlyEnds += 1
            if earlyEnds >= Self.earlyEndLimit { fallBackToPolling() }
            // Never re-send at once after an early end: that could spin against a broken proxy.
            return RetryBackoff.uniform(upTo: max(jitter, .seconds(1)), using: &random)
        case .longPollRefused:
            fallBackToPolling()
            return timerDelay(using: &random)
        case .repeated:
            return timerDelay(using: &random)
        case .deferredByServer(let asked):
            return asked + RetryBackoff.uniform(upTo: jitter, using: &random)
        }
    }

    /// Takes new values (the agent policy changed) from the next delay on; a fallback to
    /// polling under way goes on.
    public mutating func retune(longPollWait: Int, pollInterval: Duration, jitter: Duration) {
        self.longPollWait = longPollWait
        self.pollInterval = pollInterval
        self.jitter = jitter
        if longPollWait == 0 { pollsLeftBeforeLongPoll = 0 }
    }

    /// The most polls a plan of ``unchangedRepeatDelays(passing:using:)`` holds.
    public static let maxRepeats = 1000

    /// The waits of the polls that may follow this one, for the HTTP client to send by itself
    /// while every answer is unchanged (`304`): jittered timer delays, each drawn as
    /// ``timerDelay(using:)`` draws it, until their sum passes `horizon` (so the plan's last
    /// answer comes after `horizon`). Empty for a horizon of zero or less, and unless polling
    /// is what the configuration asks for (`longPollWait` 0): a fallback from long-polls counts
    /// every poll here, to try long-polls again.
    public func unchangedRepeatDelays(passing horizon: Duration, using random: inout some RandomNumberGenerator) -> [Duration] {
        guard longPollWait == 0, pollInterval > .zero, horizon > .zero else { return [] }
        var delays: [Duration] = []
        var total = Duration.zero
        while total <= horizon, delays.count < Self.maxRepeats {
            let delay = timerDelay(using: &random)
            total += delay
            delays.append(delay)
        }
        return delays
    }

    /// `pollInterval` plus a random part of `jitter`.
    public func timerDelay(using random: inout some RandomNumberGenerator) -> Duration {
        pollInterval + RetryBackoff.uniform(upTo: jitter, using: &random)
    }

    private mutating func fallBackToPolling() {
        earlyEnds = 0
        pollsLeftBeforeLongPoll = longPollWait > 0 ? Self.fallbackPolls : 0
    }
}
