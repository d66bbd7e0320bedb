import FleetJSON
import FleetProtocol
import FleetWebhooks
import HTTPTypes
import Logging

extension WebhookService {
    /// How long a rotated-out secret still signs, beside the new one: a day, for receivers to switch.
    public static let rotationOverlap: Int64 = 86_400

    /// Makes a subscription; the answer holds its secret, this once.
    ///
    /// - Throws: 400 `bad-webhook` for a URL the server may not call or an unknown event type.
    public func create(_ request: WebhookRequest, actor: String) async throws -> CreatedWebhook {
        let destination = try Self.checkedURL(request.url)
        let subscription = WebhookSubscription(
            id: WebhookSubscription.newID(), url: destination.url, events: try Self.eventTypes(request.events),
            apps: Set(request.apps), secrets: [.init(secret: .generate(), until: nil)], createdAt: now, createdBy: actor)
        try await store.addWebhookSubscription(subscription)
        logger.notice(
            "webhook subscribed",
            metadata: [
                "event": "webhook-added", "webhook": "\(subscription.id)", "host": "\(destination.host)",
                "events": "\(request.events.joined(separator: ","))", "actor": "\(actor)",
            ])
        return CreatedWebhook(info: Self.info(subscription, counts: [:], now: now), secret: subscription.secrets[0].secret.text)
    }

    /// Every subscription, oldest first, with how many of its messages are in each state.
    public func list() async throws -> WebhookList {
        let subscriptions = try await store.webhookSubscriptionList()
        var list: [WebhookInfo] = []
        for subscription in subscriptions {
            list.append(Self.info(subscription, counts: try await counts(of: subscription.id), now: now))
        }
        return WebhookList(webhooks: list)
    }

    /// One subscription and its latest 50 messages, newest first.
    ///
    /// - Throws: 404 `unknown-webhook`.
    public func show(id: String) async throws -> WebhookDetail {
        let subscription = try await subscription(id: id)
        let messages = try await store.outboxEntries(subscription: id).map(Self.messageInfo)
        return WebhookDetail(webhook: Self.info(subscription, counts: try await counts(of: id), now: now), messages: messages)
    }

    /// A new secret; the one before still signs (a second signature) for ``rotationOverlap``.
    ///
    /// - Throws: 404 `unknown-webhook`.
    public func rotateSecret(id: String, actor: String) async throws -> CreatedWebhook {
        let time = now
        let secret = WebhookSecret.generate()
        guard
            let changed = try await store.changeWebhookSubscription(
                id: id,
                { stored in
                    var changed = stored
                    // The current secret overlaps; one rotated before no longer signs.
                    changed.secrets =
                        [.init(secret: secret, until: nil)]
                        + stored.secrets.prefix(1).map { .init(secret: $0.secret, until: time + Self.rotationOverlap) }
                    return changed
                })
        else { throw Self.unknownWebhook(id) }
        logger.notice("webhook secret rotated", metadata: ["event": "webhook-rotated", "webhook": "\(id)", "actor": "\(actor)"])
        return CreatedWebhook(info: Self.info(changed, counts: try await counts(of: id), now: time), secret: secret.text)
    }

    /// Sends one message again (`message`: `msg_…`), or every dead one, from now on, with a new
    /// day of attempts.
    ///
    /// - Throws: 404 `unknown-webhook` for an unknown subscription or message.
    public func redeliver(id: String, _ request: RedeliverRequest, actor: String) async throws -> RedeliveryResult {
        _ = try await subscription(id: id)
        let count: Int
        if let message = request.message {
            guard message.hasPrefix("msg_"), let sequence = Int64(message.dropFirst(4)),
                try await store.redeliverOutboxEntry(sequence: sequence, subscription: id, now: now) != nil
            else { throw ServiceError(404, .unknownWebhook, "webhook \(id) has no message \(message)") }
            count = 1
        } else {
            count = try await store.redeliverDeadEntries(subscription: id, now: now)
        }
        events.publish(.webhooksQueued)
        logger.notice(
            "webhook messages redelivered",
            metadata: ["event": "webhook-redelivered", "webhook": "\(id)", "count": "\(count)", "actor": "\(actor)"])
        return RedeliveryResult(redelivered: Int64(count))
    }

