import FleetJSON
import FleetProtocol

/// The store's transaction scripts, written once for every store over the primitives of
/// ``StoreTransaction``: each is one ``SettingsStore/write(_:)``, and each announces what it
/// changed (``StoreTransaction/announce(_:)``) and writes the webhook messages it makes
/// (``StoreTransaction/enqueue(_:)``) in the same transaction.
extension SettingsStore {
    /// Stores metadata when the stored version is `expectedVersion` (`nil`: none stored yet),
    /// and appends `change` to the app's history, in one transaction. Returns false, storing
    /// nothing, when another writer got there first.
    public func replaceMetadata(_ metadata: StoredMetadata, expectedVersion: Int?, recording change: ChangeRecord) async throws -> Bool {
        try await write { transaction in
            let current = try await transaction.metadataVersion(app: metadata.app)
            guard current == expectedVersion else { return false }
            if current == nil {
                // Two first uploads racing: the second's insert finds the first's row and stores nothing.
                guard try await transaction.insertMetadata(metadata) else { return false }
            } else {
                try await transaction.updateMetadata(metadata)
            }
            _ = try await Self.append(change, app: metadata.app, transaction)
            try await transaction.enqueue([.metadataStored(metadata, at: change.at)])
            try await transaction.announce(.values(app: metadata.app, scope: .defaults))
            return true
        }
    }

    /// Writes `write` in one transaction: each scope's new values (an empty object removes the
    /// row), the rollout, and the history entry, whose number (the app's next revision) it
    /// returns.
    ///
    /// - Throws: ``RolloutConflict``, writing nothing, when the rollout is new but the app has
    ///   an active one, or is known but stored with another version than the one before it.
    public func commit(_ write: AppWrite) async throws -> Int64 {
        try await self.write { transaction in
            if let rollout = write.rollout {
                if rollout.version == 1 {
                    guard try await !transaction.hasActiveRollout(app: rollout.app) else { throw RolloutConflict(app: rollout.app) }
                    try await transaction.insertRollout(rollout)
                } else {
                    guard try await transaction.replaceRollout(rollout, storedVersion: rollout.version - 1) else {
                        throw RolloutConflict(app: rollout.app)
                    }
                }
            }
            for (scope, values) in write.values { try await transaction.setValues(values, app: write.app, scope: scope) }
            let number = try await Self.append(write.change, app: write.app, transaction)
            try await transaction.enqueue(write.webhookEvents)
            for scope in write.touchedScopes { try await transaction.announce(.values(app: write.app, scope: scope)) }
            return number
        }
    }

    /// Appends `change` to the app's history as its next number (two writers racing for the same
    /// number: the second's insert fails, and its transaction rolls back).
    private static func append(_ change: ChangeRecord, app: String, _ transaction: any StoreTransaction) async throws -> Int64 {
        let number = try await transaction.newestHistoryNumber(app: app) + 1
        try await transaction.insertHistory(HistoryEntry(app: app, number: number, change: change))
        return number
    }

    /// Removes the entries of `app` that `retention` does not keep at `now` (see
    /// ``HistoryRetention``), at most ``HistoryRetention/batch`` past the floor in one
    /// transaction, and raises the app's floor to the cut.
    public func pruneHistory(app: String, keeping retention: HistoryRetention, now: Int64) async throws -> HistoryPruning {
        try await write { transaction in
            let newest = try await transaction.newestHistoryNumber(app: app)
            let floor = try await transaction.historyFloor(app: app) ?? 0
            var oldEnough: Int64?
            if let age = retention.maximumAge { oldEnough = try await transaction.newestHistoryNumber(app: app, writtenBefore: now - age) }
            guard let (cut, finished) = retention.cut(newest: newest, newestOlderThanAge: oldEnough, floor: floor) else {
                return HistoryPruning(removed: 0, finished: true)
            }
            let removed = try await transaction.removeHistory(app: app, through: cut)
            try await transaction.raiseHistoryFloor(app: app, to: cut)
            return HistoryPruning(removed: removed, finished: finished)
        }
    }

