import FleetJSON

/// One event as it is sent: the body `{"type", "timestamp", "data"}` (in that order) and the
/// Standard Webhooks headers. The id stays the same on every attempt, so a receiver can drop a
/// message it has already handled.
public struct WebhookMessage: Sendable, Hashable {
    /// `msg_` and the event's sequence in the outbox: unique per server's store.
    public let id: String
    /// The event's type, such as `rollout.paused`.
    public let type: String
    /// When the event happened, in seconds since the epoch.
    public let occurredAt: Int64
    /// What the event is about.
    public let data: JSONValue

    public init(id: String, type: String, occurredAt: Int64, data: JSONValue) {
        self.id = id
        self.type = type
        self.occurredAt = occurredAt
        self.data = data
    }

    /// The JSON body.
    public var body: [UInt8] {
        Array(
            JSONValue.object(["type": .string(type), "timestamp": .string(Timestamp.format(occurredAt)), "data": data]).serialized().utf8)
    }

    /// The headers of an attempt at `now`, signed by `secrets` (the current one first).
    public func headers(now: Int64, secrets: [WebhookSecret]) -> [(name: String, value: String)] {
        [
            ("content-type", "application/json"),
            ("webhook-id", id),
            ("webhook-timestamp", String(now)),
            ("webhook-signature", WebhookSignature.header(id: id, timestamp: now, body: body, secrets: secrets)),
        ]
    }
}
