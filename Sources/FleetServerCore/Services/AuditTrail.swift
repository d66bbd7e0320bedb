import FleetProtocol
import Logging

extension AuditTrail {
    /// Appends `draft`, numbered and chained after the newest entry (one append at a time,
    /// across instances on one database), and logs it as one `event=audit` line with its hash,
    /// whatever the logger's level.
    @discardableResult
    public func record(_ draft: AuditDraft) async throws -> AuditRecord {
        let time = now
        let record = try await writes.run { try await store.appendAudit(draft, at: time) }
        // Whatever --log-level says: the log's hashes are what `audit verify --head` checks against.
        var logger = logger
        if logger.logLevel > .notice { logger.logLevel = .notice }
        logger.notice(
            "audit",
            metadata: [
                "event": "audit", "seq": "\(record.sequence)", "actor": "\(draft.actor)", "credential": "\(draft.credential)",
                "address": "\(draft.address)", "action": "\(draft.action)", "target": "\(draft.target)", "status": "\(draft.status)",
                "outcome": "\(draft.outcome)", "hash": "\(record.hash)",
            ])
        return record
    }

    /// Appends `draft` after an action that happened (or was refused) already: a trail that
    /// cannot be written is the log's to say, loudly (`event=audit-failed`), not the caller's.
    public func recordAfterTheFact(_ draft: AuditDraft) async {
        do {
            try await record(draft)
        } catch {
            logger.error("audit entry not written", metadata: ["event": "audit-failed", "action": "\(draft.action)", "error": "\(error)"])
        }
    }

    /// The entries `query` asks for, oldest first (at most 1,000).
    public func entries(_ query: AuditQuery) async throws -> AuditPage {
        var query = query
        query.limit = min(max(query.limit, 1), 1000)
        return AuditPage(entries: try await store.auditRecords(query).map { try $0.entry() })
    }

    /// Walks the whole chain from its first entry.
    ///
    /// - Returns: the position after the last entry (how many, and the newest hash).
    /// - Throws: ``AuditChain/Break`` naming the first entry that was changed, removed or reordered.
    public func verify() async throws -> AuditChain.Position {
        try await Self.verify(store)
    }

    /// Walks the chain of `store` (`fleetset-server audit verify` opens the database itself).
    public static func verify(_ store: any SettingsStore) async throws -> AuditChain.Position {
        var position = AuditChain.Position.start
        while true {
            let page = try await store.auditRecords(AuditQuery(after: position.sequence, limit: 1000))
            guard !page.isEmpty else { return position }
            position = try AuditChain.verify(page, from: position)
        }
    }
}
