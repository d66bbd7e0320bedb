import FleetServerCore
import GRDB

/// Webhook subscriptions and the outbox in SQLite (one writer at a time: a claim needs no lock).
extension SQLiteTransaction {
    static func outboxEntry(_ row: Row) throws -> OutboxEntry {
        try OutboxEntry(
            sequence: row["sequence"], subscription: row["subscription"], state: row["state"], nextAt: row["next_at"],
            claimedUntil: row["claimed_until"], document: row["document"])
    }

    func webhookSubscriptions() async throws -> [WebhookSubscription] {
        try await pool.writeWithoutTransaction { db in
            try String.fetchAll(db, sql: "SELECT document FROM webhook_subscriptions ORDER BY created_at, id").map(
                WebhookSubscription.init(storedText:))
        }
    }

    func insertWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(
                sql: "INSERT INTO webhook_subscriptions (id, created_at, document) VALUES (?, ?, ?)",
                arguments: [subscription.id, subscription.createdAt, subscription.storedText])
        }
    }

    func updateWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(
                sql: "UPDATE webhook_subscriptions SET document = ? WHERE id = ?", arguments: [subscription.storedText, subscription.id])
        }
    }

    func removeWebhookSubscription(id: String) async throws -> Bool {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "DELETE FROM webhook_outbox WHERE subscription = ?", arguments: [id])
            try db.execute(sql: "DELETE FROM webhook_subscriptions WHERE id = ?", arguments: [id])
            return db.changesCount == 1
        }
    }

    func nextOutboxSequences(_ count: Int) async throws -> [Int64] {
        try await pool.writeWithoutTransaction { db in
            // One writer at a time: the counter row is this transaction's until it commits.
            let last =
                try Int64.fetchOne(db, sql: "UPDATE webhook_outbox_counter SET last = last + ? RETURNING last", arguments: [count]) ?? 0
            return (0..<Int64(count)).map { last - Int64(count) + 1 + $0 }
        }
    }

    func raiseOutboxSequence(above sequence: Int64) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(sql: "UPDATE webhook_outbox_counter SET last = max(last, ?)", arguments: [sequence])
        }
    }

    func insertOutboxEntry(_ entry: OutboxEntry) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(
                sql:
                    "INSERT INTO webhook_outbox (sequence, subscription, state, next_at, claimed_until, document) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [entry.sequence, entry.subscription, entry.state.rawValue, entry.nextAt, entry.claimedUntil, entry.document])
        }
    }

    func dueOutboxEntries(now: Int64, limit: Int) async throws -> [OutboxEntry] {
        try await pool.writeWithoutTransaction { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM webhook_outbox
                    WHERE state = 'pending' AND next_at <= ? AND (claimed_until IS NULL OR claimed_until <= ?)
                    ORDER BY sequence LIMIT ?
                    """, arguments: [now, now, limit]
            ).map(Self.outboxEntry)
        }
    }

    func outboxEntry(sequence: Int64) async throws -> OutboxEntry? {
        try await pool.writeWithoutTransaction { db in
            try Row.fetchOne(db, sql: "SELECT * FROM webhook_outbox WHERE sequence = ?", arguments: [sequence]).map(Self.outboxEntry)
        }
    }

    func updateOutboxEntry(_ entry: OutboxEntry) async throws {
        try await pool.writeWithoutTransaction { db in
            try db.execute(
                sql: "UPDATE webhook_outbox SET state = ?, next_at = ?, claimed_until = ?, document = ? WHERE sequence = ?",
                arguments: [entry.state.rawValue, entry.nextAt, entry.claimedUntil, entry.document, entry.sequence])
        }
    }

    func outboxEntries(subscription: String?, states: Set<OutboxEntry.State>, limit: Int) async throws -> [OutboxEntry] {
        let names = states.map(\.rawValue).sorted()
        let marks = names.map { _ in "?" }.joined(separator: ", ")
        return try await pool.writeWithoutTransaction { db in
            var arguments = StatementArguments(names)
            arguments += [subscription, subscription, limit]
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM webhook_outbox WHERE state IN (\(marks)) AND (? IS NULL OR subscription = ?)
                    ORDER BY sequence DESC LIMIT ?
                    """, arguments: arguments
            ).map(Self.outboxEntry)
        }
    }

    func outboxCounts(subscription: String?) async throws -> [OutboxEntry.State: Int] {
        try await pool.writeWithoutTransaction { db in
            var counts: [OutboxEntry.State: Int] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT state, COUNT(*) AS count FROM webhook_outbox WHERE ? IS NULL OR subscription = ? GROUP BY state",
                arguments: [subscription, subscription])
            {
                if let state = OutboxEntry.State(rawValue: row["state"]) { counts[state] = row["count"] }
            }
            return counts
        }
    }

    func removeDeliveredOutboxEntries(before time: Int64) async throws -> Int {
        try await pool.writeWithoutTransaction { db in
            // A delivered entry's next_at is when it was last tried.
            try db.execute(sql: "DELETE FROM webhook_outbox WHERE state = 'delivered' AND next_at < ?", arguments: [time])
            return db.changesCount
        }
    }
}
