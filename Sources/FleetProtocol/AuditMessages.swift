import FleetJSON

/// One entry of the audit trail (`GET /v1/admin/audit`): who did what, with which credential,
/// from where, when, and how it ended. Entries are numbered from 1 without gaps and
/// hash-chained: ``hash`` covers the entry and, through ``previousHash``, every entry before it.
public struct AuditEntry: Sendable, Hashable {
    /// 1, 2, 3, … in the order they were written.
    public var sequence: Int64
    /// When, in seconds since the epoch.
    public var at: Int64
    /// The account's name; `-` when the caller is not known (a token the server did not issue).
    public var actor: String
    /// Which credential: `token at-…`, `admin token file`, `session cs-…`, `password`; `-` for none.
    public var credential: String
    /// The client's address (behind a trusted proxy, the one the proxy names).
    public var address: String
    /// What was done: the admin API operation (`patchValues`, `createAccount`) or the console's
    /// action (`console.sign-in`, `console.saveSettings`).
    public var action: String
    /// What it was done to: `app=kiosk scope=device:d-1`, `account=alice`, `device=d-1`.
    public var target: String
    /// The answer's HTTP status.
    public var status: Int
    /// `ok`, or the refusal's error code (`needs-write-values`, `unauthenticated`).
    public var outcome: String
    /// The reason given with the change, or the refusal's message.
    public var detail: String
    /// The hash of the entry before (64 zeros for the first).
    public var previousHash: String
    /// SHA-256 of ``previousHash``, a newline and the entry's stored text.
    public var hash: String

    public init(
        sequence: Int64, at: Int64, actor: String, credential: String, address: String, action: String, target: String, status: Int,
        outcome: String, detail: String, previousHash: String, hash: String
    ) {
        self.sequence = sequence
        self.at = at
        self.actor = actor
        self.credential = credential
        self.address = address
        self.action = action
        self.target = target
        self.status = status
        self.outcome = outcome
        self.detail = detail
        self.previousHash = previousHash
        self.hash = hash
    }

    static let members: Set<String> = [
        "sequence", "at", "actor", "credential", "address", "action", "target", "status", "outcome", "detail", "previousHash", "hash",
    ]

    /// Reads the wire form at `location`; unknown members are refused. Without `hash` (the
    /// stored text, which the hash covers) ``hash`` is empty.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: Self.members)
        sequence = try reader.count("sequence")
        at = try reader.timestamp("at")
        actor = try reader.string("actor", maximumLength: 64)
        credential = try reader.string("credential", maximumLength: 128)
        address = try reader.string("address", maximumLength: 64)
        action = try reader.string("action", maximumLength: 128)
        target = try reader.string("target", maximumLength: 1024)
        status = Int(try reader.integer("status", in: 100...599, default: 0))
        outcome = try reader.string("outcome", maximumLength: 64)
        detail = try reader.string("detail", maximumLength: 2048)
        previousHash = try reader.string("previousHash", maximumLength: 64)
        hash = try reader.optionalString("hash", maximumLength: 64) ?? ""
    }

    /// The wire form; without ``hash`` when it is empty (the stored text).
    public var json: JSONValue {
        var object: JSONObject = [
            "sequence": .number(.integer(sequence)), "at": .string(Timestamp.format(at)), "actor": .string(actor),
            "credential": .string(credential), "address": .string(address), "action": .string(action), "target": .string(target),
            "status": .number(.integer(Int64(status))), "outcome": .string(outcome), "detail": .string(detail),
            "previousHash": .string(previousHash),
        ]
        if !hash.isEmpty { object["hash"] = .string(hash) }
        return .object(object)
    }
}

/// `GET /v1/admin/audit`: entries oldest first.
public struct AuditPage: Sendable, Hashable {
    public var entries: [AuditEntry]

    public init(entries: [AuditEntry]) { self.entries = entries }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["entries"])
        entries = try reader.array("entries") { element, location throws(DocumentError) in try AuditEntry(json: element, at: location) }
    }

    public var json: JSONValue { ["entries": .array(entries.map(\.json))] }
}
