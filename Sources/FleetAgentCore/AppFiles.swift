import FleetDeviceState
import FleetJSON

/// Why one of an app's files could not be read or written: what the operating system said,
/// with the file's path (`/var/lib/fleetset/apps/kiosk/settings.json: No space left on device`).
public struct DiskFailure: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// An app's files as the sync machine uses them: the settings apps read, the update lock, and
/// the agent's own records (`changes.json`, `reports.json`, `status.json`), and the inbox's
/// request files.
///
/// Every step is local and short (a write with fsync and rename, a `flock` tried without
/// waiting), and nothing else can happen while it runs: the machine calls it in the middle of
/// an event and goes on with its answer, rather than ask for it with an action, wait in a state
/// of its own, and take its result as another event. The machine stays a value: these files
/// are injected (the agent's are real, in FleetAgent; ``MemoryAppFiles`` holds them in memory
/// for the machine's tests and the fleet simulator), and it reads no clock and does no I/O itself.
public protocol AppFiles {
    /// Writes the metadata (when given) and then the settings, each keeping its previous generation.
    mutating func persist(_ settings: DeviceSettings, metadata: [UInt8]?) throws(DiskFailure)
    /// Puts `settings.previous.json` back as `settings.json`.
    mutating func restorePrevious() throws(DiskFailure)
    /// Writes the served revision as `settings.json` again over an edit, keeping
    /// `settings.previous.json` as it is.
    mutating func rewriteSettings(_ settings: DeviceSettings) throws(DiskFailure)
    /// Whether `settings.json` holds something the agent did not write (its own writes are never an edit).
    mutating func settingsFileIsEdited() throws(DiskFailure) -> Bool
    /// Tries to take the app's update lock (`updates.lock`, `flock` exclusive, without waiting):
    /// `false` when the app holds it (it is busy).
    mutating func takeUpdateLock() throws(DiskFailure) -> Bool
    /// Lets go of the app's update lock.
    mutating func releaseUpdateLock()
    /// Reads `changes.json` again.
    mutating func loadJournal() throws(DiskFailure) -> ChangeJournal
    /// Saves `changes.json` durably.
    mutating func saveJournal(_ journal: ChangeJournal) throws(DiskFailure)
    /// Saves `reports.json` durably (removes it when empty).
    mutating func saveReports(_ reports: PendingReports) throws(DiskFailure)
    /// Writes `status.json`.
    mutating func writeStatus(_ status: AppStatus) throws(DiskFailure)
    /// Merges these facts (a `null` removes one) into the app's own device facts (`facts.json`),
    /// and has the changed ones reported; facts past the cap are refused whole (the app's
    /// earlier facts stay).
    mutating func saveAppFacts(_ facts: JSONObject) throws(DiskFailure)
    /// Removes a request file whose effect is on disk (one gone already is no failure).
    mutating func removeRequest(at path: String) throws(DiskFailure)
    /// Moves a request file to `refused/` with the reason.
    mutating func moveRequestAside(at path: String, reason: String) throws(DiskFailure)
}

/// One step on an app's files, as ``MemoryAppFiles`` records it.
public enum AppFileOperation: Sendable, Equatable {
    case persist(DeviceSettings, metadata: [UInt8]?)
    case restorePrevious
    case rewriteSettings(DeviceSettings)
    case checkSettingsFile
    case takeUpdateLock
    case releaseUpdateLock
    case loadJournal
    case saveJournal(ChangeJournal)
    case saveReports(PendingReports)
    case writeStatus(AppStatus)
    case saveAppFacts(JSONObject)
    case removeRequest(path: String)
    case moveRequestAside(path: String, reason: String)

    /// The operations that can be made to fail (``MemoryAppFiles/failing``).
    public enum Kind: Sendable, Hashable {
        case persist, restorePrevious, rewriteSettings, checkSettingsFile, takeUpdateLock, loadJournal, saveJournal, saveReports
        case writeStatus, saveAppFacts, removeRequest, moveRequestAside
    }
}

