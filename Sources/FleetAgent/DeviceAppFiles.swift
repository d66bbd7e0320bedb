import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol

#if canImport(Glibc)
import Glibc
#endif

/// An app's files on the device, as its ``SyncMachine`` uses them: each step a real file
/// (written with fsync and rename, its previous generation kept), the update lock a real
/// `flock`, every failure handed to the machine as a ``DiskFailure`` with the path.
struct DeviceAppFiles: AppFiles {
    let app: AppConfiguration
    let layout: DeviceLayout
    /// The app's update lock, held from the machine's taking it to its letting go (and let go
    /// when the loop ends).
    let updateLock: UpdateLock
    /// What the agent wrote to `settings.json` last: anything else there is a hand edit.
    let written: WrittenSettings
    /// Seconds since the epoch, for the reason file of a request moved aside.
    let wallClock: @Sendable () -> Int64
    /// Tells the device-wide work that the app's facts changed.
    let factsChanged: @Sendable () -> Void

    private var settingsFile: GenerationFile { layout.settingsFile(app.id) }

    mutating func persist(_ settings: DeviceSettings, metadata: [UInt8]?) throws(DiskFailure) {
        try disk { () throws(FileError) in
            // The metadata first: at every instant one of its generations matches the settings.
            if let metadata { try layout.metadataFile(app.id).write(metadata, mode: 0o640, group: app.readersGroup) }
            try writeSettings(settings.fileBytes) { () throws(FileError) in
                try settingsFile.write(settings.fileBytes, mode: 0o640, group: app.readersGroup)
            }
        }
    }

    mutating func restorePrevious() throws(DiskFailure) {
        try disk { () throws(FileError) in
            let bytes = try settingsFile.readPrevious() ?? []
            try writeSettings(bytes) { () throws(FileError) in try settingsFile.restorePrevious(mode: 0o640, group: app.readersGroup) }
        }
    }

    mutating func rewriteSettings(_ settings: DeviceSettings) throws(DiskFailure) {
        try disk { () throws(FileError) in
            try writeSettings(settings.fileBytes) { () throws(FileError) in
                try FileSystem.writeAtomically(settings.fileBytes, to: settingsFile.path, mode: 0o640, group: app.readersGroup)
            }
        }
    }

    mutating func settingsFileIsEdited() throws(DiskFailure) -> Bool {
        do {
            return try written.isEdited()
        } catch {
            throw DiskFailure("\(error)")
        }
    }

    mutating func takeUpdateLock() throws(DiskFailure) -> Bool {
        do {
            return try updateLock.tryExclusive()
        } catch {
            throw DiskFailure("\(error)")
        }
    }

    mutating func releaseUpdateLock() { updateLock.release() }

    mutating func loadJournal() throws(DiskFailure) -> ChangeJournal {
        let file = layout.changesFile(app.id)
        do {
            return try ChangeJournal.load(file)
        } catch {
            throw DiskFailure("\(file): \(error)")
        }
    }

    mutating func saveJournal(_ journal: ChangeJournal) throws(DiskFailure) {
        try disk { () throws(FileError) in try journal.save(to: layout.changesFile(app.id), group: app.readersGroup) }
    }

    mutating func saveReports(_ reports: PendingReports) throws(DiskFailure) {
        try disk { () throws(FileError) in try reports.save(to: layout.reportsFile(app.id)) }
    }

    mutating func writeStatus(_ status: AppStatus) throws(DiskFailure) {
        try disk { () throws(FileError) in try status.write(to: layout.statusFile(app.id), group: app.readersGroup) }
    }

    mutating func saveAppFacts(_ patch: JSONObject) throws(DiskFailure) {
        let path = layout.appFactsFile(app.id)
        let merged = DeviceFacts.appFacts(path).map { JSONValue.object($0) } ?? [:]
        guard case .object(let facts) = merged.applyingMergePatch(.object(patch)) else { return }
        guard facts.count <= DeviceInfo.maximumAppFacts else {
            throw DiskFailure(
                "\(path): refused \(patch.keys.sorted().joined(separator: ",")): more than \(DeviceInfo.maximumAppFacts) facts; the app's earlier facts stay"
            )
        }
        try disk { () throws(FileError) in
            try FileSystem.writeAtomically(
                Array((JSONValue.object(facts).serialized(.pretty) + "\n").utf8), to: path, mode: 0o640, group: app.readersGroup,
                durable: true)
        }
        factsChanged()
    }

    mutating func removeRequest(at path: String) throws(DiskFailure) {
        do {
            try FileSystem.removeFile(path)
        } catch  where error.code == ENOENT {
            // Taken twice (a rescan found it again before it went): gone already.
        } catch {
            throw DiskFailure("\(error)")
        }
    }

    mutating func moveRequestAside(at path: String, reason: String) throws(DiskFailure) {
        do {
            try InboxFolder.moveAside(path, reason: reason, now: wallClock())
        } catch {
            throw DiskFailure("\(error)")
        }
    }

    /// Writes `settings.json` with `write`, recording `bytes` as the agent's own first.
    private func writeSettings(_ bytes: [UInt8], _ write: () throws(FileError) -> Void) throws(FileError) {
        try written.willWrite(bytes)
        try write()
        written.wrote(bytes)
    }

    private func disk(_ work: () throws(FileError) -> Void) throws(DiskFailure) {
        do {
            try work()
        } catch {
            throw DiskFailure("\(error)")
        }
    }
}
