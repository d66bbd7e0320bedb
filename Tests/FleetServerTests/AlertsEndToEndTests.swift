import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import PosixThreads
import Testing

/// The alerts with real parts: `fleetset-server serve` (its gauges recorded every second),
/// Debian's `prometheus` scraping its `/metrics` with the admin token and evaluating the
/// packaged rules, Debian's `prometheus-alertmanager`, and a webhook receiver in the test; and
/// the same pause sent by the server as a Standard Webhooks message to a fleetset subscriber.
/// Without Prometheus the test is skipped, saying so, unless `FLEETSET_REQUIRE_PYTHON_TOOLS`
/// is set (`scripts/test`): then it fails.
@Suite("Alerts end to end: Prometheus and Alertmanager")
struct AlertsEndToEndTests {
    @Test("Prometheus and Alertmanager are there when the test command requires them")
    func toolsInstalled() {
        if !PrometheusTools.serversPresent && !TestTools.required {
            print("AlertsEndToEndTests: skipped — run scripts/install-deps to install Debian's prometheus and prometheus-alertmanager")
        }
        #expect(
            PrometheusTools.serversPresent || !TestTools.required,
            "FLEETSET_REQUIRE_PYTHON_TOOLS is set but \(PrometheusTools.prometheus) or \(PrometheusTools.alertmanager) is missing")
    }

    @Test(
        "a rollout that pauses on a device's error fires FleetsetRolloutPaused for its app, and Alertmanager delivers it to the receiver",
        .enabled(if: PrometheusTools.serversPresent || TestTools.required), .timeLimit(.minutes(3)))
    func rolloutPausedReachesReceiver() async throws {
        try PrometheusTools.require(PrometheusTools.prometheus, PrometheusTools.alertmanager)
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let http = try HTTPClient(configuration: .init(allowInsecureHTTP: true))
        do {
            try await Self.rolloutPaused(directory: directory, http: http)
            await http.shutdown()
        } catch {
            await http.shutdown()
            throw error
        }
    }

    /// The test's body: every process it starts is killed when it returns or throws.
    static func rolloutPaused(directory: String, http: HTTPClient) async throws {
        try await AlertReceiver.with { receiver in
            let server = try await ServerProcess.start(
                in: directory, extraArguments: ["--gauge-interval", "1", "--rollout-check-interval", "0.2"])
            defer { server.kill() }
            let alertmanager = try startAlertmanager(in: directory, receiver: receiver)
            defer { alertmanager.process.kill() }
            let prometheus = try startPrometheus(in: directory, server: server, alertmanagerPort: alertmanager.port)
            defer { prometheus.process.kill() }
            let query = PrometheusQuery(http: http, port: prometheus.port)
            func diagnosis(_ what: String) async -> String {
                """
                \(what)
                Prometheus' alerts: \((try? await query.get("/api/v1/alerts")) ?? "-")
                Prometheus' targets: \((try? await query.get("/api/v1/targets")) ?? "-")
                received: \(receiver.bodies)
                prometheus log: \(prometheus.process.log.suffix(3000))
                alertmanager log: \(alertmanager.process.log.suffix(3000))
                """
            }

            // A device on kiosk in group w1, and a rollout in two waves: w1, then everyone.
            let adminToken = try String(contentsOfFile: directory + "/admin.token", encoding: .utf8)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let admin = FleetClient(http: http, baseURL: server.url, token: adminToken)
            // A fleetset webhook subscriber for the same pause, verifying with the reference library.
            let subscriber = try await WebhookReceiver.start()
            defer { subscriber.stop() }
            let subscription = try await admin.createWebhook(
                WebhookRequest(url: subscriber.url, events: ["rollout.paused"], apps: ["kiosk"]))
            try subscriber.trust(subscription.secret)
            _ = try await admin.putMetadata(app: "kiosk", document: Array(TestMetadata.kiosk(version: 1).utf8))
            let enrollment = try await admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], groups: ["w1"]))
            let identity = try await FleetClient(http: http, baseURL: server.url, token: nil).enroll(
                enrollmentToken: enrollment.enrollmentToken, requestId: newRequestID())
            var device = PlayedDevice(
                id: identity.deviceId, client: FleetClient(http: http, baseURL: server.url, token: identity.deviceToken))
            try await device.fetch()
            try await device.report(.applied)
            _ = try await admin.startRollout(
                app: "kiosk", RolloutRequest(scope: "app", patch: ["title": "Staged"], waves: [.group("w1"), .everyone]))

            // Prometheus scrapes the running rollout with the admin token: nothing fires.
            let running = #"fleetset_rollout_state{app="kiosk",state="running",job="fleetset"} == 1"#
            guard try await query.waitForResult(of: running, deadline: .seconds(60)) else {
                throw ProcessFailed(log: await diagnosis("Prometheus never saw the running rollout"))
            }
            #expect(receiver.alerts(named: "FleetsetRolloutPaused").isEmpty)

            // The device's error pauses the rollout (the server looks every 0.2 s).
            try await device.fetch()
            #expect(device.title == "Staged")
            try await device.report(.error, "hook exited 1")
            let reported = ContinuousClock.now
            let deadline = reported + .seconds(60)
            while try await admin.rollout(app: "kiosk").phase != .paused {
                guard ContinuousClock.now < deadline else { throw ProcessFailed(log: "the rollout did not pause:\n\(server.log)") }
                try await Task.sleep(for: .milliseconds(50))
            }

            // The gauge (each second), the scrape (each second), the rule (each second, for 0m),
            // Alertmanager's group wait (1 s): the alert reaches the receiver within seconds.
            let delivered = try await receiver.waitForAlert(named: "FleetsetRolloutPaused", deadline: .seconds(60))
            guard let alert = delivered else {
                throw ProcessFailed(log: await diagnosis("FleetsetRolloutPaused did not reach the receiver"))
            }
            print(
                "AlertsEndToEndTests: FleetsetRolloutPaused reached the receiver \(ContinuousClock.now - reported) after the error report")
            #expect(alert["status"]?.stringValue == "firing")
            #expect(alert["labels"]?["app"]?.stringValue == "kiosk")
            #expect(alert["labels"]?["severity"]?.stringValue == "warning")
            #expect(alert["annotations"]?["summary"]?.stringValue == "The rollout of kiosk is paused")
            #expect(alert["annotations"]?["description"]?.stringValue?.contains("fleetset admin rollout status kiosk") == true)

            // The same pause, as a signed webhook message that standardwebhooks verified.
            try await subscriber.waitForRecords(1, timeout: .seconds(30))
            let message = try #require(subscriber.records.first)
            #expect(message.verified, "the reference library verified the rollout.paused message")
            let body = try JSONParser.parse(Array(message.body.utf8))
            #expect(body["type"]?.stringValue == "rollout.paused" && body["data"]?["app"]?.stringValue == "kiosk", "\(message.body)")
            #expect(body["data"]?["reason"]?.stringValue?.isEmpty == false)

            // Grafana is not here: its dashboard's queries are evaluated by this Prometheus
            // instead, each one valid PromQL, and those of the fleet's gauges with a result.
            let dashboard = try JSONParser.parse(
                Array(try Data(contentsOf: URL(fileURLWithPath: TestTools.repository + "/Config/grafana/fleetset-server.json"))))
            guard case .array(let panels)? = dashboard["panels"] else { throw ProcessFailed(log: "the dashboard has no panels") }
            var expressions: [String] = []
            for panel in panels {
                guard case .array(let targets)? = panel["targets"] else { continue }
                expressions += targets.compactMap { $0["expr"]?.stringValue }
            }
            #expect(expressions.count >= 10)
            for expression in expressions {
                let answer = try await query.evaluate(expression)
                #expect(answer.status == "success", "\(expression): \(answer.text)")
                if expression.contains("fleetset_devices") || expression.contains("fleetset_rollout") {
                    #expect(answer.results > 0, "\(expression) has no result: \(answer.text)")
                }
            }
        }
    }

    /// `prometheus-alertmanager` on a free port, without clustering, sending every alert to
    /// `receiver` after a group wait of 1 s.
    static func startAlertmanager(in directory: String, receiver: AlertReceiver) throws -> (process: RunningProcess, port: Int) {
        let port = try TestTools.freePort()
        let configuration = directory + "/alertmanager.yml"
        try Data(
            """
            route:
              receiver: test
              group_by: [alertname, app]
              group_wait: 1s
              group_interval: 1s
              repeat_interval: 1h
            receivers:
              - name: test
                webhook_configs:
                  - url: http://127.0.0.1:\(receiver.port)/alerts
                    send_resolved: false
            """.utf8
        ).write(to: URL(fileURLWithPath: configuration))
        try FileManager.default.createDirectory(atPath: directory + "/alertmanager-data", withIntermediateDirectories: true)
        let process = try RunningProcess(
            PrometheusTools.alertmanager,
            [
                "--config.file=" + configuration, "--storage.path=" + directory + "/alertmanager-data",
                "--web.listen-address=127.0.0.1:\(port)", "--cluster.listen-address=",
            ])
        return (process, port)
    }

    /// `prometheus` on a free port, scraping `server` every second with its admin token file,
    /// evaluating the packaged rules every second and sending alerts to Alertmanager.
    static func startPrometheus(in directory: String, server: ServerProcess, alertmanagerPort: Int) throws -> (
        process: RunningProcess, port: Int
    ) {
        let port = try TestTools.freePort()
        let configuration = directory + "/prometheus.yml"
        try Data(
            """
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
              evaluation_interval: 1s
            rule_files:
              - \(PrometheusTools.rules)
            alerting:
              alertmanagers:
                - static_configs:
                    - targets: ["127.0.0.1:\(alertmanagerPort)"]
            scrape_configs:
              - job_name: fleetset
                authorization:
                  credentials_file: \(directory)/admin.token
                static_configs:
                  - targets: ["127.0.0.1:\(server.port)"]
            """.utf8
        ).write(to: URL(fileURLWithPath: configuration))
        let process = try RunningProcess(
            PrometheusTools.prometheus,
            [
                "--config.file=" + configuration, "--storage.tsdb.path=" + directory + "/prometheus-data",
                "--web.listen-address=127.0.0.1:\(port)",
            ])
        return (process, port)
    }
}

