import FleetJSON

/// `POST /v1/admin/webhooks`: a subscription — where events go, which types, of which apps.
public struct WebhookRequest: Sendable, Hashable {
    /// `https://…` (`http://` only for a loopback host).
    public var url: String
    /// Event types such as `rollout.paused` (1 to 20).
    public var events: [String]
    /// The apps whose events it receives; empty: every app's, and those of no app.
    public var apps: [String]

    public init(url: String, events: [String], apps: [String] = []) {
        self.url = url
        self.events = events
        self.apps = apps
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["url", "events", "apps"])
        url = try reader.string("url", maximumLength: 2048)
        guard let events = try reader.names("events", maximumCount: 20, maximumLength: 64), !events.isEmpty else {
            throw DocumentError(at: JSONPointer.root.appending("events"), "must be an array of 1 to 20 event types")
        }
        self.events = events
        apps = try reader.names("apps", maximumCount: 100, maximumLength: 64) ?? []
    }

    public var json: JSONValue {
        ["url": .string(url), "events": .array(events.map(JSONValue.string)), "apps": .array(apps.map(JSONValue.string))]
    }
}

/// A subscription as listed: never its secret.
public struct WebhookInfo: Sendable, Hashable {
    /// `wh_…`.
    public var id: String
    public var url: String
    public var events: [String]
    public var apps: [String]
    public var createdAt: Int64
    public var createdBy: String
    /// Until when the secret before the last rotation still signs; `nil`: no rotation under way.
    public var previousSecretUntil: Int64?
    /// Its messages waiting for an attempt, delivered (kept a week), and dead (tried for a day).
    public var pending: Int64
    public var delivered: Int64
    public var dead: Int64

    public init(
        id: String, url: String, events: [String], apps: [String], createdAt: Int64, createdBy: String, previousSecretUntil: Int64?,
        pending: Int64, delivered: Int64, dead: Int64
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.apps = apps
        self.createdAt = createdAt
        self.createdBy = createdBy
        self.previousSecretUntil = previousSecretUntil
        self.pending = pending
        self.delivered = delivered
        self.dead = dead
    }

    static let members = ["id", "url", "events", "apps", "createdAt", "createdBy", "previousSecretUntil", "pending", "delivered", "dead"]

    /// Reads the wire form at `location`; unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root, also extra: [String] = []) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: Set(Self.members + extra))
        id = try reader.string("id", maximumLength: 64)
        url = try reader.string("url", maximumLength: 2048)
        events = try reader.names("events", maximumCount: 20, maximumLength: 64) ?? []
        apps = try reader.names("apps", maximumCount: 100, maximumLength: 64) ?? []
        createdAt = try reader.timestamp("createdAt")
        createdBy = try reader.string("createdBy", maximumLength: 64)
        previousSecretUntil = try reader.nullableTimestamp("previousSecretUntil")
        pending = try reader.count("pending")
        delivered = try reader.count("delivered")
        dead = try reader.count("dead")
    }

    public var json: JSONValue {
        [
            "id": .string(id), "url": .string(url), "events": .array(events.map(JSONValue.string)),
            "apps": .array(apps.map(JSONValue.string)), "createdAt": .string(Timestamp.format(createdAt)), "createdBy": .string(createdBy),
            "previousSecretUntil": previousSecretUntil.map { .string(Timestamp.format($0)) } ?? .null,
            "pending": .number(.integer(pending)), "delivered": .number(.integer(delivered)), "dead": .number(.integer(dead)),
        ]
    }
}

/// `GET /v1/admin/webhooks`.
public struct WebhookList: Sendable, Hashable {
    public var webhooks: [WebhookInfo]

    public init(webhooks: [WebhookInfo]) { self.webhooks = webhooks }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["webhooks"])
        webhooks = try reader.array("webhooks") { element, location throws(DocumentError) in try WebhookInfo(json: element, at: location) }
    }

    public var json: JSONValue { ["webhooks": .array(webhooks.map(\.json))] }
}

/// The answer to making a subscription or rotating its secret: the secret, shown this once.
public struct CreatedWebhook: Sendable, Hashable {
    public var info: WebhookInfo
    /// `whsec_…`: what the receiver verifies signatures with.
    public var secret: String

    public init(info: WebhookInfo, secret: String) {
        self.info = info
        self.secret = secret
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        info = try WebhookInfo(json: json, also: ["secret"])
        secret = try ObjectReader(json, allowed: Set(WebhookInfo.members + ["secret"])).string("secret", maximumLength: 128)
    }

