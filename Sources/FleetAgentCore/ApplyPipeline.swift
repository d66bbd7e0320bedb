import FleetDeviceState
import FleetMetadata
import FleetProtocol

extension SyncMachine {
    /// A revision checked and waiting to be applied.
    public struct DeferredApply: Sendable where Instant: Sendable {
        /// What it waits for.
        enum Readiness: Sendable {
            /// An apply window, or the app's update lock: looked at again at `checkAt`.
            case waiting(checkAt: Instant)
            /// The update lock is taken: written as soon as no request is in flight.
            case lockHeld
            /// The app held the lock past ``SyncRules/updateLockMaxHold``: written without it,
            /// and its report says why (`reason`).
            case withoutLock(reason: String)

            /// Taken or overridden the lock: nothing but a request in flight keeps it from being written.
            var allowsWrite: Bool {
                if case .waiting = self { false } else { true }
            }
        }

        public var settings: DeviceSettings
        var metadata: Metadata
        var metadataBytes: [UInt8]?
        var readiness: Readiness

        /// Taken or overridden the lock: nothing but a request in flight keeps it from being written.
        var isReadyToWrite: Bool { readiness.allowsWrite }
    }

    /// Settings just written (or put back) whose hook and outcome are to come.
    struct Finishing {
        enum Kind {
            /// A new revision (or one whose outcome a stop left open); `withoutLock` is why it
            /// was written without the app's update lock.
            case applied(withoutLock: String?)
            /// The served revision, put back over a local edit.
            case restoredAfterEdit
            /// The previous generation, put back because `from` failed (`reason`).
            case rollback(from: DeviceSettings, reason: String)
        }

        var settings: DeviceSettings
        var kind: Kind
    }

    /// A revision from its arrival to its outcome, one stage at a time: each stage holds only
    /// what it needs. A revision that waits (``DeferredApply``) is kept beside a stage that
    /// does something else (the served revision's hook after a local edit or a rollback), and
    /// picked up when it ends.
    ///
    /// Before the parts, eleven fields held this (the request slot's `fetchingMetadata`,
    /// `persisting`, `rewriting`, `hookDelay`, `hook`; a deferred revision's `awaitingLock`,
    /// `lockHeld`, `lockOverridden`; `rollback`, `appliedWithoutLock`, `restoredRevision`), and
    /// these combinations could be written, none of them meaningful: `awaitingLock` with
    /// `lockHeld`; `lockHeld` with `lockOverridden`; an `appliedWithoutLock` or a
    /// `restoredRevision` of another revision than the one whose hook ran (each was matched by
    /// number at the end); a `rollback` with no hook of its own under way. Taking the lock and
    /// writing the files are no stages any more: they are done in the event that asks for them.
    struct ApplyPipeline {
        enum Stage {
            case idle
            case deferred(DeferredApply)
            /// Asking for the metadata of a document's schema version.
            case fetchingMetadata(SettingsDocument, waiting: DeferredApply?)
            /// The hook runs after a random delay (a fleet does not restart its apps in the same second).
            case hookDelay(Finishing, until: Instant, waiting: DeferredApply?)
            case hook(Finishing, waiting: DeferredApply?)
        }

        var stage = Stage.idle
        /// The newest metadata fetched (it may not be in use: its values failed).
        var fetchedMetadata: MetadataDocument?
        /// The agent holds the app's update lock (from taking it until the outcome is recorded).
        var holdsUpdateLock = false
        /// Since when the app has refused the update lock, try after try, whichever revisions
        /// waited meanwhile (a newer revision does not start the count again); reset when the
        /// lock is taken or the wait is for an apply window. Monotonic: a restart starts it again.
        var lockRefusedSince: Instant?
        /// The app reported an error on this revision and the configuration asks for a rollback:
        /// done when nothing is in flight.
        var rollbackWanted: (revision: Int64, reason: String)?
        /// The revision whose `pending` report was queued (one per revision).
        var pendingReported: Int64?

        /// The revision waiting to be applied, whatever the stage.
        var deferred: DeferredApply? {
            get {
                switch stage {
                case .idle: nil
                case .deferred(let deferred): deferred
                case .fetchingMetadata(_, let waiting), .hookDelay(_, _, let waiting), .hook(_, let waiting): waiting
                }
            }
            set {
                switch stage {
                case .idle, .deferred: stage = newValue.map { .deferred($0) } ?? .idle
                case .fetchingMetadata(let document, _): stage = .fetchingMetadata(document, waiting: newValue)
                case .hookDelay(let finishing, let until, _): stage = .hookDelay(finishing, until: until, waiting: newValue)
                case .hook(let finishing, _): stage = .hook(finishing, waiting: newValue)
                }
            }
        }

        /// The stage has a request of its own (the metadata, the hook) or waits to start one.
        var holdsRequestSlot: Bool {
            switch stage {
            case .idle, .deferred: false
            case .fetchingMetadata, .hookDelay, .hook: true
            }
        }

        /// Between a revision's arrival and its outcome (`status.json` is written once it is decided).
        var isApplying: Bool { holdsRequestSlot || isReadyToWrite }

        /// A deferred revision may be written as soon as nothing is in flight.
        var isReadyToWrite: Bool { deferredReadiness?.allowsWrite ?? false }

        /// When a deferred revision is looked at again.
        var deferredCheckAt: Instant? {
            if case .waiting(let checkAt)? = deferredReadiness { checkAt } else { nil }
        }

        /// What the deferred revision waits for, read from the stage without copying the
        /// revision (its settings and metadata): these questions are asked several times an event.
        private var deferredReadiness: DeferredApply.Readiness? {
            switch stage {
            case .idle: nil
            case .deferred(let deferred): deferred.readiness
            case .fetchingMetadata(_, let waiting), .hookDelay(_, _, let waiting), .hook(_, let waiting): waiting?.readiness
            }
        }

        var hookDelayUntil: Instant? {
            if case .hookDelay(_, let until, _) = stage { until } else { nil }
        }

        /// A rollback's hook is under way.
        var isRollingBack: Bool {
            switch stage {
            case .hookDelay(let finishing, _, _), .hook(let finishing, _):
                if case .rollback = finishing.kind { true } else { false }
            default: false
            }
        }

        /// The metadata request ended without an answer: back to what waited. Returns whether
        /// one was in flight.
        mutating func metadataRequestEnded() -> Bool {
            guard case .fetchingMetadata(_, let waiting) = stage else { return false }
            stage = waiting.map { .deferred($0) } ?? .idle
            return true
        }

        /// Starts the hook's delay (or, with no hook, returns `finishing` to be recorded now).
        mutating func finish(_ finishing: Finishing, hookAt until: Instant?) -> Finishing? {
            guard let until else { return finishing }
            stage = .hookDelay(finishing, until: until, waiting: deferred)
            return nil
        }
    }
}
