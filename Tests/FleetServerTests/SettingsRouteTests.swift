import Curl
import FleetClient
import FleetIO
import FleetJSON
import FleetProtocol
import FleetServer
import FleetServerCore
import FleetTestSupport
import Foundation
import Logging
import PosixThreads
import Testing

@Suite("Device settings over HTTP: ETags, long-polls, write-back")
struct SettingsRouteTests {
    @Test("metadata has a strong ETag and If-None-Match gives 304", arguments: StoreKind.allCases)
    func metadataETag(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let first = try #require(try await device.client.metadata(app: "kiosk"))
            #expect(String(decoding: first.document, as: UTF8.self) == TestMetadata.kiosk(version: 1))
            #expect(first.etag.hasPrefix("\"1-") && first.etag.hasSuffix("\"") && !first.etag.hasPrefix("W/"))
            #expect(try await device.client.metadata(app: "kiosk", ifNoneMatch: first.etag) == nil)
            try await server.putKioskMetadata(version: 2)
            let second = try #require(try await device.client.metadata(app: "kiosk", ifNoneMatch: first.etag))
            #expect(second.etag != first.etag)
            let unknown = await refusal { try await device.client.metadata(app: "nope") }
            #expect(unknown?.status == 404 && unknown?.code == .unknownApp)
        }
    }

    @Test("settings carry the revision as ETag; If-None-Match with it gives 304; a change bumps it once", arguments: StoreKind.allCases)
    func settingsETag(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let response = try await server.raw(.get, "/v1/apps/kiosk/settings", token: device.token)
            #expect(response.status == 200)
            #expect(response.headers["ETag"] == #""1""#)
            let document = try SettingsDocument(json: try JSONParser.parse(response.body))
            #expect(
                document
                    == SettingsDocument(
                        app: "kiosk", schemaVersion: 1, revision: 1,
                        values: ["volume": 5, "title": "Welcome", "pin": "0000", "night": false]))
            let unchanged = try await server.raw(.get, "/v1/apps/kiosk/settings", token: device.token, headers: ["If-None-Match": #""1""#])
            #expect(unchanged.status == 304 && unchanged.body.isEmpty && unchanged.headers["ETag"] == #""1""#)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Hello"])
            #expect(try await device.client.settings(app: "kiosk", knownRevision: 1)?.revision == 2)
            #expect(try await device.client.settings(app: "kiosk", knownRevision: 2) == nil)
            // A new schema version is a new revision even when the values are the same.
            try await server.putKioskMetadata(version: 2)
            let afterSchema = try #require(try await device.client.settings(app: "kiosk", knownRevision: 2))
            #expect(afterSchema.revision == 3 && afterSchema.schemaVersion == 2)
            // Setting a value back and forth before the device asks is one change at most.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Other"])
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Hello"])
            #expect(try await device.client.settings(app: "kiosk", knownRevision: 3) == nil)
        }
    }

    @Test(
        "an unchanged poll reads no database, and every kind of change is still seen by the very next request",
        arguments: StoreKind.allCases)
    func notModifiedFromMemory(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["lobby"])
            var revision = try #require(try await device.client.settings(app: "kiosk")).revision
            #expect(try await device.client.settings(app: "kiosk", knownRevision: revision) == nil)
            let before = server.storeCalls.all.count
            for _ in 0..<5 { #expect(try await device.client.settings(app: "kiosk", knownRevision: revision) == nil) }
            #expect(server.storeCalls.all.count == before, "a 304 called the store: \(server.storeCalls.all.dropFirst(before))")
            // Each write is seen by the next poll, with no wait in between.
            let writes: [(scope: String, patch: JSONObject, key: String)] = [
                ("group:lobby", ["title": "Lobby"], "title"), ("device:\(device.id)", ["volume": 7], "volume"),
                ("app", ["pin": "1234"], "pin"),
            ]
            for write in writes {
                _ = try await server.admin.patchValues(app: "kiosk", scope: write.scope, patch: write.patch)
                let changed = try #require(try await device.client.settings(app: "kiosk", knownRevision: revision))
                #expect(changed.revision == revision + 1 && changed.values[write.key] == write.patch[write.key])
                revision = changed.revision
            }
            try await server.putKioskMetadata(version: 2)
            #expect(try await device.client.settings(app: "kiosk", knownRevision: revision)?.schemaVersion == 2)
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(disabled: true))
            #expect(
                await refusal { try await device.client.settings(app: "kiosk", knownRevision: revision + 1) }?.code == .deviceDisabled)
            _ = try await server.admin.updateDevice(id: device.id, DeviceUpdate(apps: ["other"], disabled: false))
            #expect(await refusal { try await device.client.settings(app: "kiosk", knownRevision: revision + 1) }?.code == .unknownApp)
            try await server.admin.deleteDevice(id: device.id)
            #expect(await refusal { try await device.client.settings(app: "kiosk", knownRevision: revision + 1) }?.status == 401)
        }
    }

    @Test(
        "GET /metrics: Prometheus text for the admin only, with long-polls held, requests by route, reports, wake-ups, transactions and the fleet's gauges; every series the dashboard and the alert rules use",
        arguments: StoreKind.allCases)
    func metrics(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            _ = try await device.client.settings(app: "kiosk")
            try await device.client.reportStatus(app: "kiosk", StatusReport(revision: 1, schemaVersion: 1, state: .applied, source: .agent))
            let waiting = Task { try await device.client.settings(app: "kiosk", knownRevision: 1, wait: 60) }
            try await server.waitForWaiters(app: "kiosk")
            let held = try await server.raw(.get, "/metrics", token: TestFleetServer.adminToken)
            #expect(held.status == 200 && held.headers["Content-Type"]?.hasPrefix("text/plain; version=0.0.4") == true)
            #expect(held.bodyText.contains("fleetset_long_polls_held 1"), "\(held.bodyText)")
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Now"])
            #expect(try await waiting.value?.revision == 2)
            // The fleet's gauges, recorded once as `serve` records them every 30 s (a test
            // server records none by itself).
            try await FleetGaugeRecorder(
                service: server.service, recording: GaugeRecording(interval: .seconds(30), silentAfter: 3600),
                logger: Logger(label: "gauges") { _ in SwiftLogNoOpLogHandler() }
            ).record()
            let text = try await server.raw(.get, "/metrics", token: TestFleetServer.adminToken).bodyText
            for series in [
                "fleetset_long_polls_held 0", #"fleetset_status_reports_total{state="applied"} 1"#,
                #"fleetset_http_requests_total{route="/v1/apps/{app}/status",method="POST",status="202"} 1"#,
                #"fleetset_http_requests_total{route="/v1/apps/{app}/settings",method="GET",status="200"} 2"#,
                "fleetset_long_poll_wake_seconds_count 1", #"fleetset_store_transaction_seconds_count{kind="write"}"#,
                #"fleetset_store_transaction_seconds_count{kind="read"}"#,
                #"fleetset_devices{app="kiosk"} 1.0"#, #"fleetset_devices_silent{app="kiosk"} 0.0"#,
                #"fleetset_devices_last_seen{app="kiosk",age="10m"} 1.0"#,
                #"fleetset_devices_reporting{app="kiosk",state="applied"} 1.0"#,
                #"fleetset_rollout_state{app="kiosk",state="none"} 1.0"#, #"fleetset_rollout_wave{app="kiosk"} 0.0"#,
            ] {
                #expect(text.contains(series), "no \(series) in:\n\(text)")
            }
            // Every series the Grafana dashboard queries and the alert rules read is one the server has.
            let dashboard = String(
                decoding: try FileSystem.readFile(TestTools.repository + "/Config/grafana/fleetset-server.json"), as: UTF8.self)
            _ = try JSONParser.parse(Array(dashboard.utf8))
            let rules = String(decoding: try FileSystem.readFile(PrometheusTools.rules), as: UTF8.self)
            for (file, source) in [("the dashboard", dashboard), ("the alert rules", rules)] {
                let queried = Set(
                    source.components(separatedBy: "fleetset_").dropFirst().map { "fleetset_" + $0.prefix { $0.isLowercase || $0 == "_" } })
                #expect(queried.count >= 6)
                // fleetset_server: the dashboard's uid.
                for name in queried where name != "fleetset_server" {
                    let family = name.hasSuffix("_bucket") ? String(name.dropLast("_bucket".count)) : name
                    #expect(text.contains("# TYPE \(family) "), "\(file) use \(name), which /metrics does not have")
                }
            }
            // Devices and strangers get nothing.
            #expect(try await server.raw(.get, "/metrics", token: device.token).status == 403)
            #expect(try await server.raw(.get, "/metrics").status == 401)
        }
    }

    @Test("an app-wide change that wakes many long-polls moves their revisions in a few shared transactions", arguments: StoreKind.allCases)
    func fanOutSharesTransactions(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            var devices: [FleetClient] = []
            for _ in 0..<120 { devices.append(try await server.enrollDevice().client) }
            for device in devices { _ = try await device.settings(app: "kiosk") }
            let waits = devices.map { device in Task { try await device.settings(app: "kiosk", knownRevision: 1, wait: 120) } }
            try await server.waitForWaiters(app: "kiosk", count: devices.count)
            let before = server.storeCalls.all.count
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["title": "Everyone"])
            for wait in waits { #expect(try await wait.value?.values["title"] == "Everyone") }
            let transactions = server.storeCalls.all.dropFirst(before).filter { $0 == "write" }.count
            let revisions = try await server.store.revisions(app: "kiosk")
            #expect(revisions.count == devices.count && revisions.values.allSatisfy { $0.revision == 2 })
            #expect(transactions < devices.count / 2, "\(transactions) write transactions for \(devices.count) revisions")
        }
    }

    @Test("a long-poll is answered as soon as an admin change lands, not at its timeout", arguments: StoreKind.allCases)
    func longPollWakes(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice(groups: ["lobby"])
            let revision = try #require(try await device.client.settings(app: "kiosk")).revision
            let poll = Task { try await device.client.settings(app: "kiosk", knownRevision: revision, wait: 30) }
            try await Self.waitUntilWaiting(server)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "group:lobby", patch: ["volume": 7])
            // A long-poll that ran out its 30 s would be answered 304 (nil): the new revision in
            // the answer can only come from the change waking it. (The benchmark measures the latency.)
            let document = try await poll.value
            #expect(document?.revision == revision + 1)
            #expect(document?.values["volume"] == 7)
        }
    }

    @Test("a change for another device or app does not answer a long-poll; the timeout gives 304", arguments: StoreKind.allCases)
    func longPollTimesOut(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let other = try await server.enrollDevice()
            let revision = try #require(try await device.client.settings(app: "kiosk")).revision
            let started = ContinuousClock.now
            let poll = Task {
                try await server.raw(
                    .get, "/v1/apps/kiosk/settings?wait=2", token: device.token, headers: ["If-None-Match": RevisionTag.etag(revision)])
            }
            try await Self.waitUntilWaiting(server)
            _ = try await server.admin.patchValues(app: "kiosk", scope: "device:\(other.id)", patch: ["volume": 1])
            let response = try await poll.value
            #expect(response.status == 304)
            #expect(response.headers["ETag"] == RevisionTag.etag(revision))
            #expect(ContinuousClock.now - started >= .seconds(2))
        }
    }

    @Test(
        "past the most long-polls held, one more is shed: 503 overloaded with Retry-After, nothing held for it; a plain request is still answered",
        arguments: StoreKind.allCases)
    func longPollShed(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store, maxLongPolls: 1) { server in
            try await server.putKioskMetadata()
            let held = try await server.enrollDevice()
            let shed = try await server.enrollDevice()
            let revision = try #require(try await held.client.settings(app: "kiosk")).revision
            let poll = Task { try await held.client.settings(app: "kiosk", knownRevision: revision, wait: 30) }
            try await Self.waitUntilWaiting(server)
            let refused = try await server.raw(
                .get, "/v1/apps/kiosk/settings?wait=30", token: shed.token, headers: ["If-None-Match": RevisionTag.etag(revision)])
            #expect(refused.status == 503)
            #expect(refused.headers["Retry-After"] == "\(ServiceError.sheddingRetryAfterSeconds)")
            #expect(refused.bodyText.contains("\"overloaded\""), "\(refused.bodyText)")
            #expect(await server.notifier.heldCount == 1)
            #expect(server.log.events("shed").count == 1)
            // Without wait nothing is held: answered as ever.
            let plain = try await server.raw(
                .get, "/v1/apps/kiosk/settings", token: shed.token, headers: ["If-None-Match": RevisionTag.etag(revision)])
            #expect(plain.status == 304)
            // The held long-poll still gets its change.
            _ = try await server.admin.patchValues(app: "kiosk", scope: "app", patch: ["volume": 6])
            #expect(try await poll.value?.revision == revision + 1)
        }
    }

    @Test(
        "a long-poll waits what the spread makes of its wait: at most the wait, at least fifteen sixteenths of it, drawn anew each time",
        arguments: StoreKind.allCases)
    func waitSpread(store: StoreKind) async throws {
        var fractions = (0..<1000).map { _ in Double.random(in: 0..<1) }
        fractions += [0, 1, -3, 7]
        for fraction in fractions {
            let spread = DeviceGateway.spreadWait(.seconds(160), fraction: fraction)
            #expect(spread <= .seconds(160) && spread >= .seconds(150))
        }
        #expect(Set(fractions.prefix(1000).map { DeviceGateway.spreadWait(.seconds(160), fraction: $0) }).count > 900)

        let asked = Locked<[Duration]>([])
        try await TestFleetServer.with(
            store: store,
            waitSpread: { wait in
                asked.withLock { $0.append(wait) }
                return .milliseconds(20)
            }
        ) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let revision = try #require(try await device.client.settings(app: "kiosk")).revision
            // Asked for 300 s, the long-poll ends when the spread says: unchanged, 304.
            #expect(try await device.client.settings(app: "kiosk", knownRevision: revision, wait: 300) == nil)
            #expect(asked.withLock { $0 } == [.seconds(300)], "only a long-poll's wait is spread")
        }
    }

    @Test("wait must be 0 to 300 seconds", arguments: StoreKind.allCases)
    func badWait(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            for wait in ["301", "-1", "soon"] {
                let response = try await server.raw(.get, "/v1/apps/kiosk/settings?wait=\(wait)", token: device.token)
                #expect(response.status == 400, "wait=\(wait)")
                #expect(try ErrorBody(json: try JSONParser.parse(response.body)).error == .badParameter)
            }
        }
    }

    @Test("write-back: 200 with the new revision, stored at device scope; null clears it", arguments: StoreKind.allCases)
    func writeBack(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let first = try #require(try await device.client.settings(app: "kiosk"))
            let written = try await device.client.patchSettings(app: "kiosk", patch: ["volume": 2, "night": true], basedOn: first.revision)
            #expect(written.revision == first.revision + 1)
            #expect(written.values["volume"] == 2 && written.values["night"] == true)
            #expect(try await server.admin.explain(app: "kiosk", deviceID: device.id).sources["volume"] == "device:\(device.id)")
            let cleared = try await device.client.patchSettings(app: "kiosk", patch: ["volume": .null], basedOn: written.revision)
            #expect(cleared.values["volume"] == 5)
            #expect(try await server.admin.values(app: "kiosk", scope: "device:\(device.id)").values == ["night": true])
            #expect(server.log.events("device-write").count == 2)
        }
    }

    @Test("write-back refusals: 428, 400, 409, 403, 422, 415, 413 — and nothing is stored", arguments: StoreKind.allCases)
    func writeBackRefusals(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            let revision = try #require(try await device.client.settings(app: "kiosk")).revision
            let patchType: HTTPClient.Headers = ["Content-Type": "application/merge-patch+json"]
            func patch(_ headers: HTTPClient.Headers, _ body: String) async throws -> (Int, ErrorBody?) {
                var all = patchType
                for field in headers { all[field.name] = field.value }
                let response = try await server.raw(.patch, "/v1/apps/kiosk/settings", token: device.token, headers: all, body: body)
                return (response.status, try? ErrorBody(json: try JSONParser.parse(response.body)))
            }
            let tag = RevisionTag.etag(revision)

            let (missing, missingBody) = try await patch([:], #"{"volume": 1}"#)
            #expect(missing == 428 && missingBody?.error == .ifMatchRequired)

            let (weak, weakBody) = try await patch(["If-Match": "W/\(tag)"], #"{"volume": 1}"#)
            #expect(weak == 400 && weakBody?.error == .badPrecondition)

            let (stale, staleBody) = try await patch(["If-Match": RevisionTag.etag(revision + 5)], #"{"volume": 1}"#)
            #expect(stale == 409 && staleBody?.error == .staleRevision)
            #expect(staleBody?.message.contains("at revision \(revision)") == true)

            let (forbidden, forbiddenBody) = try await patch(["If-Match": tag], #"{"volume": 1, "title": "x", "pin": "1234"}"#)
            #expect(forbidden == 403 && forbiddenBody?.error == .notWritable)
            #expect(forbiddenBody?.details.map(\.pointer).sorted() == ["/pin", "/title"])

            let (invalid, invalidBody) = try await patch(["If-Match": tag], #"{"volume": 11, "night": "yes"}"#)
            #expect(invalid == 422 && invalidBody?.error == .invalidValues)
            #expect(invalidBody?.details.map(\.pointer) == ["/volume", "/night"])

            let (notObject, notObjectBody) = try await patch(["If-Match": tag], "[1]")
            #expect(notObject == 400 && notObjectBody?.error == .badRequest)

            let (notJSON, _) = try await patch(["If-Match": tag], "{volume: 1}")
            #expect(notJSON == 400)

            let (wrongType, wrongTypeBody) = try await patch(["If-Match": tag, "Content-Type": "application/json"], #"{"volume": 1}"#)
            #expect(wrongType == 415 && wrongTypeBody?.error == .unsupportedMediaType)

            let huge = #"{"volume": 1, "pad": ""# + String(repeating: "x", count: 1 << 20) + #""}"#
            let (tooLarge, tooLargeBody) = try await patch(["If-Match": tag], huge)
            #expect(tooLarge == 413 && tooLargeBody?.error == .tooLarge)

            #expect(try await server.admin.values(app: "kiosk", scope: "device:\(device.id)").values.isEmpty)
            #expect(try await device.client.settings(app: "kiosk", knownRevision: revision) == nil)
        }
    }

    @Test("status reports: 202, one logfmt line each with every field, the latest kept per device", arguments: StoreKind.allCases)
    func statusReports(store: StoreKind) async throws {
        try await TestFleetServer.with(store: store) { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            try await device.client.reportStatus(app: "kiosk", StatusReport(revision: 1, schemaVersion: 1, state: .applied, source: .agent))
            server.clock.advance(by: 5)
            try await device.client.reportStatus(
                app: "kiosk",
                StatusReport(revision: 2, schemaVersion: 1, state: .error, message: "/volume: must be <= 10 (got 11)", source: .app))
            let lines = server.log.events("status")
            #expect(lines.count == 2)
            #expect(
                lines.first?.contains(
                    "level=info msg=\"status report\" event=status app=kiosk device=\(device.id) revision=1 schema_version=1 state=applied source=agent message=\"\""
                ) == true)
            #expect(lines.last?.contains("level=warning") == true)
            #expect(lines.last?.hasSuffix("state=error source=app message=\"/volume: must be <= 10 (got 11)\"\n") == true)
            let status = try #require(try await server.admin.devices(app: "kiosk").devices.first?.status)
            #expect(status.report.revision == 2 && status.report.state == .error && status.report.source == .app)
            #expect(status.receivedAt == server.clock.secondsSinceEpoch())

            let bad = try await server.raw(
                .post, "/v1/apps/kiosk/status", token: device.token, headers: ["Content-Type": "application/json"],
                body: #"{"revision": 1, "schemaVersion": 1, "state": "done", "source": "agent"}"#)
            #expect(bad.status == 400)
            #expect(String(decoding: bad.body, as: UTF8.self).contains(#"/state: must be one of \"applied\", \"error\", \"unsupported\""#))
            #expect(server.log.events("status").count == 2)
        }
    }

    /// Returns once a long-poll of kiosk is waiting on the server (within a minute, however
    /// loaded the machine: a bound against hanging, not a measure of speed).
    static func waitUntilWaiting(_ server: TestFleetServer) async throws {
        try await server.waitForWaiters(app: "kiosk", timeout: .seconds(60))
    }
}
