import FleetJSON
import FleetWebhooks

/// The events a subscription may ask for. Device reports and silence come aggregated (per app,
/// per minute), never one per device.
public enum WebhookEventType: String, Sendable, CaseIterable, Hashable {
    case rolloutStarted = "rollout.started"
    case rolloutWaveAdmitted = "rollout.wave-admitted"
    case rolloutPaused = "rollout.paused"
    case rolloutCompleted = "rollout.completed"
    case rolloutAborted = "rollout.aborted"
    case revert = "settings.reverted"
    case metadataStored = "metadata.stored"
    case deviceError = "device.error"
    case deviceUnsupported = "device.unsupported"
    case devicesSilent = "devices.silent"
    case deviceEnrolled = "device.enrolled"
    case deviceDisabled = "device.disabled"
    case deviceDeleted = "device.deleted"
    case audit = "audit.entry"
    /// A message sent by `fleetset admin webhooks test`, to check a receiver.
    case ping = "webhook.ping"
}

/// A person's subscription: where events of some types (of some apps, or every app) go, and
/// the secrets they are signed with. One JSON document per row.
public struct WebhookSubscription: Sendable, Hashable {
    /// `wh_` and 16 random hexadecimal digits.
    public let id: String
    public var url: String
    /// The event types it receives (never empty).
    public var events: Set<WebhookEventType>
    /// The apps whose events it receives; empty: every app's, and those of no app.
    public var apps: Set<String>
    /// The current secret first; a rotated one follows until `until`, so receivers can switch.
    public var secrets: [KeptSecret]
    public var createdAt: Int64
    public var createdBy: String

    /// A secret, and until when it signs (`nil`: the current one).
    public struct KeptSecret: Sendable, Hashable {
        public var secret: WebhookSecret
        public var until: Int64?

        public init(secret: WebhookSecret, until: Int64?) {
            self.secret = secret
            self.until = until
        }
    }

    public init(
        id: String, url: String, events: Set<WebhookEventType>, apps: Set<String>, secrets: [KeptSecret], createdAt: Int64,
        createdBy: String
    ) {
        self.id = id
        self.url = url
        self.events = events
        self.apps = apps
        self.secrets = secrets
        self.createdAt = createdAt
        self.createdBy = createdBy
    }

    /// A new subscription id.
    public static func newID() -> String {
        var generator = SystemRandomNumberGenerator()
        return "wh_"
            + (0..<8).map { _ in UInt8.random(in: .min ... .max, using: &generator) }.map { byte in
                let digits = Array("0123456789abcdef")
                return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
            }.joined()
    }

    /// Whether an event of `type` about `apps` goes to this subscription: one of the types it
    /// asked for, and (when it names apps) about one of them.
    public func receives(_ type: WebhookEventType, apps eventApps: [String]) -> Bool {
        events.contains(type) && (apps.isEmpty || eventApps.contains(where: apps.contains))
    }

    /// The secrets that sign at `now`: the current one, then those rotated out less than their
    /// overlap ago.
    public func signingSecrets(now: Int64) -> [WebhookSecret] {
        secrets.filter { $0.until.map { now < $0 } ?? true }.map(\.secret)
    }

    /// The text a store keeps.
    public var storedText: String {
        JSONValue.object([
            "id": .string(id), "url": .string(url), "events": .array(events.map(\.rawValue).sorted().map(JSONValue.string)),
            "apps": .array(apps.sorted().map(JSONValue.string)),
            "secrets": .array(
                secrets.map { kept in
                    .object(["secret": .string(kept.secret.text), "until": kept.until.map { .number(.integer($0)) } ?? .null])
                }),
            "createdAt": .number(.integer(createdAt)), "createdBy": .string(createdBy),
        ]).serialized()
    }

    /// Reads what ``storedText`` wrote.
    public init(storedText: String) throws {
        guard case .object(let object)? = try? JSONParser.parse(Array(storedText.utf8)), case .string(let id)? = object["id"],
            case .string(let url)? = object["url"], case .array(let events)? = object["events"], case .array(let apps)? = object["apps"],
            case .array(let secrets)? = object["secrets"], case .number(let created)? = object["createdAt"],
            let createdAt = created.int64Value, case .string(let createdBy)? = object["createdBy"]
        else { throw StoreCorruption(what: "a stored webhook subscription") }
        var types: Set<WebhookEventType> = []
        for case .string(let name) in events {
            guard let type = WebhookEventType(rawValue: name) else { throw StoreCorruption(what: "a stored webhook's event type") }
            types.insert(type)
        }
        var kept: [KeptSecret] = []
        for case .object(let entry) in secrets {
            guard case .string(let text)? = entry["secret"], let secret = WebhookSecret(text) else {
                throw StoreCorruption(what: "a stored webhook's secret")
            }
            let until: Int64? = if case .number(let number)? = entry["until"] { number.int64Value } else { nil }
            kept.append(KeptSecret(secret: secret, until: until))
        }
        self.init(
            id: id, url: url, events: types, apps: Set(apps.compactMap { if case .string(let app) = $0 { app } else { nil } }),
            secrets: kept, createdAt: createdAt, createdBy: createdBy)
    }
}

/// One message of the outbox: written in the transaction of the change it tells of, then sent
/// (and tried again) by whichever server instance claims it first.
public struct OutboxEntry: Sendable, Hashable {
    /// Where an entry is.
    public enum State: String, Sendable, CaseIterable, Hashable {
        /// Waiting for its (next) attempt at ``OutboxEntry/nextAt``.
        case pending
        /// A receiver answered 2xx.
        case delivered
        /// Tried for the whole window without a 2xx: kept until an admin redelivers or removes it.
        case dead
    }

