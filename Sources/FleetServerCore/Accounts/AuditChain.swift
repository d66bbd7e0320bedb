import Crypto
import FleetProtocol

/// The audit trail's hash chain: each entry's hash is SHA-256 of the hash before it, a newline
/// and the entry's stored text, so that changing, removing or reordering one entry breaks
/// every hash from there on. ``verify(_:from:)`` walks stored records and names the first that
/// does not fit.
///
/// A chain proves order and integrity against a later edit of some rows; someone who can
/// rewrite the table can also rewrite every hash after the row they changed. The server's log
/// has each entry's hash (`event=audit … hash=…`), so a chain that verifies but does not end
/// at the hash the log last printed was rewritten or cut short (`audit verify --head`).
public enum AuditChain {
    /// What the first entry's ``AuditEntry/previousHash`` is: 64 zeros.
    public static let origin = String(repeating: "0", count: 64)

    /// SHA-256 of `previous`, a newline and `text`, in hex.
    public static func hash(previous: String, text: String) -> String {
        Credentials.hex(Array(SHA256.hash(data: Array((previous + "\n" + text).utf8))))
    }

    /// Where a chain stops holding.
    public struct Break: Error, Sendable, Hashable, CustomStringConvertible {
        /// The number of the first entry that does not fit (for a removed entry: the number missing).
        public var sequence: Int64
        /// What is wrong with it.
        public var reason: String

        public init(sequence: Int64, reason: String) {
            self.sequence = sequence
            self.reason = reason
        }

        public var description: String { "audit entry \(sequence): \(reason)" }
    }

    /// The walk so far: the entries checked and the last one's hash.
    public struct Position: Sendable, Hashable {
        public var sequence: Int64
        public var hash: String

        public init(sequence: Int64, hash: String) {
            self.sequence = sequence
            self.hash = hash
        }

        /// Before the first entry.
        public static let start = Position(sequence: 0, hash: AuditChain.origin)
    }

    /// Checks `records` (in the order the store lists them, by sequence) as the entries that
    /// follow `position`, and returns the position after them.
    ///
    /// - Throws: ``Break`` at the first entry that was changed (its text or its indexed columns
    ///   no longer match its hash), removed (a number is missing) or reordered (it does not
    ///   follow the entry before it).
    public static func verify(_ records: [AuditRecord], from position: Position) throws(Break) -> Position {
        var position = position
        for record in records {
            let expected = position.sequence + 1
            guard record.sequence >= expected else {
                throw Break(sequence: record.sequence, reason: "is out of order (after entry \(position.sequence))")
            }
            guard record.sequence == expected else {
                throw Break(
                    sequence: expected,
                    reason: expected == record.sequence - 1
                        ? "was removed" : "was removed, and the entries up to \(record.sequence - 1) with it")
            }
            guard hashesItself(record) else {
                throw Break(sequence: record.sequence, reason: "was changed: its text no longer matches its hash")
            }
            guard let entry = try? record.entry(), entry.sequence == record.sequence, entry.at == record.at,
                entry.actor == record.actor, entry.action == record.action
            else {
                throw Break(sequence: record.sequence, reason: "was changed: its columns differ from the text its hash covers")
            }
            guard entry.previousHash == position.hash else {
                // Entry N+1 names another hash than entry N has: N was rewritten with a hash of
                // its own making (or entries were moved).
                guard position.sequence > 0 else {
                    throw Break(sequence: record.sequence, reason: "was changed: the first entry must follow no other")
                }
                throw Break(
                    sequence: position.sequence,
                    reason: "was changed and its hash recomputed: entry \(record.sequence) was chained to another hash")
            }
            position = Position(sequence: record.sequence, hash: record.hash)
        }
        return position
    }

    /// Whether the record's hash is that of its own text after the previous hash its text names.
    private static func hashesItself(_ record: AuditRecord) -> Bool {
        guard let entry = try? record.entry() else { return false }
        return hash(previous: entry.previousHash, text: record.text) == record.hash
    }
}
