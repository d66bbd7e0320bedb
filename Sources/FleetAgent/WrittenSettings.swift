import Crypto
import FleetIO
import PosixThreads

/// The agent's record of what it wrote to an app's `settings.json` last: the SHA-256 of the
/// bytes, in memory, and in `settings.sha256` beside it so that a restart knows its own file
/// from a hand edit.
///
/// Before each write (``willWrite(_:)``) the record holds, durably, both the bytes on their way
/// and those there now: a stop between the record and the file leaves one of them in
/// `settings.json`, and either is the agent's own. After it (``wrote(_:)``) only the new bytes
/// are, in memory. Whatever the agent writes itself (a revision, a rollback, a restore) goes
/// through it, so its own writes are never taken for an edit.
final class WrittenSettings: Sendable {
    let settingsPath: String
    let recordPath: String
    /// The digests (hex) of the bytes the agent may have left in `settings.json`.
    private let digests = Locked<[String]>([])

    init(settingsPath: String, recordPath: String) {
        self.settingsPath = settingsPath
        self.recordPath = recordPath
    }

    /// Reads the record at start and returns whether `settings.json` is not one the agent wrote
    /// (it was edited while the agent was stopped). Without a record (a first start, an agent
    /// from before it), the file as found is taken as the agent's own and recorded.
    func load() throws(FileError) -> Bool {
        let current = try FileSystem.readFileIfPresent(settingsPath).map(Self.digest)
        let recorded = try FileSystem.readFileIfPresent(recordPath).map { bytes in
            String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
        }
        guard let recorded, !recorded.isEmpty else {
            guard let current else { return false }
            digests.withLock { $0 = [current] }
            try save([current])
            return false
        }
        guard let current else {
            digests.withLock { $0 = [] }
            return false
        }
        if recorded.contains(current) {
            digests.withLock { $0 = [current] }
            return false
        }
        digests.withLock { $0 = recorded }
        return true
    }

    /// Records `bytes` (and what is there now) before they replace `settings.json`.
    func willWrite(_ bytes: [UInt8]) throws(FileError) {
        var both = [Self.digest(bytes)]
        if let current = try FileSystem.readFileIfPresent(settingsPath).map(Self.digest), current != both[0] { both.append(current) }
        try save(both)
        digests.withLock { $0 += both }
    }

    /// `bytes` are in `settings.json` now: only they are the agent's own.
    func wrote(_ bytes: [UInt8]) {
        let digest = Self.digest(bytes)
        digests.withLock { $0 = [digest] }
    }

    /// Whether `settings.json` holds something the agent did not write (missing included, once
    /// it wrote one).
    func isEdited() throws(FileError) -> Bool {
        let known = digests.withLock { $0 }
        guard let bytes = try FileSystem.readFileIfPresent(settingsPath) else { return !known.isEmpty }
        return !known.contains(Self.digest(bytes))
    }

    private func save(_ digests: [String]) throws(FileError) {
        try FileSystem.writeAtomically(Array((digests.joined(separator: "\n") + "\n").utf8), to: recordPath, mode: 0o600)
    }

    static func digest(_ bytes: [UInt8]) -> String { SHA256.hash(data: bytes).lowercaseHex }
}

extension Sequence<UInt8> {
    /// The bytes as lowercase hexadecimal, two digits each.
    var lowercaseHex: String {
        map { byte in
            let digits = String(byte, radix: 16)
            return digits.count == 1 ? "0" + digits : digits
        }.joined()
    }
}
