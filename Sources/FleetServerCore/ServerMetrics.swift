import CoreMetrics
import FleetProtocol
import PosixThreads

/// What the server measures, through swift-metrics (the binary serves them in Prometheus'
/// text format at `GET /metrics`). Names follow Prometheus' conventions:
///
/// | metric | kind | labels |
/// |---|---|---|
/// | `fleetset_long_polls_held` | gauge | |
/// | `fleetset_long_poll_wake_seconds` | histogram: from the write that woke a long-poll to its answer | |
/// | `fleetset_http_requests_total` | counter | `route` (the pattern), `method`, `status` |
/// | `fleetset_status_reports_total` | counter | `state` |
/// | `fleetset_device_restores_total` | counter: reports of settings put back after a hand edit on the device (`detail` `restored-after-local-edit`) | `app` |
/// | `fleetset_store_transaction_seconds` | histogram | `kind`: `read`, `write` |
/// | `fleetset_long_polls_shed_total` | counter | |
/// | `fleetset_long_polls_busy_total` | counter: long-polls answered at once with when to come back | |
/// | `fleetset_webhook_deliveries_total` | counter: attempts to send a webhook message | `outcome`: `delivered`, `failed` (tried again later), `dead` |
/// | `fleetset_webhook_outbox` | gauge: the outbox's messages | `state`: `pending`, `delivered`, `dead` |
///
/// The fleet's state, recorded every 30 s by `serve` (`FleetGaugeRecorder`, through
/// ``set(_:_:to:)``), from the store: the same on every instance of a shared database. Per app
/// with metadata; enabled devices only, but for `fleetset_devices_disabled`:
///
/// | metric | kind | labels |
/// |---|---|---|
/// | `fleetset_devices` | gauge: devices given the app | `app` |
/// | `fleetset_devices_disabled` | gauge: disabled devices given the app | `app` |
/// | `fleetset_devices_silent` | gauge: devices last seen longer ago than `--silent-after` | `app` |
/// | `fleetset_devices_last_seen` | gauge: devices by how long ago they were last seen | `app`, `age`: `10m`, `1h`, `1d`, `older` (each up to its bound, after the one before) |
/// | `fleetset_devices_reporting` | gauge: devices by their latest report's state | `app`, `state`: `applied`, `error`, `unsupported` |
/// | `fleetset_rollout_state` | gauge: 1 for the state of the app's newest rollout, 0 for the others | `app`, `state`: `running`, `paused`, `completed`, `aborted`, `none` |
/// | `fleetset_rollout_wave` | gauge: the wave the newest rollout admitted last, from 1 (0: none) | `app` |
/// | `fleetset_rollout_waves` | gauge: the newest rollout's waves (0: none) | `app` |
///
/// The factory is injected (tests use their own registry); by default it is the process's
/// `MetricsSystem`.
public struct ServerMetrics: Sendable {
    private let factory: any MetricsFactory
    private let heldGauge: Gauge
    private let wakeTimer: Timer
    private let shedCounter: Counter
    private let busyCounter: Counter
    private let reportCounters: [StatusReport.State: Counter]
    private let transactionTimers: [String: Timer]
    /// Counters made on first use, by label and dimensions.
    private let counters = Locked<[MetricKey: Counter]>([:])
    private let webhookCounters: [String: Counter]
    private let outboxGauges: [String: Gauge]
    private let gauges = Locked<[MetricKey: Gauge]>([:])

    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
        heldGauge = Gauge(label: "fleetset_long_polls_held", factory: factory)
        wakeTimer = Timer(label: "fleetset_long_poll_wake_seconds", factory: factory)
        shedCounter = Counter(label: "fleetset_long_polls_shed_total", factory: factory)
        busyCounter = Counter(label: "fleetset_long_polls_busy_total", factory: factory)
        var reports: [StatusReport.State: Counter] = [:]
        for state in StatusReport.State.allCases {
            reports[state] = Counter(label: "fleetset_status_reports_total", dimensions: [("state", state.rawValue)], factory: factory)
        }
        reportCounters = reports
        var transactions: [String: Timer] = [:]
        for kind in ["read", "write"] {
            transactions[kind] = Timer(label: "fleetset_store_transaction_seconds", dimensions: [("kind", kind)], factory: factory)
        }
        transactionTimers = transactions
        webhookCounters = Dictionary(
            uniqueKeysWithValues: Self.webhookOutcomes.map {
                ($0, Counter(label: "fleetset_webhook_deliveries_total", dimensions: [("outcome", $0)], factory: factory))
            })
        outboxGauges = Dictionary(
            uniqueKeysWithValues: Self.outboxStates.map {
                ($0, Gauge(label: "fleetset_webhook_outbox", dimensions: [("state", $0)], factory: factory))
            })
    }

    /// The outcomes of a webhook attempt, as `fleetset_webhook_deliveries_total` labels them.
    public static let webhookOutcomes = ["delivered", "failed", "dead"]
    /// The states of an outbox message, as `fleetset_webhook_outbox` labels them.
    public static let outboxStates = ["pending", "delivered", "dead"]

    /// A webhook attempt ended: `delivered`, `failed` (to be tried again) or `dead`.
    public func webhookAttempt(_ outcome: String) { webhookCounters[outcome]?.increment() }

    /// The outbox holds `count` messages in `state`.
    public func webhookOutbox(_ state: String, count: Int) { outboxGauges[state]?.record(count) }

    /// The number of long-polls held now.
    public func longPollsHeld(_ count: Int) { heldGauge.record(count) }

    /// A woken long-poll answered `delay` after the write that woke it.
    public func longPollWoken(after delay: Duration) { wakeTimer.recordNanoseconds(delay.nanoseconds) }

    /// A long-poll was refused because the server holds its most.
    public func longPollShed() { shedCounter.increment() }

    /// A long-poll was answered at once with when to poll next: the server is busy.
    public func longPollBusy() { busyCounter.increment() }

    /// A status report arrived.
    public func statusReport(_ state: StatusReport.State) { reportCounters[state]?.increment() }

    /// A store transaction of `kind` (`read`, `write`) took `duration`.
    public func storeTransaction(_ kind: String, took duration: Duration) {
        transactionTimers[kind]?.recordNanoseconds(duration.nanoseconds)
    }

    /// An HTTP request was answered. Each route, method and status gets its counter once.
    public func request(route: String, method: String, status: Int) {
        increment("fleetset_http_requests_total", [("route", route), ("method", method), ("status", String(status))])
    }

    /// A device reported that it put the app's served settings back after a hand edit. The
    /// caller names only apps the server has (labels stay few).
    public func settingsRestored(app: String) { increment("fleetset_device_restores_total", [("app", app)]) }

    /// Increments the counter `label` with `dimensions`, made on first use.
    private func increment(_ label: String, _ dimensions: [(String, String)]) {
        let key = MetricKey(label: label, dimensions: dimensions.flatMap { [$0.0, $0.1] })
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(label: label, dimensions: dimensions, factory: factory)
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Sets the gauge `label` with `dimensions` to `value`. Each label and dimensions get their
    /// gauge once: the caller keeps the dimensions few (apps and states, never devices).
    public func set(_ label: String, _ dimensions: [(String, String)], to value: Double) {
        let key = MetricKey(label: label, dimensions: dimensions.flatMap { [$0.0, $0.1] })
        let gauge = gauges.withLock { gauges in
            if let gauge = gauges[key] { return gauge }
            let gauge = Gauge(label: label, dimensions: dimensions, factory: factory)
            gauges[key] = gauge
            return gauge
        }
        gauge.record(value)
    }

    private struct MetricKey: Hashable {
        let label: String
        /// Names and values, alternating.
        let dimensions: [String]
    }
}

extension Duration {
    /// The duration in whole nanoseconds (saturating).
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (whole, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? .max : whole &+ attoseconds / 1_000_000_000
    }
}
