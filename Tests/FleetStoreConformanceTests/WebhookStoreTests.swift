import FleetJSON
import FleetServerCore
import FleetStorePostgres
import FleetTestSupport
import FleetWebhooks
import Foundation
import Testing

/// Webhook subscriptions and the outbox: the same contract on every store, and one claim per
/// message across PostgreSQL instances.
@Suite("Store conformance: webhook subscriptions and the outbox")
struct WebhookStoreTests {
    static func subscription(_ id: String, events: Set<WebhookEventType> = [.rolloutPaused], apps: Set<String> = [], at: Int64 = 100)
        -> WebhookSubscription
    {
        WebhookSubscription(
            id: id, url: "https://hooks.example.com/\(id)", events: events, apps: apps,
            secrets: [.init(secret: .generate(), until: nil)], createdAt: at, createdBy: "ada")
    }

    static func paused(_ app: String, at time: Int64) -> WebhookEventDraft {
        WebhookEventDraft(type: .rolloutPaused, app: app, occurredAt: time, data: ["rollout": "r-1"])
    }

    @Test(
        "subscriptions are kept whole, an event fans out to those that receive it, in order, with its app",
        arguments: ConformingStore.allCases)
    func subscriptionsAndFanOut(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            let all = Self.subscription("wh_all", at: 100)
            let kiosk = Self.subscription("wh_kiosk", events: [.rolloutPaused, .deviceError], apps: ["kiosk"], at: 200)
            try await store.addWebhookSubscription(all)
            try await store.addWebhookSubscription(kiosk)
            await #expect(throws: (any Error).self) { try await store.addWebhookSubscription(Self.subscription("wh_all")) }
            #expect(try await store.webhookSubscriptionList() == [all, kiosk])
            // No subscriber yet for signage's errors; both for kiosk's pause.
            #expect(try await store.enqueue([Self.paused("kiosk", at: 1000), Self.paused("signage", at: 1001)]) == 3)
            #expect(
                try await store.enqueue([WebhookEventDraft(type: .deviceError, app: "signage", occurredAt: 1002, data: ["devices": 3])])
                    == 0)
            let entries = try await store.outboxEntries(subscription: nil)
            #expect(entries.map(\.sequence) == [3, 2, 1])
            #expect(entries.map(\.subscription) == ["wh_all", "wh_kiosk", "wh_all"])
            let first = try #require(entries.last)
            #expect(
                first.message.id == "msg_1" && first.message.type == "rollout.paused" && first.state == .pending && first.nextAt == 1000)
            #expect(first.message.data == .object(["rollout": "r-1", "app": "kiosk"]))
            #expect(try await store.outboxEntries(subscription: "wh_kiosk").map(\.sequence) == [2])
            #expect(try await store.outboxCounts() == [.pending: 3, .delivered: 0, .dead: 0])
            #expect(try await store.outboxCounts(subscription: "wh_kiosk") == [.pending: 1, .delivered: 0, .dead: 0])
            // A changed subscription is kept whole; a removed one takes its messages.
            let rotated = try await store.changeWebhookSubscription(id: "wh_kiosk") { stored in
                var changed = stored
                changed.secrets.insert(.init(secret: .generate(), until: nil), at: 0)
                changed.secrets[1].until = 5000
                return changed
            }
            #expect(try await store.webhookSubscriptionList().last == rotated)
            #expect(try await store.changeWebhookSubscription(id: "wh_none") { $0 } == nil)
            #expect(try await store.removeWebhookSubscription(id: "wh_kiosk"))
            #expect(try await store.removeWebhookSubscription(id: "wh_kiosk") == false)
            #expect(try await store.outboxEntries(subscription: nil).map(\.sequence) == [3, 1])
            // Sequences keep growing past a removed subscription's.
            #expect(try await store.enqueue([Self.paused("kiosk", at: 1003)]) == 1)
            #expect(try await store.outboxEntries(subscription: nil).first?.sequence == 4)
            // A message id is never handed out again, not even after the newest message went
            // with its subscription: a receiver that saw msg_5 would drop a new msg_5.
            try await store.addWebhookSubscription(Self.subscription("wh_new", at: 300))
            #expect(try await store.enqueue([WebhookEventDraft(type: .rolloutPaused, app: "x", occurredAt: 1004, data: [:])]) == 2)
            #expect(try await store.removeWebhookSubscription(id: "wh_new"))
            #expect(try await store.removeWebhookSubscription(id: "wh_all"))
            try await store.addWebhookSubscription(Self.subscription("wh_again", at: 400))
            #expect(try await store.enqueue([Self.paused("kiosk", at: 1005)]) == 1)
            #expect(try await store.outboxEntries(subscription: nil).map(\.message.id) == ["msg_7"])
        }
    }

    @Test(
        "due messages are claimed once until their claim ends; an attempt is recorded only under its claim; dead ones are redelivered",
        arguments: ConformingStore.allCases)
    func claimsAttemptsAndRedelivery(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            try await store.addWebhookSubscription(Self.subscription("wh_a"))
            try await store.enqueue([Self.paused("kiosk", at: 1000), Self.paused("kiosk", at: 1100)])
            #expect(try await store.claimOutboxEntries(now: 999, claimedUntil: 1059, limit: 10).isEmpty)  // not due yet
            let claimed = try await store.claimOutboxEntries(now: 1000, claimedUntil: 1060, limit: 10)
            #expect(claimed.map(\.entry.sequence) == [1])
            #expect(claimed.first?.subscription.id == "wh_a" && claimed.first?.entry.claimedUntil == 1060)
            // Claimed: no other claim takes it before the claim ends…
            #expect(try await store.claimOutboxEntries(now: 1059, claimedUntil: 1119, limit: 10).isEmpty)
            // …and after it, another instance may (the first died while sending).
            let again = try await store.claimOutboxEntries(now: 1100, claimedUntil: 1160, limit: 1)
            #expect(again.map(\.entry.sequence) == [1])
            // The first instance's late result is not recorded; the claimant's is.
            let first = try #require(claimed.first).entry
            #expect(
                try await store.recordOutboxAttempt(first.after(.delivered(status: 204), now: 1101, fraction: 0.5), claimedUntil: 1060)
                    == false)
            let failed = try #require(again.first).entry.after(.refused(status: 500), now: 1101, fraction: 0.5)
            #expect(try await store.recordOutboxAttempt(failed, claimedUntil: 1160))
            let stored = try #require(try await store.outboxEntries(subscription: "wh_a").last)
            #expect(stored.state == .pending && stored.attempts == 1 && stored.nextAt == 1106 && stored.claimedUntil == nil)
            #expect(stored.lastResult == "HTTP 500" && stored.firstAttemptAt == 1101)
            // A dead message (a day of failures) stays until redelivered.
            let claimedDead = try await store.claimOutboxEntries(now: 1106, claimedUntil: 1166, limit: 5)
            #expect(claimedDead.map(\.entry.sequence) == [1, 2])
            #expect(
                try await store.recordOutboxAttempt(
                    stored.after(.failed("timed out"), now: 1106 + 90_000, fraction: 0.5), claimedUntil: 1166))
            #expect(try await store.outboxCounts() == [.pending: 1, .delivered: 0, .dead: 1])
            #expect(try await store.outboxEntries(subscription: nil, states: [.dead]).map(\.sequence) == [1])
            #expect(try await store.redeliverOutboxEntry(sequence: 1, subscription: "wh_other", now: 2000) == nil)
            let redelivered = try #require(try await store.redeliverOutboxEntry(sequence: 1, subscription: "wh_a", now: 2000))
            #expect(redelivered.state == .pending && redelivered.attempts == 0 && redelivered.nextAt == 2000)
            #expect(try await store.redeliverDeadEntries(subscription: "wh_a", now: 2000) == 0)
            #expect(try await store.outboxCounts() == [.pending: 2, .delivered: 0, .dead: 0])
        }
    }

    @Test("delivered messages are kept a week, then removed by a claim", arguments: ConformingStore.allCases)
    func deliveredAreRemovedAfterAWeek(kind: ConformingStore) async throws {
        try await withStore(kind) { store in
            try await store.addWebhookSubscription(Self.subscription("wh_a"))
            try await store.enqueue([Self.paused("kiosk", at: 1000)])
            let claimed = try #require(try await store.claimOutboxEntries(now: 1000, claimedUntil: 1060, limit: 10).first)
            try await store.recordOutboxAttempt(claimed.entry.after(.delivered(status: 200), now: 1001, fraction: 0.5), claimedUntil: 1060)
            _ = try await store.claimOutboxEntries(now: 1001 + 7 * 86_400, claimedUntil: 0, limit: 1)
            #expect(try await store.outboxCounts()[.delivered] == 1)
            _ = try await store.claimOutboxEntries(now: 1002 + 7 * 86_400, claimedUntil: 0, limit: 1)
            #expect(try await store.outboxCounts()[.delivered] == 0)
        }
    }

    @Test("two PostgreSQL instances queueing at once never take the same sequence")
    func twoInstancesQueueAtOnce() async throws {
        try await withTwoPostgresInstances { first, second, _ in
            try await first.addWebhookSubscription(Self.subscription("wh_a"))
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, store) in [first, second, first, second].enumerated() {
                    group.addTask {
                        for round in 0..<25 { try await store.enqueue([Self.paused("kiosk", at: Int64(index * 100 + round))]) }
                    }
                }
                try await group.waitForAll()
            }
            let sequences = try await first.outboxEntries(subscription: nil, limit: 1000).map(\.sequence)
            #expect(sequences.count == 100 && Set(sequences).count == 100)
        }
    }

    @Test("two PostgreSQL instances claiming at once take every message once")
    func twoInstancesClaimEachMessageOnce() async throws {
        try await withTwoPostgresInstances { first, second, _ in
            try await first.addWebhookSubscription(Self.subscription("wh_a"))
            for batch in 0..<4 {
                try await first.enqueue((0..<100).map { Self.paused("kiosk", at: 1000 + Int64(batch * 100 + $0)) })
            }
            let taken = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for store in [first, second, first, second] {
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let claimed = try await store.claimOutboxEntries(now: 5000, claimedUntil: 5060, limit: 7)
                            if claimed.isEmpty { return mine }
                            mine += claimed.map(\.entry.sequence)
                        }
                    }
                }
                return try await group.reduce(into: [[Int64]]()) { $0.append($1) }
            }
            let all = taken.flatMap { $0 }
            #expect(all.count == 400 && Set(all).count == 400)
            #expect(taken.filter { !$0.isEmpty }.count >= 2, "both instances claimed: \(taken.map(\.count))")
        }
    }
}

