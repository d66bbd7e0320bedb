import FleetServerCore
import PostgresNIO

/// Webhook subscriptions and the outbox in PostgreSQL. Due entries are claimed with
/// `FOR UPDATE SKIP LOCKED`, so that instances claiming at once take different entries.
extension PostgresTransaction {
    static let outboxColumns = "sequence, subscription, state, next_at, claimed_until, document"

    static func outboxEntry(_ row: PostgresRow) throws -> OutboxEntry {
        let (sequence, subscription, state, nextAt, claimedUntil, document) = try row.decode(
            (Int64, String, String, Int64, Int64?, String).self)
        return try OutboxEntry(
            sequence: sequence, subscription: subscription, state: state, nextAt: nextAt, claimedUntil: claimedUntil, document: document)
    }

    func webhookSubscriptions() async throws -> [WebhookSubscription] {
        try await rows("SELECT document FROM webhook_subscriptions ORDER BY created_at, id COLLATE \"C\"").map {
            try WebhookSubscription(storedText: try $0.decode(String.self))
        }
    }

    func insertWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try await rows(
            """
            INSERT INTO webhook_subscriptions (id, created_at, document)
            VALUES (\(subscription.id), \(subscription.createdAt), \(subscription.storedText))
            """)
    }

    func updateWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try await rows("UPDATE webhook_subscriptions SET document = \(subscription.storedText) WHERE id = \(subscription.id)")
    }

    func removeWebhookSubscription(id: String) async throws -> Bool {
        try await rows("DELETE FROM webhook_outbox WHERE subscription = \(id)")
        return try await !rows("DELETE FROM webhook_subscriptions WHERE id = \(id) RETURNING id").isEmpty
    }

    func nextOutboxSequences(_ count: Int) async throws -> [Int64] {
        // A sequence: never handed out twice, whatever other transactions take meanwhile.
        try await rows("SELECT nextval('webhook_outbox_sequence') FROM generate_series(1, \(count))").map { try $0.decode(Int64.self) }
            .sorted()
    }

    func raiseOutboxSequence(above sequence: Int64) async throws {
        try await rows(
            """
            SELECT setval('webhook_outbox_sequence', GREATEST(\(sequence),
                (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM webhook_outbox_sequence), 1), true)
            """)
    }

    func insertOutboxEntry(_ entry: OutboxEntry) async throws {
        try await rows(
            """
            INSERT INTO webhook_outbox (sequence, subscription, state, next_at, claimed_until, document)
            VALUES (\(entry.sequence), \(entry.subscription), \(entry.state.rawValue), \(entry.nextAt), \(entry.claimedUntil), \(entry.document))
            """)
    }

    func dueOutboxEntries(now: Int64, limit: Int) async throws -> [OutboxEntry] {
        try await rows(
            """
            SELECT \(unescaped: Self.outboxColumns) FROM webhook_outbox
            WHERE state = 'pending' AND next_at <= \(now) AND (claimed_until IS NULL OR claimed_until <= \(now))
            ORDER BY sequence LIMIT \(limit) FOR UPDATE SKIP LOCKED
            """
        ).map(Self.outboxEntry)
    }

    func outboxEntry(sequence: Int64) async throws -> OutboxEntry? {
        try await rows("SELECT \(unescaped: Self.outboxColumns) FROM webhook_outbox WHERE sequence = \(sequence) FOR UPDATE").first.map(
            Self.outboxEntry)
    }

    func updateOutboxEntry(_ entry: OutboxEntry) async throws {
        try await rows(
            """
            UPDATE webhook_outbox SET state = \(entry.state.rawValue), next_at = \(entry.nextAt), claimed_until = \(entry.claimedUntil),
                document = \(entry.document)
            WHERE sequence = \(entry.sequence)
            """)
    }

    func outboxEntries(subscription: String?, states: Set<OutboxEntry.State>, limit: Int) async throws -> [OutboxEntry] {
        let names = states.map(\.rawValue).sorted()
        return try await rows(
            """
            SELECT \(unescaped: Self.outboxColumns) FROM webhook_outbox
            WHERE state = ANY(\(names)) AND (\(subscription)::TEXT IS NULL OR subscription = \(subscription))
            ORDER BY sequence DESC LIMIT \(limit)
            """
        ).map(Self.outboxEntry)
    }

    func outboxCounts(subscription: String?) async throws -> [OutboxEntry.State: Int] {
        var counts: [OutboxEntry.State: Int] = [:]
        for row in try await rows(
            """
            SELECT state, COUNT(*) FROM webhook_outbox WHERE \(subscription)::TEXT IS NULL OR subscription = \(subscription) GROUP BY state
            """)
        {
            let (state, count) = try row.decode((String, Int64).self)
            if let state = OutboxEntry.State(rawValue: state) { counts[state] = Int(count) }
        }
        return counts
    }

    func removeDeliveredOutboxEntries(before time: Int64) async throws -> Int {
        // A delivered entry's next_at is when it was last tried.
        try await rows("DELETE FROM webhook_outbox WHERE state = 'delivered' AND next_at < \(time) RETURNING sequence").count
    }
}