/// Prometheus' HTTP API, from the test.
struct PrometheusQuery {
    let http: HTTPClient
    let port: Int

    /// The body of `GET path` (a failed request throws).
    func get(_ path: String) async throws -> String {
        let response = try await http.execute(HTTPClient.Request(url: "http://127.0.0.1:\(port)" + path))
        return String(decoding: response.body, as: UTF8.self)
    }

    /// `expression` evaluated now: the answer's status (`success`, `error`), how many series
    /// or samples it holds, and its text.
    func evaluate(_ expression: String) async throws -> (status: String, results: Int, text: String) {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        let encoded = expression.addingPercentEncoding(withAllowedCharacters: allowed) ?? expression
        let text = try await get("/api/v1/query?query=" + encoded)
        let json = try? JSONParser.parse(Array(text.utf8))
        var results = 0
        if case .array(let result)? = json?["data"]?["result"] { results = result.count }
        return (json?["status"]?.stringValue ?? "-", results, text)
    }

    /// Evaluates `expression` until its result is not empty (`true`) or `deadline` passes
    /// (`false`); Prometheus still starting counts as no result.
    func waitForResult(of expression: String, deadline: Duration) async throws -> Bool {
        let end = ContinuousClock.now + deadline
        while ContinuousClock.now < end {
            if let answer = try? await evaluate(expression), answer.results > 0 { return true }
            try await Task.sleep(for: .milliseconds(200))
        }
        return false
    }
}