    // MARK: - Devices and enrollment

    /// Adds a device. Throws when the id or the token hash exists.
    public func addDevice(_ device: Device) async throws {
        try await write { transaction in try await transaction.insertDevice(device, enrolledWith: nil) }
    }

    /// Enrolls in one transaction. When a device was enrolled with the same token and request id
    /// within the retry window, it gets `newTokenHash` as its token and is returned (a retry
    /// after a lost answer). Otherwise one use of the token is spent, if the token exists, has
    /// not expired and has uses left, and the device `makeDevice` returns for the token's apps
    /// and groups is added (never a device for a token that was not used). The token is read
    /// first, locked: enrollments with the same token, on any instance, take turns, so its uses
    /// are spent exactly.
    public func enroll(
        _ attempt: EnrollmentAttempt, newTokenHash: String, makeDevice: @escaping @Sendable (_ apps: [String], _ groups: [String]) -> Device
    ) async throws -> EnrollmentOutcome {
        try await write { transaction -> EnrollmentOutcome in
            guard let token = try await transaction.enrollmentToken(hash: attempt.tokenHash) else { return .unknown }
            // A retry of an enrollment whose answer was lost: the same device, with a new token.
            if var earlier = try await transaction.device(
                enrolledWith: attempt.tokenHash, requestID: attempt.requestID, since: attempt.now - attempt.retryWindow)
            {
                earlier.tokenHash = newTokenHash
                earlier.pendingTokenHash = nil
                try await transaction.updateDevice(earlier)
                try await transaction.announce(.device(earlier.id))
                return .enrolled(earlier)
            }
            guard token.expiresAt > attempt.now else { return .expired }
            guard token.usesLeft > 0 else { return .usedUp }
            try await transaction.setUsesLeft(token.usesLeft - 1, enrollmentToken: attempt.tokenHash)
            // A group defined by a query since the token was made is its facts' to give.
            let defined = Set(try await transaction.groupDefinitions().map(\.name))
            let device = makeDevice(token.apps, token.groups.filter { !defined.contains($0) })
            try await transaction.insertDevice(
                device, enrolledWith: DeviceEnrollment(tokenHash: attempt.tokenHash, requestID: attempt.requestID))
            try await transaction.enqueue([.device(.deviceEnrolled, device, at: attempt.now)])
            return .enrolled(device)
        }
    }

    /// Changes a device; returns it as changed, `nil` when there is none. With `now`, disabling
    /// it tells webhook subscribers (`device.disabled`).
    public func updateDevice(id: String, _ change: DeviceChange, at now: Int64? = nil) async throws -> Device? {
        try await write { transaction in
            guard var device = try await transaction.device(id: id) else { return nil }
            if let now, change.disabled == true, !device.disabled {
                try await transaction.enqueue([.device(.deviceDisabled, device, at: now)])
            }
            if let apps = change.apps { device.apps = apps }
            if change.groups != nil || change.apps != nil {
                // The groups given by hand are replaced; the queries are checked again (an app
                // taken away takes its facts out of them).
                let definitions = try await transaction.groupDefinitions()
                let defined = Set(definitions.map(\.name))
                if let groups = change.groups {
                    if let taken = groups.first(where: defined.contains) { throw GroupRefusal.definedByQuery(group: taken) }
                    device.groups = groups
                }
                if !definitions.isEmpty {
                    let facts = try await transaction.deviceInfo(id: id)?.info ?? [:]
                    device.groups = GroupMembership.groups(of: device, info: facts, definitions: definitions)
                }
            }
            if let disabled = change.disabled { device.disabled = disabled }
            if let requested = change.rotationRequested { device.rotationRequested = requested }
            try await transaction.updateDevice(device)
            try await transaction.announce(.device(id))
            return device
        }
    }

