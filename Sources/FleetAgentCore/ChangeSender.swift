import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol

/// The device's own changes (`changes.json`) on their way to the server: which one goes next,
/// what a confirmation, a conflict or a refusal does to it, and when each one ends.
///
/// Changes go one at a time, oldest first, each as a `PATCH` of the values that differ from the
/// served revision, based on it (`If-Match`). A confirmed change downloads the settings again
/// and ends `applied` once `settings.json` holds its revision; a 409 downloads again and tries
/// again, up to ``SyncRules/conflictLimit`` times in a row; a final refusal ends it with the
/// server's reason. While `changes.json` cannot be read nothing is sent or saved over it:
/// changes wait in the inbox until it is repaired or removed.
struct ChangeSender {
    var journal: DurableRecord<ChangeJournal>
    /// Why `changes.json` cannot be read.
    var problem: String?
    /// 409 answers in a row.
    var conflicts = 0

    init(loaded: ChangeJournal?, problem: String?) {
        journal = DurableRecord(loaded ?? ChangeJournal(), onDisk: loaded ?? ChangeJournal())
        self.problem = loaded == nil ? (problem ?? "changes.json cannot be read") : nil
    }

    /// A change to send: the values that differ from the served revision, based on it.
    struct Outgoing {
        var change: ChangeJournal.Change
        var patch: JSONObject
        var base: Int64
    }

    /// How a change ended without a request, for the log.
    enum Ended {
        case refused(ChangeJournal.Change, message: String)
        case settled([ChangeJournal.Outcome], revision: Int64)
    }

    /// The oldest change that needs a request. Changes ahead of it that no longer apply to
    /// `served` end refused, and ones whose values are all in place already end applied, with
    /// nothing sent (`ended`). `nil` when none must be sent (or none can be yet).
    mutating func next(served: DeviceSettings?, metadata: Metadata?, base: Int64?, at wall: Int64) -> (Outgoing?, ended: [Ended]) {
        var ended: [Ended] = []
        while let change = journal.value.nextToSend {
            guard problem == nil, let served, let metadata, let base else { break }
            let problems = metadata.problems(ofChange: change.values, to: served.values)
            guard problems.isEmpty else {
                let message = "no longer applies to revision \(served.revision): " + problems.map(\.description).joined(separator: "; ")
                end(change, refusal: message, at: wall)
                ended.append(.refused(change, message: message))
                continue
            }
            var patch = JSONObject()
            for (key, value) in change.values where value == .null || KeyPathValues.value(at: key, in: served.values) != value {
                patch[key] = value
            }
            if patch.isEmpty, base == served.revision {
                modify { $0.confirm(change.id, revision: served.revision) }
                let outcomes = settle(upTo: served.revision, at: wall)
                if !outcomes.isEmpty { ended.append(.settled(outcomes, revision: served.revision)) }
                continue
            }
            return (Outgoing(change: change, patch: patch.isEmpty ? change.values : patch, base: base), ended)
        }
        return (nil, ended)
    }

    /// The server took `change` in `revision`: it ends once `settings.json` holds it.
    mutating func confirmed(_ change: ChangeJournal.Change, revision: Int64) {
        modify { $0.confirm(change.id, revision: revision) }
        conflicts = 0
    }

    /// What to do after a `PATCH` failed.
    enum AfterFailure {
        /// A 409: download the new revision; the change is checked against it and tried again.
        case refetch
        /// Refused for good: the change ended with the server's reason.
        case ended(message: String)
        /// Anything else (or too many conflicts in a row): back off; the change stays queued.
        case backOff
    }

    mutating func failed(_ change: ChangeJournal.Change, _ failure: SyncFailure, at wall: Int64) -> AfterFailure {
        switch failure.kind {
        case .conflict:
            conflicts += 1
            guard conflicts <= SyncRules.conflictLimit else {
                conflicts = 0
                return .backOff
            }
            return .refetch
        case .final:
            end(change, refusal: failure.summary, at: wall)
            return .ended(message: failure.summary)
        case .transient, .authentication, .throttled:
            return .backOff
        }
    }

    /// Ends `change` refused.
    mutating func end(_ change: ChangeJournal.Change, refusal message: String, at wall: Int64) {
        modify { $0.refuse(change.id, message: message, at: wall) }
    }

    /// Ends the changes confirmed in `revision` or earlier, now that `settings.json` holds it
    /// (or refused it, with `refusal`).
    mutating func settle(upTo revision: Int64, refusal: String? = nil, at wall: Int64) -> [ChangeJournal.Outcome] {
        var settled = journal.value
        let outcomes = settled.settle(upTo: revision, refusal: refusal, at: wall)
        guard !outcomes.isEmpty else { return [] }
        modify { $0 = settled }
        return outcomes
    }

    /// Changes `changes.json` in memory; it is saved at the end of the event.
    mutating func modify<Result>(_ change: (inout ChangeJournal) -> Result) -> Result {
        let result = change(&journal.value)
        journal.wantSave()
        return result
    }

    /// `changes.json` as read again (repaired, or removed): changes go on.
    mutating func reloaded(_ loaded: ChangeJournal) {
        problem = nil
        journal.reload(loaded)
    }

    /// Saves `changes.json` when wanted, never over one that could not be read.
    mutating func save(to files: inout some AppFiles) -> DiskFailure? {
        guard problem == nil else { return nil }
        return journal.save { (journal) throws(DiskFailure) in try files.saveJournal(journal) }
    }
}