/// An app's files in memory: what the fleet simulator's devices hold, and what the machine's
/// tests look at. Any operation can be made to fail (``failing``), and each one is recorded
/// when asked (``operations``).
public struct MemoryAppFiles: AppFiles, Sendable {
    /// `settings.json` and `settings.previous.json`.
    public private(set) var settings: DeviceSettings?
    public private(set) var previousSettings: DeviceSettings?
    /// `settings.json` holds a hand edit; the agent's own writes of the file end it.
    public var settingsEdited = false
    /// The app holds its update lock: the agent's attempts to take it fail.
    public var appHoldsUpdateLock = false
    /// The agent holds the update lock.
    public private(set) var agentHoldsUpdateLock = false
    /// `changes.json` as ``loadJournal()`` reads it: `nil` when it cannot be read.
    public var journal: ChangeJournal? = ChangeJournal()
    public private(set) var reports = PendingReports()
    public private(set) var status: AppStatus?
    /// The app's own facts (`facts.json`).
    public private(set) var appFacts = JSONObject()
    /// Operations to fail, with what the failure says.
    public var failing: [AppFileOperation.Kind: String] = [:]
    /// Every operation so far, in order, when recording (`nil`: not recorded, as in a fleet of
    /// thousands of simulated devices that runs for hours).
    public var operations: [AppFileOperation]?

    public init(settings: DeviceSettings? = nil, previousSettings: DeviceSettings? = nil, recording: Bool = false) {
        self.settings = settings
        self.previousSettings = previousSettings
        operations = recording ? [] : nil
    }

    private mutating func perform(_ operation: AppFileOperation, _ kind: AppFileOperation.Kind) throws(DiskFailure) {
        operations?.append(operation)
        if let failure = failing[kind] { throw DiskFailure(failure) }
    }

    public mutating func persist(_ settings: DeviceSettings, metadata: [UInt8]?) throws(DiskFailure) {
        try perform(.persist(settings, metadata: metadata), .persist)
        if let current = self.settings, current.revision != settings.revision { previousSettings = current }
        self.settings = settings
        settingsEdited = false
    }

    public mutating func restorePrevious() throws(DiskFailure) {
        try perform(.restorePrevious, .restorePrevious)
        if let previousSettings { settings = previousSettings }
        settingsEdited = false
    }

    public mutating func rewriteSettings(_ settings: DeviceSettings) throws(DiskFailure) {
        try perform(.rewriteSettings(settings), .rewriteSettings)
        self.settings = settings
        settingsEdited = false
    }

    public mutating func settingsFileIsEdited() throws(DiskFailure) -> Bool {
        try perform(.checkSettingsFile, .checkSettingsFile)
        return settingsEdited
    }

    public mutating func takeUpdateLock() throws(DiskFailure) -> Bool {
        try perform(.takeUpdateLock, .takeUpdateLock)
        agentHoldsUpdateLock = !appHoldsUpdateLock
        return agentHoldsUpdateLock
    }

    public mutating func releaseUpdateLock() {
        operations?.append(.releaseUpdateLock)
        agentHoldsUpdateLock = false
    }

    public mutating func loadJournal() throws(DiskFailure) -> ChangeJournal {
        try perform(.loadJournal, .loadJournal)
        guard let journal else { throw DiskFailure("changes.json: not JSON") }
        return journal
    }

    public mutating func saveJournal(_ journal: ChangeJournal) throws(DiskFailure) {
        try perform(.saveJournal(journal), .saveJournal)
        self.journal = journal
    }

    public mutating func saveReports(_ reports: PendingReports) throws(DiskFailure) {
        try perform(.saveReports(reports), .saveReports)
        self.reports = reports
    }

    public mutating func writeStatus(_ status: AppStatus) throws(DiskFailure) {
        try perform(.writeStatus(status), .writeStatus)
        self.status = status
    }

    public mutating func saveAppFacts(_ facts: JSONObject) throws(DiskFailure) {
        try perform(.saveAppFacts(facts), .saveAppFacts)
        for (key, value) in facts {
            appFacts[key] = value == .null ? nil : value
        }
    }

    public mutating func removeRequest(at path: String) throws(DiskFailure) {
        try perform(.removeRequest(path: path), .removeRequest)
    }

    public mutating func moveRequestAside(at path: String, reason: String) throws(DiskFailure) {
        try perform(.moveRequestAside(path: path, reason: reason), .moveRequestAside)
    }
}
