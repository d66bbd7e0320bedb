import FleetMetadata
import PosixThreads

/// Parsed metadata by app, so the hot path (every settings GET) does not parse and compile the
/// schema again. An entry is used only while the stored document is exactly the one it was
/// made from.
final class MetadataCache: Sendable {
    private struct Entry {
        var document: String
        var metadata: Metadata
    }

    private let entries = Locked<[String: Entry]>([:])

    /// The metadata of `stored`, parsed once per document.
    func metadata(of stored: StoredMetadata) throws(MetadataError) -> Metadata {
        if let entry = entries.withLock({ $0[stored.app] }), entry.document == stored.document {
            return entry.metadata
        }
        let metadata = try Metadata(json: Array(stored.document.utf8))
        entries.withLock { $0[stored.app] = Entry(document: stored.document, metadata: metadata) }
        return metadata
    }
}
