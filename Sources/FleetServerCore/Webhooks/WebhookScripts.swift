import FleetJSON
import FleetWebhooks

/// An event to tell subscribers of: written to the outbox, once per subscription that receives
/// it, in the transaction of the change it tells of.
public struct WebhookEventDraft: Sendable, Hashable {
    public var type: WebhookEventType
    /// The apps it is about (one for a rollout; a device's apps; none for an audit entry).
    public var apps: [String]
    public var occurredAt: Int64
    /// What it says (`app` is added for an event of one app).
    public var data: JSONObject

    public init(type: WebhookEventType, apps: [String], occurredAt: Int64, data: JSONObject) {
        self.type = type
        self.apps = apps
        self.occurredAt = occurredAt
        self.data = data
    }

    /// An event about one app.
    public init(type: WebhookEventType, app: String, occurredAt: Int64, data: JSONObject) {
        self.init(type: type, apps: [app], occurredAt: occurredAt, data: data)
    }
}

/// The outbox's transactions, over the primitives of ``StoreTransaction``, once for every store.
extension StoreTransaction {
    /// Writes an outbox entry for each subscription that receives each of `events`; returns how
    /// many. Called inside the write that makes the change, so the messages exist exactly when it
    /// does.
    @discardableResult
    public func enqueue(_ events: [WebhookEventDraft]) async throws -> Int {
        guard !events.isEmpty else { return 0 }
        let subscriptions = try await webhookSubscriptions()
        guard !subscriptions.isEmpty else { return 0 }
        let deliveries = events.flatMap { event in
            subscriptions.filter { $0.receives(event.type, apps: event.apps) }.map { (event: event, subscription: $0) }
        }
        guard !deliveries.isEmpty else { return 0 }
        var sequences = try await nextOutboxSequences(deliveries.count)[...]
        var written = 0
        for (event, subscription) in deliveries {
            var data = event.data
            if event.apps.count == 1, data["app"] == nil { data["app"] = .string(event.apps[0]) }
            let sequence = sequences.removeFirst()
            let message = WebhookMessage(
                id: OutboxEntry.messageID(sequence), type: event.type.rawValue, occurredAt: event.occurredAt, data: .object(data))
            try await insertOutboxEntry(
                OutboxEntry(sequence: sequence, subscription: subscription.id, nextAt: event.occurredAt, message: message))
            written += 1
        }
        return written
    }
}

/// An outbox entry claimed for sending, with the subscription it goes to.
public struct ClaimedMessage: Sendable, Hashable {
    public let entry: OutboxEntry
    public let subscription: WebhookSubscription
}

extension SettingsStore {
    /// Writes `events` to the outbox in a transaction of their own (for events that are not one
    /// change's, such as a minute's reports); returns how many entries.
    @discardableResult
    public func enqueue(_ events: [WebhookEventDraft]) async throws -> Int {
        guard !events.isEmpty else { return 0 }
        return try await write { try await $0.enqueue(events) }
    }

    /// Every subscription, oldest first.
    public func webhookSubscriptionList() async throws -> [WebhookSubscription] {
        try await write { try await $0.webhookSubscriptions() }
    }

    /// Inserts a subscription.
    public func addWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try await write { try await $0.insertWebhookSubscription(subscription) }
    }

    /// Changes the subscription with `id`; `nil` when there is none.
    public func changeWebhookSubscription(id: String, _ change: @escaping @Sendable (WebhookSubscription) throws -> WebhookSubscription)
        async throws -> WebhookSubscription?
    {
        try await write { transaction in
            guard let stored = try await transaction.webhookSubscriptions().first(where: { $0.id == id }) else { return nil }
            let changed = try change(stored)
            try await transaction.updateWebhookSubscription(changed)
            return changed
        }
    }

    /// Removes the subscription with `id` and its messages; false when there is none.
    public func removeWebhookSubscription(id: String) async throws -> Bool {
        try await write { try await $0.removeWebhookSubscription(id: id) }
    }

    /// Claims up to `limit` messages due at `now` for this instance until `claimedUntil`: no
    /// other instance takes them before, and if this one dies sending, they go again after.
    /// Delivered entries older than a week are removed on the way.
    public func claimOutboxEntries(now: Int64, claimedUntil: Int64, limit: Int) async throws -> [ClaimedMessage] {
        try await write { transaction in
            _ = try await transaction.removeDeliveredOutboxEntries(before: now - 7 * 24 * 3600)
            let due = try await transaction.dueOutboxEntries(now: now, limit: limit)
            guard !due.isEmpty else { return [] }
            let subscriptions = Dictionary(uniqueKeysWithValues: try await transaction.webhookSubscriptions().map { ($0.id, $0) })
            var claimed: [ClaimedMessage] = []
            for var entry in due {
                guard let subscription = subscriptions[entry.subscription] else { continue }
                entry.claimedUntil = claimedUntil
                try await transaction.updateOutboxEntry(entry)
                claimed.append(ClaimedMessage(entry: entry, subscription: subscription))
            }
            return claimed
        }
    }

    /// Records an attempt's result (`attempted`, from ``OutboxEntry/after(_:now:fraction:schedule:)``
    /// of the claimed entry) while the claim is this instance's; false, writing nothing, when it
    /// is not (the claim ran out and another instance took the message).
    @discardableResult
    public func recordOutboxAttempt(_ attempted: OutboxEntry, claimedUntil: Int64) async throws -> Bool {
        try await write { transaction in
            guard let stored = try await transaction.outboxEntry(sequence: attempted.sequence), stored.state == .pending,
                stored.claimedUntil == claimedUntil
            else { return false }
            try await transaction.updateOutboxEntry(attempted)
            return true
        }
    }

    /// Up to `limit` messages, newest first, of one subscription (`nil`: all) in `states`.
    public func outboxEntries(subscription: String?, states: Set<OutboxEntry.State> = Set(OutboxEntry.State.allCases), limit: Int = 50)
        async throws -> [OutboxEntry]
    {
        try await write { try await $0.outboxEntries(subscription: subscription, states: states, limit: limit) }
    }

    /// How many messages of one subscription (`nil`: of all) are in each state (every state
    /// present, 0 when none).
    public func outboxCounts(subscription: String? = nil) async throws -> [OutboxEntry.State: Int] {
        let counts = try await write { try await $0.outboxCounts(subscription: subscription) }
        return Dictionary(uniqueKeysWithValues: OutboxEntry.State.allCases.map { ($0, counts[$0] ?? 0) })
    }

    /// Sends the message `sequence` again from `now`, with a new 24-hour window; `nil` when there
    /// is no such message, or it is not the subscription `subscription`'s.
    public func redeliverOutboxEntry(sequence: Int64, subscription: String, now: Int64) async throws -> OutboxEntry? {
        try await write { transaction in
            guard let stored = try await transaction.outboxEntry(sequence: sequence), stored.subscription == subscription else {
                return nil
            }
            let again = stored.redelivered(now: now)
            try await transaction.updateOutboxEntry(again)
            return again
        }
    }

    /// Sends every dead message of `subscription` again from `now`; returns how many.
    public func redeliverDeadEntries(subscription: String, now: Int64) async throws -> Int {
        try await write { transaction in
            let dead = try await transaction.outboxEntries(subscription: subscription, states: [.dead], limit: 10_000)
            for entry in dead { try await transaction.updateOutboxEntry(entry.redelivered(now: now)) }
            return dead.count
        }
    }
}