    /// 1, 2, 3, … in the order of the changes; the message id is `msg_<sequence>`.
    public let sequence: Int64
    public let subscription: String
    public var state: State
    /// When it may be tried (pending); when it was last tried (delivered, dead).
    public var nextAt: Int64
    /// While an instance is sending it, the end of that instance's claim: no other takes it
    /// before (a claim outlives an instance killed while sending, so the message goes again).
    public var claimedUntil: Int64?
    public var message: WebhookMessage
    public var attempts: Int
    public var firstAttemptAt: Int64?
    /// What the last attempt got: `HTTP 500`, `timed out after 10 s`, a refused address.
    public var lastResult: String?
    public var lastAttemptAt: Int64?

    public init(
        sequence: Int64, subscription: String, state: State = .pending, nextAt: Int64, claimedUntil: Int64? = nil,
        message: WebhookMessage, attempts: Int = 0, firstAttemptAt: Int64? = nil, lastResult: String? = nil, lastAttemptAt: Int64? = nil
    ) {
        self.sequence = sequence
        self.subscription = subscription
        self.state = state
        self.nextAt = nextAt
        self.claimedUntil = claimedUntil
        self.message = message
        self.attempts = attempts
        self.firstAttemptAt = firstAttemptAt
        self.lastResult = lastResult
        self.lastAttemptAt = lastAttemptAt
    }

    /// The message id of entry `sequence`.
    public static func messageID(_ sequence: Int64) -> String { "msg_\(sequence)" }

    /// The entry after an attempt that ended at `now` with `outcome`: delivered, pending for
    /// its next try on `schedule`, or dead. The claim ends.
    ///
    /// - Parameter fraction: where in the schedule's jitter the wait falls (random, 0 to 1).
    public func after(_ outcome: DeliveryOutcome, now: Int64, fraction: Double, schedule: DeliverySchedule = .standard) -> OutboxEntry {
        var next = self
        next.attempts += 1
        next.firstAttemptAt = firstAttemptAt ?? now
        next.lastAttemptAt = now
        next.claimedUntil = nil
        next.lastResult = outcome.text
        if case .delivered = outcome {
            next.state = .delivered
            next.nextAt = now
        } else if let at = schedule.nextAttempt(
            afterFailedAttempts: next.attempts, firstAttemptAt: next.firstAttemptAt!, now: now, fraction: fraction)
        {
            next.state = .pending
            next.nextAt = at
        } else {
            next.state = .dead
            next.nextAt = now
        }
        return next
    }

    /// The entry sent again from now on, as a new message would be: an admin's redelivery. A
    /// claim that has not run out stays (the instance sending it now finishes that attempt, and
    /// no other sends it meanwhile).
    public func redelivered(now: Int64) -> OutboxEntry {
        var next = self
        next.state = .pending
        next.nextAt = now
        next.claimedUntil = claimedUntil.flatMap { $0 > now ? $0 : nil }
        next.attempts = 0
        next.firstAttemptAt = nil
        return next
    }

    /// The document a store keeps beside the columns it looks entries up by.
    public var document: String {
        JSONValue.object([
            "id": .string(message.id), "type": .string(message.type), "occurredAt": .number(.integer(message.occurredAt)),
            "data": message.data, "attempts": .number(.integer(Int64(attempts))),
            "firstAttemptAt": firstAttemptAt.map { .number(.integer($0)) } ?? .null,
            "lastAttemptAt": lastAttemptAt.map { .number(.integer($0)) } ?? .null,
            "lastResult": lastResult.map(JSONValue.string) ?? .null,
        ]).serialized()
    }

    /// Reads an entry from its columns and ``document``.
    public init(sequence: Int64, subscription: String, state: String, nextAt: Int64, claimedUntil: Int64?, document: String) throws {
        guard let state = State(rawValue: state), case .object(let object)? = try? JSONParser.parse(Array(document.utf8)),
            case .string(let id)? = object["id"], case .string(let type)? = object["type"],
            case .number(let occurred)? = object["occurredAt"], let occurredAt = occurred.int64Value, let data = object["data"],
            case .number(let attempts)? = object["attempts"], let attemptCount = attempts.int64Value
        else { throw StoreCorruption(what: "a stored webhook message") }
        func integer(_ key: String) -> Int64? { if case .number(let number)? = object[key] { number.int64Value } else { nil } }
        let lastResult: String? = if case .string(let text)? = object["lastResult"] { text } else { nil }
        self.init(
            sequence: sequence, subscription: subscription, state: state, nextAt: nextAt, claimedUntil: claimedUntil,
            message: WebhookMessage(id: id, type: type, occurredAt: occurredAt, data: data), attempts: Int(attemptCount),
            firstAttemptAt: integer("firstAttemptAt"), lastResult: lastResult, lastAttemptAt: integer("lastAttemptAt"))
    }
}

/// How an attempt to send a message ended.
public enum DeliveryOutcome: Sendable, Hashable {
    /// The receiver answered 2xx.
    case delivered(status: Int)
    /// It answered something else (redirects are not followed).
    case refused(status: Int)
    /// No answer: the connection failed or timed out, or the address was not allowed.
    case failed(String)

    /// What `fleetset admin webhooks show` says of it.
    public var text: String {
        switch self {
        case .delivered(let status), .refused(let status): "HTTP \(status)"
        case .failed(let reason): reason
        }
    }
}