    /// Removes a device with its revisions, status reports, values, facts and policy; false when
    /// there is none.
    ///
    /// With `now`, the removal tells webhook subscribers (`device.deleted`).
    public func deleteDevice(id: String, at now: Int64? = nil) async throws -> Bool {
        try await write { transaction in
            if let now, let device = try await transaction.device(id: id) {
                try await transaction.enqueue([.device(.deviceDeleted, device, at: now)])
            }
            let removed = try await transaction.removeDevice(id: id)
            try await transaction.announce(.device(id))
            return removed
        }
    }

    /// Records a rotation: `hash` becomes the device's pending token (replacing an earlier one).
    public func setPendingToken(deviceID: String, hash: String) async throws {
        try await write { transaction in
            guard var device = try await transaction.device(id: deviceID) else { return }
            device.pendingTokenHash = hash
            try await transaction.updateDevice(device)
            try await transaction.announce(.device(deviceID))
        }
    }

    /// The pending token with `hash` was used: it becomes the device's token, the old one stops
    /// working, and a requested rotation is done. Nothing changes when the pending token is
    /// another one by now (a newer rotation). Returns the device as it is now.
    public func promotePendingToken(deviceID: String, hash: String) async throws -> Device? {
        try await write { transaction in
            guard var device = try await transaction.device(id: deviceID) else { return nil }
            guard device.pendingTokenHash == hash else { return device }
            device.tokenHash = hash
            device.pendingTokenHash = nil
            device.rotationRequested = false
            try await transaction.updateDevice(device)
            try await transaction.announce(.device(deviceID))
            return device
        }
    }

