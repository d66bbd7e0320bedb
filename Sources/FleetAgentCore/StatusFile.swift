import FleetDeviceState

extension SyncMachine {
    /// What `status.json` says, and when it is written: when something but the time of the
    /// last sync changed, when that time is more than ``SyncMachine/statusRefreshInterval``
    /// newer than the file's (to spare flash storage on quiet devices), or when forced (an
    /// outcome); an outcome only once its report is safe.
    struct StatusFile {
        var record: DurableRecord<AppStatus>
        /// When the file was written last.
        var writtenAt: Instant?
        /// Something changed that the file may have to say.
        var checkWanted = false
        /// An outcome: written even when nothing else changed.
        var forced = false
        /// An outcome was queued: the file records it once the report is delivered or saved.
        var awaitsReport = false
        /// Why the newest revision was refused (or its hook failed).
        var verdictError: String?
        /// Why the server cannot be reached.
        var transportError: String?

        init(_ status: AppStatus, onDisk: AppStatus?) {
            record = DurableRecord(status, onDisk: onDisk)
        }

        /// The status with what it sums up of the rest (the last error, the queues' lengths),
        /// if it must be written now.
        mutating func due(reports: Int, changes: Int, at now: Instant, refresh: Duration) -> Bool {
            let forced = self.forced
            checkWanted = false
            self.forced = false
            let lastError = transportError ?? verdictError
            if record.value.lastError != lastError { record.value.lastError = lastError }
            if record.value.pendingReports != reports { record.value.pendingReports = reports }
            if record.value.pendingChanges != changes { record.value.pendingChanges = changes }
            var comparable = record.value
            var onDisk = record.onDisk
            comparable.lastSync = nil
            comparable.updatedAt = 0
            onDisk?.lastSync = nil
            onDisk?.updatedAt = 0
            let stale = writtenAt.map { $0.duration(to: now) > refresh } ?? true
            return forced || comparable != onDisk || (stale && record.value.lastSync != record.onDisk?.lastSync)
        }
    }

    /// Writes `status.json` when it is due (see ``StatusFile``).
    mutating func writeStatus(_ now: Moment) {
        guard
            statusFile.due(
                reports: reportQueue.reports.count, changes: journal.queued.count, at: now.instant, refresh: Self.statusRefreshInterval)
        else { return }
        // A new version of the value (its time), so a write that failed before does not hold
        // this one back: an outcome is written whatever happened to the last write.
        statusFile.record.value.updatedAt = now.wall
        statusFile.record.wantSave()
        if let error = statusFile.record.save({ (status) throws(DiskFailure) in try files.writeStatus(status) }) {
            log(.error, "cannot write status.json", event: "disk-error", ["error": error.description])
            return
        }
        statusFile.writtenAt = now.instant
    }
}