@Suite struct OutboxEntryTests {
    let entry = OutboxEntry(
        sequence: 7, subscription: "wh_a", nextAt: 100,
        message: WebhookMessage(id: "msg_7", type: "rollout.paused", occurredAt: 100, data: .null))

    @Test func threeRefusalsThenADelivery() {
        var current = entry
        var now: Int64 = 100
        for _ in 0..<3 {
            current = current.after(.refused(status: 500), now: now, fraction: 0.5)
            #expect(current.state == .pending)
            now = current.nextAt
        }
        #expect(current.attempts == 3 && current.nextAt == 100 + 5 + 30 + 120 && current.firstAttemptAt == 100)
        current = current.after(.delivered(status: 204), now: now, fraction: 0.5)
        #expect(current.state == .delivered && current.attempts == 4 && current.lastResult == "HTTP 204" && current.nextAt == now)
    }

    @Test func aReceiverThatNeverAnswersEndsDeadAfterADay() {
        var current = entry
        var now: Int64 = 100
        while current.state == .pending {
            current = current.after(.failed("timed out after 10 s"), now: now, fraction: 0.5)
            now = current.nextAt
        }
        #expect(current.state == .dead && current.attempts == 13 && current.lastResult == "timed out after 10 s")
        #expect(current.lastAttemptAt! - current.firstAttemptAt! <= 86_400)
        let again = current.redelivered(now: 200_000)
        #expect(again.state == .pending && again.attempts == 0 && again.firstAttemptAt == nil && again.nextAt == 200_000)
        // A message being sent now keeps its claim: no other instance sends it meanwhile.
        var sending = entry
        sending.claimedUntil = 160
        #expect(sending.redelivered(now: 150).claimedUntil == 160 && sending.redelivered(now: 160).claimedUntil == nil)
    }

    @Test func documentsReadBack() throws {
        let tried = entry.after(.refused(status: 503), now: 150, fraction: 0.5)
        let read = try OutboxEntry(
            sequence: 7, subscription: "wh_a", state: "pending", nextAt: tried.nextAt, claimedUntil: nil, document: tried.document)
        #expect(read == tried)
        #expect(throws: StoreCorruption.self) {
            try OutboxEntry(sequence: 7, subscription: "wh_a", state: "lost", nextAt: 1, claimedUntil: nil, document: tried.document)
        }
        let subscription = WebhookStoreTests.subscription("wh_x", events: [.deviceError, .rolloutPaused], apps: ["kiosk"])
        #expect(try WebhookSubscription(storedText: subscription.storedText) == subscription)
        #expect(subscription.receives(.deviceError, apps: ["kiosk"]) && !subscription.receives(.deviceError, apps: ["signage"]))
        #expect(subscription.receives(.deviceError, apps: ["signage", "kiosk"]))
        #expect(!subscription.receives(.deviceEnrolled, apps: ["kiosk"]) && !subscription.receives(.deviceError, apps: []))
        #expect(WebhookStoreTests.subscription("wh_y", events: [.audit]).receives(.audit, apps: []))
    }
}