    /// Sends the subscription a `webhook.ping` message, to check its receiver.
    ///
    /// - Throws: 404 `unknown-webhook`.
    public func ping(id: String, actor: String) async throws -> RedeliveryResult {
        let subscription = try await subscription(id: id)
        let time = now
        let written = try await store.write { transaction in
            // To this subscription only, whatever the others asked for.
            let sequence = try await transaction.nextOutboxSequences(1)[0]
            let message = WebhookMessage(
                id: OutboxEntry.messageID(sequence), type: WebhookEventType.ping.rawValue, occurredAt: time,
                data: ["webhook": .string(subscription.id), "actor": .string(actor)])
            try await transaction.insertOutboxEntry(
                OutboxEntry(sequence: sequence, subscription: subscription.id, nextAt: time, message: message))
            return 1
        }
        events.publish(.webhooksQueued)
        return RedeliveryResult(redelivered: Int64(written))
    }

    /// Removes the subscription and its messages.
    ///
    /// - Throws: 404 `unknown-webhook`.
    public func remove(id: String, actor: String) async throws {
        guard try await store.removeWebhookSubscription(id: id) else { throw Self.unknownWebhook(id) }
        logger.notice("webhook removed", metadata: ["event": "webhook-removed", "webhook": "\(id)", "actor": "\(actor)"])
    }

    // MARK: Parts

    private func subscription(id: String) async throws -> WebhookSubscription {
        guard let subscription = try await store.webhookSubscriptionList().first(where: { $0.id == id }) else {
            throw Self.unknownWebhook(id)
        }
        return subscription
    }

    private func counts(of id: String) async throws -> [OutboxEntry.State: Int64] {
        try await store.outboxCounts(subscription: id).mapValues { Int64($0) }
    }

    static func unknownWebhook(_ id: String) -> ServiceError { ServiceError(404, .unknownWebhook, "no webhook has id \(id)") }

    /// The URL, when its form is one the server may call (the addresses are checked at each
    /// attempt). Only its host is ever logged: a receiver's URL may hold its own credential.
    static func checkedURL(_ url: String) throws(ServiceError) -> DestinationPolicy.Destination {
        do {
            return try DestinationPolicy().check(url: url)
        } catch {
            throw ServiceError(400, .badWebhook, "url: \(error.reason)")
        }
    }

    static func eventTypes(_ names: [String]) throws(ServiceError) -> Set<WebhookEventType> {
        var types: Set<WebhookEventType> = []
        for name in names {
            guard let type = WebhookEventType(rawValue: name), type != .ping else {
                let known = WebhookEventType.allCases.filter { $0 != .ping }.map(\.rawValue).joined(separator: ", ")
                throw ServiceError(400, .badWebhook, "events: unknown event type '\(name)'; known: \(known)")
            }
            types.insert(type)
        }
        return types
    }

    static func info(_ subscription: WebhookSubscription, counts: [OutboxEntry.State: Int64], now: Int64) -> WebhookInfo {
        WebhookInfo(
            id: subscription.id, url: subscription.url, events: subscription.events.map(\.rawValue).sorted(),
            apps: subscription.apps.sorted(),
            createdAt: subscription.createdAt, createdBy: subscription.createdBy,
            previousSecretUntil: subscription.secrets.dropFirst().compactMap(\.until).filter { $0 > now }.max(),
            pending: counts[.pending] ?? 0, delivered: counts[.delivered] ?? 0, dead: counts[.dead] ?? 0)
    }

    static func messageInfo(_ entry: OutboxEntry) -> WebhookMessageInfo {
        WebhookMessageInfo(
            id: entry.message.id, type: entry.message.type, state: entry.state.rawValue, occurredAt: entry.message.occurredAt,
            attempts: Int64(entry.attempts), lastAttemptAt: entry.lastAttemptAt, lastResult: entry.lastResult,
            nextAttemptAt: entry.state == .pending ? entry.nextAt : nil)
    }
}
