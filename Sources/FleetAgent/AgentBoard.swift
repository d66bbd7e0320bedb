import FleetAgentCore
import Logging
import PosixThreads
import SystemdNotify

/// What the agent's loops share with systemd: liveness for the watchdog, readiness, and the
/// one-line status `systemctl status` shows.
final class AgentBoard: Sendable {
    private struct State {
        var liveness = Liveness()
        var readiness: Readiness
        var lines: [String: String] = [:]
        var order: [String]
    }

    let notifier: SystemdNotifier?
    /// Fulfilled when READY=1 is sent (every app served, or the ready timeout).
    let ready = Promise<Void>()
    private let state: Locked<State>
    private let logger: Logger

    init(apps: [String], notifier: SystemdNotifier?, logger: Logger) {
        self.notifier = notifier
        self.logger = logger
        state = Locked(State(readiness: Readiness(apps: apps), order: apps))
    }

    /// Records that a loop starts a step that ends within `limit`.
    func beginStep(_ loop: String, limit: Duration) {
        let now = ContinuousClock.now
        state.withLock { $0.liveness.beginStep(loop, limit: limit, now: now) }
    }

    /// Forgets a loop that ended on purpose.
    func endLoop(_ loop: String) {
        state.withLock { $0.liveness.remove(loop) }
    }

    /// The loops past their deadline.
    func overdueLoops() -> [String] {
        let now = ContinuousClock.now
        return state.withLock { $0.liveness.overdueLoops(at: now) }
    }

    /// Records that `app` has settings to serve; says READY=1 when every app has.
    func served(_ app: String) {
        let (ready, status) = state.withLock { state in (state.readiness.served(app), Self.summary(state)) }
        if ready {
            logger.notice("ready", metadata: ["event": "ready", "status": "\(status)"])
            notifier?.send(.ready, .status(status))
            self.ready.fulfil(())
        }
    }

    /// The ready timeout passed: says READY=1 if not said yet, naming the apps still waiting.
    func readyTimeoutPassed() {
        let (announce, waiting, status) = state.withLock { state in
            (state.readiness.timedOut(), state.readiness.waiting.sorted(), Self.summary(state))
        }
        guard announce else { return }
        logger.warning(
            "ready without settings for some apps", metadata: ["event": "ready", "waiting": "\(waiting.joined(separator: ","))"])
        notifier?.send(.ready, .status("no settings yet for \(waiting.joined(separator: ", ")); " + status))
        ready.fulfil(())
    }

    /// Sets `app`'s part of the status line and sends the line.
    func setStatus(_ app: String, _ text: String) {
        let line = state.withLock { state in
            state.lines[app] = text
            return Self.summary(state)
        }
        notifier?.send(.status(line))
    }

    private static func summary(_ state: State) -> String {
        state.order.map { "\($0): \(state.lines[$0] ?? "starting")" }.joined(separator: "; ")
    }
}
