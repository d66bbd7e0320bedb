import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetStoreSQLite
import FleetTestSupport
import FleetWebhooks
import Foundation
import HTTPTypes
import Logging
import Testing

@testable import FleetServer

/// The dispatcher against a real receiver on 127.0.0.1 that verifies every message with the
/// Standard Webhooks reference library. Time is the test's: each look is made when the
/// dispatcher says the next attempt falls due, with no waiting.
@Suite(
    "Webhook delivery: retries, dead letters, redirects, timeouts, refused addresses",
    .enabled(if: WebhookReceiver.present || TestTools.required))
struct WebhookDeliveryTests {
    /// A service on a SQLite store whose wall clock starts at the real time (a receiver refuses
    /// a signature more than 5 minutes off its clock).
    static func withService(_ body: (FleetServices, TestWallClock) async throws -> Void) async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let clock = TestWallClock(start: Int64(Date().timeIntervalSince1970))
        let service = FleetServices(
            store: try SQLiteStore(path: directory + "/fleet.sqlite"), adminTokenHash: "", wallClock: clock,
            logger: Logger(label: "webhooks") { _ in SwiftLogNoOpLogHandler() })
        try await body(service, clock)
    }

    static func dispatcher(_ service: FleetServices, timeout: Duration = WebhookSender.timeout) throws -> WebhookDispatcher {
        WebhookDispatcher(
            service: service, sender: try WebhookSender(policy: DestinationPolicy(), timeout: timeout), lookInterval: .seconds(5),
            logger: Logger(label: "webhooks") { _ in SwiftLogNoOpLogHandler() })
    }

    static func subscribe(_ service: FleetServices, _ url: String, events: [String] = ["rollout.paused"]) async throws -> CreatedWebhook {
        try await service.webhooks.create(WebhookRequest(url: url, events: events), actor: "ada")
    }

    static func pause(_ service: FleetServices, app: String = "kiosk") async throws {
        try await service.context.store.enqueue([
            WebhookEventDraft(type: .rolloutPaused, app: app, occurredAt: service.now, data: ["rollout": "r-1", "reason": "1 of 1 failed"])
        ])
    }

    /// A receiver answering `failStatus` to its first `failures` requests, subscribed to
    /// `rollout.paused`, and one such message queued.
    static func withQueuedMessage(
        failures: Int, failStatus: Int = 500,
        _ body: (FleetServices, TestWallClock, WebhookReceiver, CreatedWebhook, WebhookDispatcher) async throws -> Void
    ) async throws {
        let receiver = try await WebhookReceiver.start(failures: failures, failStatus: failStatus)
        defer { receiver.stop() }
        try await withService { service, clock in
            let created = try await subscribe(service, receiver.url)
            try receiver.trust(created.secret)
            try await pause(service)
            try await body(service, clock, receiver, created, try dispatcher(service))
        }
    }

    @Test("a receiver that answers 500 three times gets the message on the fourth try, the same id each time, verified")
    func fourthTryDelivers() async throws {
        try await Self.withQueuedMessage(failures: 3) { service, clock, receiver, created, dispatcher in
            var waits: [Int64] = []
            for attempt in 1...4 {
                let look = await dispatcher.look()
                #expect(look.sent, "attempt \(attempt)")
                guard attempt < 4 else { break }
                let due = try #require(look.due, "attempt \(attempt) put the message back")
                waits.append(due - service.now)
                // Not due yet: a look before finds nothing.
                #expect(await dispatcher.look().sent == false)
                clock.advance(by: due - service.now)
            }
            // 5 s, 30 s, 2 min, each moved by at most a fifth.
            #expect(
                waits.count == 3 && (4...6).contains(waits[0]) && (24...36).contains(waits[1]) && (96...144).contains(waits[2]), "\(waits)")
            let records = receiver.records
            #expect(records.map(\.answered) == [500, 500, 500, 204])
            #expect(Set(records.map(\.id)) == ["msg_1"])
            #expect(records.allSatisfy { $0.verified }, "the reference library verified every attempt")
            #expect(records.allSatisfy { $0.contentType == "application/json" })
            let body = try #require(try JSONParser.parse(Array(records[3].body.utf8)).objectValue)
            #expect(body["type"] == "rollout.paused" && body["data"]?.objectValue?["app"] == "kiosk")
            let detail = try await service.webhooks.show(id: created.info.id)
            #expect(detail.messages.map(\.state) == ["delivered"] && detail.messages[0].attempts == 4)
            #expect(detail.messages[0].lastResult == "HTTP 204" && detail.webhook.delivered == 1)
            // Delivered: never sent again.
            clock.advance(by: 86_400)
            #expect(await dispatcher.look().sent == false)
            #expect(receiver.records.count == 4)
        }
    }

    @Test("a receiver that never answers (nothing listens) gets 13 attempts over a day, then the message is dead until redelivered")
    func deadAfterADayThenRedelivered() async throws {
        // Below the ephemeral range: no other test's server can be given it meanwhile.
        let port = try TestTools.freePort()
        try await Self.withService { service, clock in
            let created = try await Self.subscribe(service, "http://127.0.0.1:\(port)/hook")
            try await Self.pause(service)
            let dispatcher = try Self.dispatcher(service)
            let first = service.now
            var attempts = 0
            while true {
                let look = await dispatcher.look()
                guard look.sent else { break }
                attempts += 1
                guard let due = look.due else { break }
                clock.advance(by: due - service.now)
            }
            let detail = try await service.webhooks.show(id: created.info.id)
            let message = try #require(detail.messages.first)
            #expect(message.state == "dead" && message.nextAttemptAt == nil)
            #expect((12...14).contains(attempts) && message.attempts == Int64(attempts), "\(attempts) attempts")
            // Dead once the next wait (4 h, ±20% at random) would pass the day: the last attempt
            // came within the longest such wait of the day's end.
            let longestWait = Int64(Double(DeliverySchedule.standard.waits.last!) * (1 + DeliverySchedule.standard.jitter))
            #expect(message.lastAttemptAt! - first <= 86_400 && message.lastAttemptAt! - first > 86_400 - longestWait)
            #expect(message.lastResult?.contains("couldNotConnect") == true, "\(message.lastResult ?? "-")")
            #expect(detail.webhook.dead == 1)
            // Dead: no attempt any more, until an admin redelivers it.
            clock.advance(by: 86_400)
            #expect(await dispatcher.look().sent == false)
            #expect(
                try await service.webhooks.redeliver(id: created.info.id, RedeliverRequest(message: nil), actor: "ada").redelivered == 1)
            let again = try #require(try await service.webhooks.show(id: created.info.id).messages.first)
            #expect(again.state == "pending" && again.attempts == 0)
            #expect(await dispatcher.look().sent)
            await #expect(throws: ServiceError.self) {
                try await service.webhooks.redeliver(id: created.info.id, RedeliverRequest(message: "msg_99"), actor: "ada")
            }
        }
    }

    @Test("a redirect is not followed: the 302 is a failed attempt, and the location is never asked")
    func redirectsAreNotFollowed() async throws {
        try await Self.withQueuedMessage(failures: 1, failStatus: 302) { service, clock, receiver, created, dispatcher in
            let look = await dispatcher.look()
            let message = try #require(try await service.webhooks.show(id: created.info.id).messages.first)
            #expect(message.state == "pending" && message.lastResult == "HTTP 302")
            clock.advance(by: try #require(look.due) - service.now)
            #expect(await dispatcher.look().sent)
            #expect(receiver.records.map(\.answered) == [302, 204])
        }
    }

    @Test("a receiver that accepts and never answers times the attempt out; the message waits for its next try")
    func timeouts() async throws {
        let receiver = try await WebhookReceiver.start(hang: true)
        defer { receiver.stop() }
        try await Self.withService { service, _ in
            let created = try await Self.subscribe(service, receiver.url)
            try await Self.pause(service)
            let look = try await Self.dispatcher(service, timeout: .seconds(2)).look()
            #expect(look.sent && look.due != nil)
            let message = try #require(try await service.webhooks.show(id: created.info.id).messages.first)
            #expect(message.state == "pending" && message.lastResult?.contains("timeout") == true, "\(message.lastResult ?? "-")")
        }
    }

    @Test("private, link-local and metadata addresses are refused before any connection; https is required but for loopback")
    func refusedDestinations() async throws {
        try await Self.withService { service, _ in
            for url in [
                "https://10.1.2.3/hook", "https://169.254.169.254/latest/meta-data", "https://[fd00::1]/hook", "https://192.168.0.10/x",
            ] {
                let created = try await Self.subscribe(service, url)
                try await Self.pause(service)
                _ = try await Self.dispatcher(service).look()
                let message = try #require(try await service.webhooks.show(id: created.info.id).messages.first)
                #expect(message.lastResult?.hasPrefix("refused: ") == true, "\(url): \(message.lastResult ?? "-")")
                try await service.webhooks.remove(id: created.info.id, actor: "ada")
            }
            for url in ["http://hooks.example.com/x", "ftp://127.0.0.1/", "https://user:pw@hooks.example.com/"] {
                let error = await #expect(throws: ServiceError.self) { try await Self.subscribe(service, url) }
                #expect(error?.code == .badWebhook && error?.status.code == 400, "\(url)")
            }
            let unknown = await #expect(throws: ServiceError.self) {
                try await Self.subscribe(service, "https://x.example/", events: ["device.melted"])
            }
            #expect(unknown?.code == .badWebhook && unknown?.message.contains("device.melted") == true)
        }
    }

    @Test("a host name is resolved by the system and every address checked")
    func hostNames() async throws {
        #expect(try await HostAddresses.resolve("localhost").contains("127.0.0.1"))
        #expect(try await HostAddresses.resolve("[::1]") == ["::1"])
        await #expect(throws: (any Error).self) { try await HostAddresses.resolve("no-such-host.fleetset.invalid") }
    }
}