    public var json: JSONValue {
        guard case .object(var object) = info.json else { return info.json }
        object["secret"] = .string(secret)
        return .object(object)
    }
}

/// One message of a subscription, as `fleetset admin webhooks show` lists it.
public struct WebhookMessageInfo: Sendable, Hashable {
    /// `msg_…`: the `webhook-id` header, the same on every attempt.
    public var id: String
    public var type: String
    /// `pending`, `delivered` or `dead`.
    public var state: String
    public var occurredAt: Int64
    public var attempts: Int64
    public var lastAttemptAt: Int64?
    /// `HTTP 500`, `timed out …`, a refused address.
    public var lastResult: String?
    /// When it is tried next (pending only).
    public var nextAttemptAt: Int64?

    public init(
        id: String, type: String, state: String, occurredAt: Int64, attempts: Int64, lastAttemptAt: Int64?, lastResult: String?,
        nextAttemptAt: Int64?
    ) {
        self.id = id
        self.type = type
        self.state = state
        self.occurredAt = occurredAt
        self.attempts = attempts
        self.lastAttemptAt = lastAttemptAt
        self.lastResult = lastResult
        self.nextAttemptAt = nextAttemptAt
    }

    /// Reads the wire form at `location`; unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location, allowed: ["id", "type", "state", "occurredAt", "attempts", "lastAttemptAt", "lastResult", "nextAttemptAt"])
        id = try reader.string("id", maximumLength: 64)
        type = try reader.string("type", maximumLength: 64)
        state = try reader.string("state", maximumLength: 16)
        occurredAt = try reader.timestamp("occurredAt")
        attempts = try reader.count("attempts")
        lastAttemptAt = try reader.nullableTimestamp("lastAttemptAt")
        lastResult = reader.object["lastResult"] == .null ? nil : try reader.optionalString("lastResult", maximumLength: 1024)
        nextAttemptAt = try reader.nullableTimestamp("nextAttemptAt")
    }

    public var json: JSONValue {
        [
            "id": .string(id), "type": .string(type), "state": .string(state), "occurredAt": .string(Timestamp.format(occurredAt)),
            "attempts": .number(.integer(attempts)), "lastAttemptAt": lastAttemptAt.map { .string(Timestamp.format($0)) } ?? .null,
            "lastResult": lastResult.map(JSONValue.string) ?? .null,
            "nextAttemptAt": nextAttemptAt.map { .string(Timestamp.format($0)) } ?? .null,
        ]
    }
}

/// `GET /v1/admin/webhooks/{id}`: the subscription and its latest messages, newest first.
public struct WebhookDetail: Sendable, Hashable {
    public var webhook: WebhookInfo
    public var messages: [WebhookMessageInfo]

    public init(webhook: WebhookInfo, messages: [WebhookMessageInfo]) {
        self.webhook = webhook
        self.messages = messages
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["webhook", "messages"])
        guard let webhook = reader.object["webhook"] else { throw DocumentError(at: JSONPointer.root.appending("webhook"), "is missing") }
        self.webhook = try WebhookInfo(json: webhook, at: JSONPointer.root.appending("webhook"))
        messages = try reader.array("messages") { element, location throws(DocumentError) in
            try WebhookMessageInfo(json: element, at: location)
        }
    }

    public var json: JSONValue { ["webhook": webhook.json, "messages": .array(messages.map(\.json))] }
}

/// `POST /v1/admin/webhooks/{id}/redeliver`: one message again (`message`), or every dead one.
public struct RedeliverRequest: Sendable, Hashable {
    /// `msg_…`; `nil`: every dead message of the subscription.
    public var message: String?

    public init(message: String?) { self.message = message }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        message = try ObjectReader(json, allowed: ["message"]).optionalString("message", maximumLength: 64)
    }

    public var json: JSONValue { message.map { ["message": .string($0)] } ?? [:] }
}

/// The answer to a redelivery: how many messages go again.
public struct RedeliveryResult: Sendable, Hashable {
    public var redelivered: Int64

    public init(redelivered: Int64) { self.redelivered = redelivered }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        redelivered = try ObjectReader(json, allowed: ["redelivered"]).count("redelivered")
    }

    public var json: JSONValue { ["redelivered": .number(.integer(redelivered))] }
}