    /// Adds an enrollment token (by hash).
    public func addEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try await write { transaction in try await transaction.insertEnrollmentToken(token) }
    }

    /// Removes the enrollment token with `id`; false when there is none.
    public func deleteEnrollmentToken(id: String) async throws -> Bool {
        try await write { transaction in try await transaction.removeEnrollmentToken(id: id) }
    }

    // MARK: - Facts and policies

    /// Replaces the device's facts with `update` of them (empty when none yet), in one
    /// transaction, recording `time` when they change, and moves the device into or out of the
    /// groups defined by a query as its new facts say (``GroupMembership``). Returns the new
    /// facts (with the groups, when they changed), or `nil` when no device has this id. The
    /// device is read first (locked): two reports of one device apply one after the other, and
    /// a change of a query (which locks every device) before or after.
    public func updateDeviceInfo(
        id: String, at time: Int64, _ update: @escaping @Sendable (JSONObject) throws -> JSONObject
    ) async throws -> FactsUpdate? {
        try await write { transaction in
            guard var device = try await transaction.device(id: id) else { return nil }
            let before = try await transaction.deviceInfo(id: id)
            let after = try update(before?.info ?? [:])
            guard after != before?.info else { return FactsUpdate(info: after) }
            try await transaction.setDeviceInfo(StoredDeviceInfo(info: after, updatedAt: time), id: id)
            let definitions = try await transaction.groupDefinitions()
            let groups = GroupMembership.groups(of: device, info: after, definitions: definitions)
            guard groups != device.groups else { return FactsUpdate(info: after) }
            let earlier = device.groups
            device.groups = groups
            try await transaction.updateDevice(device)
            try await transaction.announce(.device(id))
            return FactsUpdate(info: after, groups: (earlier, groups))
        }
    }

    /// Replaces the agent policy at `scope` (an empty one removes it).
    public func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        try await write { transaction in
            try await transaction.setAgentPolicy(policy, scope: scope)
            try await transaction.announce(.policy(scope))
        }
    }

    // MARK: - Moving a fleet

    /// Writes everything in `snapshot`, in one transaction, into a store that holds no
    /// metadata, values, devices, enrollment tokens or agent policies yet.
    ///
    /// - Throws: ``StoreNotEmpty`` naming what it holds, writing nothing.
    public func restore(_ snapshot: StoreSnapshot) async throws {
        try await write { transaction in
            for kind in StoredKind.allCases {
                let count = try await transaction.count(of: kind)
                if count > 0 { throw StoreNotEmpty(holds: "\(count) \(kind.rawValue)") }
            }
            for metadata in snapshot.metadata {
                guard try await transaction.insertMetadata(metadata) else {
                    throw StoreCorruption(what: "snapshot, which holds the metadata of \(metadata.app) twice")
                }
            }
            for entry in snapshot.values { try await transaction.setValues(entry.values, app: entry.app, scope: entry.scope) }
            for entry in snapshot.devices {
                try await transaction.insertDevice(
                    entry.device,
                    enrolledWith: DeviceEnrollment(tokenHash: entry.enrollmentTokenHash, requestID: entry.enrollmentRequestID))
            }
            for token in snapshot.enrollmentTokens { try await transaction.insertEnrollmentToken(token) }
            for entry in snapshot.revisions { try await transaction.insertRevision(entry.state, app: entry.app, deviceID: entry.deviceID) }
            if !snapshot.reports.isEmpty {
                try await transaction.recordStatuses(
                    snapshot.reports.map { StatusRecord(report: $0.report, app: $0.app, deviceID: $0.deviceID, time: $0.receivedAt) })
            }
            for entry in snapshot.history { try await transaction.insertHistory(entry) }
            for (app, floor) in snapshot.historyFloors { try await transaction.raiseHistoryFloor(app: app, to: floor) }
            for rollout in snapshot.rollouts { try await transaction.insertRollout(rollout) }
            for (id, stored) in snapshot.deviceInfo { try await transaction.setDeviceInfo(stored, id: id) }
            for (scope, policy) in snapshot.policies { try await transaction.setAgentPolicy(policy, scope: scope) }
            for account in snapshot.accounts {
                guard try await transaction.insertAccount(account) else {
                    throw StoreCorruption(what: "snapshot, which holds account \(account.name) twice")
                }
            }
            for token in snapshot.apiTokens { try await transaction.insertAPIToken(token) }
            for record in snapshot.audit { try await transaction.insertAuditRecord(record) }
            for subscription in snapshot.webhookSubscriptions { try await transaction.insertWebhookSubscription(subscription) }
            for entry in snapshot.outbox {
                var unclaimed = entry
                unclaimed.claimedUntil = nil
                try await transaction.insertOutboxEntry(unclaimed)
            }
            // Ids of the source's removed messages are not handed out again either.
            let lastSequence = max(snapshot.outboxSequence, snapshot.outbox.map(\.sequence).max() ?? 0)
            if lastSequence > 0 { try await transaction.raiseOutboxSequence(above: lastSequence) }
            for definition in snapshot.groupDefinitions { try await transaction.setGroupDefinition(definition) }
            try await transaction.announce(.unknown)
        }
    }

    // MARK: - One at a time

    /// The device's revision for the app moved to ``RevisionState/next(after:fingerprint:)`` of
    /// the stored one, atomically (see ``advanceRevisions(_:)``). The common case, nothing
    /// changed, is one read and no write.
    public func advanceRevision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState {
        if let current = try await revision(app: app, deviceID: deviceID), current.fingerprint == fingerprint { return current }
        return try await advanceRevisions([RevisionAdvance(app: app, deviceID: deviceID, fingerprint: fingerprint)])[0]
    }

    /// Records that the device was seen (see ``touch(_:)``).
    public func touch(deviceID: String, at time: Int64) async throws {
        _ = try await touch([DeviceSeen(deviceID: deviceID, time: time)])
    }

    /// Keeps `report` as the device's latest for the app (see ``recordStatuses(_:)``).
    public func recordStatus(_ report: StatusReport, app: String, deviceID: String, at time: Int64) async throws {
        _ = try await recordStatuses([StatusRecord(report: report, app: app, deviceID: deviceID, time: time)])
    }
}