/// Alertmanager's webhook receiver: an HTTP server on 127.0.0.1 that keeps every body posted to
/// `/alerts`.
final class AlertReceiver: Sendable {
    let port: Int
    private let received: Locked<[String]>

    private init(port: Int, received: Locked<[String]>) {
        self.port = port
        self.received = received
    }

    /// Every body received, in order.
    var bodies: [String] { received.withLock { $0 } }

    /// The alerts named `name` in every notification received so far.
    func alerts(named name: String) -> [JSONValue] {
        bodies.compactMap { try? JSONParser.parse(Array($0.utf8)) }.flatMap { notification -> [JSONValue] in
            guard case .array(let alerts)? = notification["alerts"] else { return [] }
            return alerts.filter { $0["labels"]?["alertname"]?.stringValue == name }
        }
    }

    /// The first alert named `name` received, waiting up to `deadline`; `nil` when none came.
    func waitForAlert(named name: String, deadline: Duration) async throws -> JSONValue? {
        let end = ContinuousClock.now + deadline
        while ContinuousClock.now < end {
            if let alert = alerts(named: name).first { return alert }
            try await Task.sleep(for: .milliseconds(100))
        }
        return alerts(named: name).first
    }

    /// Runs `body` with a receiver listening, and stops it afterwards.
    static func with<T: Sendable>(_ body: (AlertReceiver) async throws -> T) async throws -> T {
        let received = Locked<[String]>([])
        let router = Router()
        router.post("alerts") { request, _ -> HTTPResponse.Status in
            let bytes = try await request.body.collect(upTo: 1 << 20)
            received.withLock { $0.append(String(buffer: bytes)) }
            return .ok
        }
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                portContinuation.yield(channel.localAddress?.port ?? 0)
                portContinuation.finish()
            }, logger: Logger(label: "alert-receiver") { _ in SwiftLogNoOpLogHandler() })
        let running = Task { try await app.run() }
        defer { running.cancel() }
        var bound = 0
        for await port in ports { bound = port }
        guard bound > 0 else { throw ProcessFailed(log: "the alert receiver did not start") }
        return try await body(AlertReceiver(port: bound, received: received))
    }
}
