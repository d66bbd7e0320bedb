/// A value the agent keeps in memory and in a file of its own (`changes.json`, `reports.json`,
/// `status.json`): what it is now, what the file holds, which change of it is on disk, whether
/// a save is wanted, and why the last one failed.
///
/// One rule for every such file: a save is asked for (``wantSave()``), done at the end of the
/// event (``save(_:)``), and when it fails it is tried again once the value changes or at the
/// next turn (``retryAfterFailure()``: each answered settings request), never only because
/// something waits for it: a full disk must not make the loop spin.
struct DurableRecord<Value: Equatable> {
    /// The value in memory; every change is numbered (``version``).
    var value: Value { didSet { version += 1 } }
    /// What the file holds, as far as the agent knows (`nil`: unknown, or no file).
    private(set) var onDisk: Value?
    /// Bumped by every change of ``value``; ``savedVersion`` is the newest one on disk.
    private(set) var version = 0
    private(set) var savedVersion = 0
    /// A save is wanted at the end of this event.
    private(set) var saveWanted = false
    /// Why the last save failed, and the version it tried to save.
    private(set) var failure: (error: DiskFailure, version: Int)?

    /// `value` as read from its file at start (`onDisk: nil` when the file did not hold it).
    init(_ value: Value, onDisk: Value?) {
        self.value = value
        self.onDisk = onDisk
    }

    /// The file holds the value in memory.
    var isSaved: Bool { value == onDisk }

    /// Takes `value` as read from the file again: memory and disk agree.
    mutating func reload(_ value: Value) {
        self.value = value
        onDisk = value
        version += 1
        savedVersion = version
        failure = nil
    }

    /// Asks for a save at the end of the event; after a failure, only once the value changed.
    mutating func wantSave() {
        if let failure, failure.version == version { return }
        saveWanted = true
    }

    /// A new turn: a save that failed is tried again when the file still differs.
    mutating func retryAfterFailure() {
        guard failure != nil else { return }
        failure = nil
        if !isSaved { saveWanted = true }
    }

    /// Whether the change numbered `version` is on disk.
    func isOnDisk(_ version: Int) -> Bool { savedVersion >= version }

    /// Saves the value with `write` when a save is wanted and the file differs. Returns the
    /// failure, if the save failed.
    mutating func save(_ write: (Value) throws(DiskFailure) -> Void) -> DiskFailure? {
        guard saveWanted else { return nil }
        saveWanted = false
        if isSaved {
            savedVersion = version
            return nil
        }
        do {
            try write(value)
        } catch {
            failure = (error, version)
            return error
        }
        onDisk = value
        savedVersion = version
        failure = nil
        return nil
    }
}
