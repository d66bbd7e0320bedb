import FleetJSON
import FleetProtocol
import Synchronization

/// Everything an ``InMemoryStore`` holds, as its tables would.
struct MemoryState: Sendable {
    struct EnrolledDevice: Sendable {
        var device: Device
        var enrollment: DeviceEnrollment?
    }

    var metadata: [String: StoredMetadata] = [:]
    /// By app, then scope.
    var values: [String: [Scope: JSONObject]] = [:]
    /// By app, then number.
    var history: [String: [Int64: HistoryEntry]] = [:]
    /// The numbers of the entries that wrote each scope, by app and scope text (what pruning
    /// keeps of it, as the databases' `history_scopes`).
    var historyScopes: [String: [String: Set<Int64>]] = [:]
    var historyFloors: [String: Int64] = [:]
    /// By id.
    var rollouts: [String: Rollout] = [:]
    /// By id.
    var devices: [String: EnrolledDevice] = [:]
    /// By hash.
    var tokens: [String: EnrollmentTokenRecord] = [:]
    /// By app, then device id.
    var revisions: [String: [String: RevisionState]] = [:]
    /// The latest report, by app, then device id.
    var latest: [String: [String: StatusRecord]] = [:]
    /// The recent reports, by device id, then app, then slot (``StatusHistory/slot(of:)``).
    var statusHistory: [String: [String: [Int64: StatusRecord]]] = [:]
    var deviceInfo: [String: StoredDeviceInfo] = [:]
    var policies: [PolicyScope: AgentPolicy] = [:]
    /// By name.
    var accounts: [String: StoredAccount] = [:]
    /// By id.
    var apiTokens: [String: StoredAPIToken] = [:]
    /// Oldest first.
    var audit: [AuditRecord] = []
    /// One-time values (``SettingsStore/addOneTimeValue(key:value:expiresAt:now:)``) by key.
    var oneTimeValues: [String: (value: String, expiresAt: Int64)] = [:]
    /// Oldest first.
    var webhookSubscriptions: [WebhookSubscription] = []
    /// By sequence.
    var outbox: [Int64: OutboxEntry] = [:]
    /// The last outbox sequence handed out.
    var outboxSequence: Int64 = 0
    /// By name.
    var groupDefinitions: [String: GroupDefinition] = [:]

    /// The accounts by name, in byte order (as the databases sort them).
    var sortedAccounts: [StoredAccount] { accounts.values.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) } }

    func activeRollout(app: String) -> Rollout? {
        rollouts.values.first { $0.app == app && $0.phase.isActive }
    }

    private func requireDevice(_ id: String) throws {
        guard devices[id] != nil else { throw InMemoryStore.ConstraintViolation(reason: "no device has id \(id)") }
    }

    mutating func setRevision(_ state: RevisionState, app: String, deviceID: String) throws {
        try requireDevice(deviceID)
        revisions[app, default: [:]][deviceID] = state
    }

    mutating func record(_ records: [StatusRecord]) throws {
        for record in records {
            try requireDevice(record.deviceID)
            latest[record.app, default: [:]][record.deviceID] = record
            statusHistory[record.deviceID, default: [:]][record.app, default: [:]][StatusHistory.slot(of: record.report)] = record
        }
    }

    var snapshot: StoreSnapshot {
        func byteOrder(_ first: String, _ second: String) -> Bool { first.utf8.lexicographicallyPrecedes(second.utf8) }
        var snapshot = StoreSnapshot()
        snapshot.metadata = metadata.values.sorted { byteOrder($0.app, $1.app) }
        snapshot.values = values.flatMap { app, scopes in
            scopes.map { StoreSnapshot.Values(app: app, scope: $0.key, values: $0.value) }
        }.sorted { $0.app != $1.app ? byteOrder($0.app, $1.app) : byteOrder($0.scope.description, $1.scope.description) }
        snapshot.devices = devices.values.sorted { byteOrder($0.device.id, $1.device.id) }.map {
            StoreSnapshot.EnrolledDevice(
                device: $0.device, enrollmentTokenHash: $0.enrollment?.tokenHash, enrollmentRequestID: $0.enrollment?.requestID)
        }
        snapshot.enrollmentTokens = tokens.values.sorted { byteOrder($0.id, $1.id) }
        snapshot.revisions = revisions.flatMap { app, states in
            states.map { StoreSnapshot.Revision(app: app, deviceID: $0.key, state: $0.value) }
        }.sorted { $0.app != $1.app ? byteOrder($0.app, $1.app) : byteOrder($0.deviceID, $1.deviceID) }
        snapshot.reports = latest.values.flatMap(\.values).map {
            StoreSnapshot.Report(app: $0.app, deviceID: $0.deviceID, report: $0.report, receivedAt: $0.time)
        }.sorted { $0.app != $1.app ? byteOrder($0.app, $1.app) : byteOrder($0.deviceID, $1.deviceID) }
        snapshot.history = history.values.flatMap(\.values).sorted { $0.app != $1.app ? byteOrder($0.app, $1.app) : $0.number < $1.number }
        snapshot.historyFloors = historyFloors
        snapshot.rollouts = rollouts.values.sorted { byteOrder($0.id, $1.id) }
        snapshot.deviceInfo = deviceInfo
        snapshot.accounts = sortedAccounts
        snapshot.apiTokens = apiTokens.values.sorted { byteOrder($0.id, $1.id) }
        snapshot.audit = audit
        snapshot.policies = policies
        snapshot.webhookSubscriptions = webhookSubscriptions
        snapshot.outbox = outbox.values.sorted { $0.sequence < $1.sequence }
        snapshot.outboxSequence = outboxSequence
        snapshot.groupDefinitions = groupDefinitions.values.sorted { byteOrder($0.name, $1.name) }
        return snapshot
    }
}

/// The primitives of an ``InMemoryStore`` write: on a copy of the state, which becomes the
/// state when the script returns (and is dropped when it throws).
final class MemoryTransaction: StoreTransaction {
    let state: Mutex<MemoryState>

    init(state: MemoryState) { self.state = Mutex(state) }

    private func change<T>(_ body: (inout MemoryState) throws -> T) rethrows -> T {
        try state.withLock { try body(&$0) }
    }

    private static func violation(_ reason: String) -> InMemoryStore.ConstraintViolation {
        InMemoryStore.ConstraintViolation(reason: reason)
    }

    /// `object` as it reads back from the JSON text a database keeps.
    private static func stored(_ object: JSONObject, what: String) throws -> JSONObject {
        try StoredText.object(JSONValue.object(object).serialized(), what: what)
    }

    func metadataVersion(app: String) async throws -> Int? { change { $0.metadata[app]?.version } }

    func insertMetadata(_ metadata: StoredMetadata) async throws -> Bool {
        change { state in
            guard state.metadata[metadata.app] == nil else { return false }
            state.metadata[metadata.app] = metadata
            return true
        }
    }

    func updateMetadata(_ metadata: StoredMetadata) async throws { change { $0.metadata[metadata.app] = metadata } }

    func setValues(_ values: JSONObject, app: String, scope: Scope) async throws {
        let stored = try Self.stored(values, what: "values of \(app) at \(scope)")
        change { state in
            state.values[app, default: [:]][scope] = stored.isEmpty ? nil : stored
            if state.values[app]?.isEmpty == true { state.values[app] = nil }
        }
    }

    func newestHistoryNumber(app: String) async throws -> Int64 { change { $0.history[app]?.keys.max() ?? 0 } }

    func newestHistoryNumber(app: String, writtenBefore time: Int64) async throws -> Int64? {
        change { $0.history[app]?.values.filter { $0.change.at < time }.map(\.number).max() }
    }

    func insertHistory(_ entry: HistoryEntry) async throws {
        let what = "history entry \(entry.number) of \(entry.app)"
        var stored = entry
        stored.change.scopes = try ChangeRecord.scopes(entry.change.scopesText, what: what)
        try change { state in
            guard state.history[entry.app]?[entry.number] == nil else { throw Self.violation("\(what) exists") }
            state.history[entry.app, default: [:]][entry.number] = stored
            for scope in Set(entry.change.scopes.map(\.scope.description)) {
                state.historyScopes[entry.app, default: [:]][scope, default: []].insert(entry.number)
            }
        }
    }

    func historyFloor(app: String) async throws -> Int64? { change { $0.historyFloors[app] } }

    func raiseHistoryFloor(app: String, to number: Int64) async throws {
        change { $0.historyFloors[app] = max($0.historyFloors[app] ?? number, number) }
    }

    func removeHistory(app: String, through cut: Int64) async throws -> Int {
        change { state in
            var scopes = state.historyScopes[app] ?? [:]
            for (scope, numbers) in scopes {
                let old = numbers.filter { $0 <= cut }
                var kept = numbers.subtracting(old)
                let deviceGone: Bool =
                    if case .device(let id)? = Scope(parameter: scope) { state.devices[id] == nil } else { false }
                if !deviceGone, let newest = old.max() { kept.insert(newest) }
                scopes[scope] = kept.isEmpty ? nil : kept
            }
            state.historyScopes[app] = scopes
            let referenced = scopes.values.reduce(into: Set<Int64>()) { $0.formUnion($1) }
            let removed = (state.history[app] ?? [:]).keys.filter { $0 <= cut && !referenced.contains($0) }
            for number in removed { state.history[app]?[number] = nil }
            return removed.count
        }
    }

    func hasActiveRollout(app: String) async throws -> Bool { change { $0.activeRollout(app: app) != nil } }

    func insertRollout(_ rollout: Rollout) async throws {
        let stored = try Rollout(storedText: rollout.storedJSON.serialized())
        try change { state in
            guard state.rollouts[rollout.id] == nil else { throw Self.violation("a rollout with id \(rollout.id) exists") }
            if rollout.phase.isActive, state.activeRollout(app: rollout.app) != nil {
                throw Self.violation("\(rollout.app) has an active rollout")
            }
            state.rollouts[rollout.id] = stored
        }
    }

    func replaceRollout(_ rollout: Rollout, storedVersion version: Int64) async throws -> Bool {
        let stored = try Rollout(storedText: rollout.storedJSON.serialized())
        return try change { state in
            guard state.rollouts[rollout.id]?.version == version else { return false }
            if rollout.phase.isActive, let active = state.activeRollout(app: rollout.app), active.id != rollout.id {
                throw Self.violation("\(rollout.app) has an active rollout")
            }
            state.rollouts[rollout.id] = stored
            return true
        }
    }

    func device(id: String) async throws -> Device? { change { $0.devices[id]?.device } }

    func device(enrolledWith tokenHash: String, requestID: String, since: Int64) async throws -> Device? {
        change { state in
            state.devices.values.first {
                $0.enrollment == DeviceEnrollment(tokenHash: tokenHash, requestID: requestID) && $0.device.enrolledAt >= since
                    && !$0.device.disabled
            }?.device
        }
    }

    /// Throws when another device than `id` has one of `device`'s token hashes.
    private static func checkTokens(of device: Device, in state: MemoryState) throws {
        for other in state.devices.values where other.device.id != device.id {
            if other.device.tokenHash == device.tokenHash { throw violation("another device has the token hash of \(device.id)") }
            if let pending = device.pendingTokenHash, other.device.pendingTokenHash == pending {
                throw violation("another device has the pending token hash of \(device.id)")
            }
        }
    }

    func insertDevice(_ device: Device, enrolledWith enrollment: DeviceEnrollment?) async throws {
        try change { state in
            guard state.devices[device.id] == nil else { throw Self.violation("a device with id \(device.id) exists") }
            try Self.checkTokens(of: device, in: state)
            if let enrollment, enrollment.tokenHash != nil, enrollment.requestID != nil,
                state.devices.values.contains(where: { $0.enrollment == enrollment })
            {
                throw Self.violation("a device was enrolled with the same token and request id")
            }
            state.devices[device.id] = MemoryState.EnrolledDevice(device: device, enrollment: enrollment)
        }
    }

    func updateDevice(_ device: Device) async throws {
        try change { state in
            guard var stored = state.devices[device.id]?.device else { return }
            try Self.checkTokens(of: device, in: state)
            stored.tokenHash = device.tokenHash
            stored.pendingTokenHash = device.pendingTokenHash
            stored.apps = device.apps
            stored.groups = device.groups
            stored.disabled = device.disabled
            stored.rotationRequested = device.rotationRequested
            state.devices[device.id]?.device = stored
        }
    }

    func removeDevice(id: String) async throws -> Bool {
        change { state in
            for app in state.revisions.keys { state.revisions[app]?[id] = nil }
            for app in state.latest.keys { state.latest[app]?[id] = nil }
            state.statusHistory[id] = nil
            state.deviceInfo[id] = nil
            for app in state.values.keys {
                state.values[app]?[.device(id)] = nil
                if state.values[app]?.isEmpty == true { state.values[app] = nil }
            }
            state.policies[.device(id)] = nil
            return state.devices.removeValue(forKey: id) != nil
        }
    }

    func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? { change { $0.tokens[hash] } }

    func insertEnrollmentToken(_ token: EnrollmentTokenRecord) async throws {
        try change { state in
            guard state.tokens[token.hash] == nil, !state.tokens.values.contains(where: { $0.id == token.id }) else {
                throw Self.violation("an enrollment token with id \(token.id) or its hash exists")
            }
            state.tokens[token.hash] = token
        }
    }

    func setUsesLeft(_ usesLeft: Int, enrollmentToken hash: String) async throws { change { $0.tokens[hash]?.usesLeft = usesLeft } }

    func removeEnrollmentToken(id: String) async throws -> Bool {
        change { state in
            guard let hash = state.tokens.values.first(where: { $0.id == id })?.hash else { return false }
            state.tokens[hash] = nil
            return true
        }
    }

    func deviceInfo(id: String) async throws -> StoredDeviceInfo? { change { $0.deviceInfo[id] } }

    func setDeviceInfo(_ info: StoredDeviceInfo, id: String) async throws {
        let stored = StoredDeviceInfo(info: try Self.stored(info.info, what: "facts of device \(id)"), updatedAt: info.updatedAt)
        try change { state in
            guard state.devices[id] != nil else { throw Self.violation("no device has id \(id)") }
            state.deviceInfo[id] = stored
        }
    }

    func setAgentPolicy(_ policy: AgentPolicy, scope: PolicyScope) async throws {
        let stored = policy.isEmpty ? nil : try AgentPolicy(json: .object(Self.stored(policy.json.objectValue ?? [:], what: "\(scope)")))
        change { $0.policies[scope] = stored }
    }

    func insertRevision(_ state: RevisionState, app: String, deviceID: String) async throws {
        try change { try $0.setRevision(state, app: app, deviceID: deviceID) }
    }

    func recordStatuses(_ records: [StatusRecord]) async throws { try change { try $0.record(records) } }

    func count(of kind: StoredKind) async throws -> Int {
        change { state in
            switch kind {
            case .metadata: state.metadata.count
            case .values: state.values.values.reduce(0) { $0 + $1.count }
            case .devices: state.devices.count
            case .enrollmentTokens: state.tokens.count
            case .agentPolicies: state.policies.count
            case .accounts: state.accounts.count
            case .apiTokens: state.apiTokens.count
            case .auditEntries: state.audit.count
            case .webhookSubscriptions: state.webhookSubscriptions.count
            case .groupDefinitions: state.groupDefinitions.count
            }
        }
    }

    func accounts() async throws -> [StoredAccount] { change { $0.sortedAccounts } }

    func account(name: String) async throws -> StoredAccount? { change { $0.accounts[name] } }

    func insertAccount(_ account: StoredAccount) async throws -> Bool {
        change { state in
            guard state.accounts[account.name] == nil else { return false }
            state.accounts[account.name] = account
            return true
        }
    }

    func updateAccount(_ account: StoredAccount) async throws { change { $0.accounts[account.name] = account } }

    func removeAccount(name: String) async throws -> Bool {
        change { state in
            state.apiTokens = state.apiTokens.filter { $0.value.info.account != name }
            return state.accounts.removeValue(forKey: name) != nil
        }
    }

    func apiToken(id: String) async throws -> StoredAPIToken? { change { $0.apiTokens[id] } }

    func insertAPIToken(_ token: StoredAPIToken) async throws {
        try change { state in
            guard state.apiTokens[token.id] == nil, !state.apiTokens.values.contains(where: { $0.hash == token.hash }) else {
                throw Self.violation("an API token with id \(token.id) or its hash exists")
            }
            state.apiTokens[token.id] = token
        }
    }

    func updateAPIToken(_ token: StoredAPIToken) async throws { change { $0.apiTokens[token.id]?.info = token.info } }

    func lastAuditRecord() async throws -> AuditRecord? { change { $0.audit.last } }

    func insertAuditRecord(_ record: AuditRecord) async throws {
        try change { state in
            guard !state.audit.contains(where: { $0.sequence == record.sequence }) else {
                throw Self.violation("audit entry \(record.sequence) exists")
            }
            state.audit.append(record)
            state.audit.sort { $0.sequence < $1.sequence }
        }
    }

    func insertOneTimeValue(key: String, value: String, expiresAt: Int64, now: Int64) async throws -> Bool {
        change { state in
            state.oneTimeValues = state.oneTimeValues.filter { $0.value.expiresAt > now }
            guard state.oneTimeValues[key] == nil else { return false }
            state.oneTimeValues[key] = (value, expiresAt)
            return true
        }
    }

    func takeOneTimeValue(key: String, now: Int64) async throws -> String? {
        change { state in
            guard let kept = state.oneTimeValues.removeValue(forKey: key), kept.expiresAt > now else { return nil }
            return kept.value
        }
    }

    func groupDefinitions() async throws -> [GroupDefinition] {
        change { $0.groupDefinitions.values.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) } }
    }

    func setGroupDefinition(_ definition: GroupDefinition) async throws { change { $0.groupDefinitions[definition.name] = definition } }

    func removeGroupDefinition(name: String) async throws -> Bool {
        change { $0.groupDefinitions.removeValue(forKey: name) != nil }
    }

    func lockedDevices() async throws -> [Device] {
        change { $0.devices.values.map(\.device).sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) } }
    }

    func allDeviceInfo() async throws -> [String: StoredDeviceInfo] { change { $0.deviceInfo } }

    func webhookSubscriptions() async throws -> [WebhookSubscription] { change { $0.webhookSubscriptions } }

    func insertWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        try change { state in
            guard !state.webhookSubscriptions.contains(where: { $0.id == subscription.id }) else {
                throw Self.violation("webhook subscription \(subscription.id) exists")
            }
            state.webhookSubscriptions.append(subscription)
        }
    }

    func updateWebhookSubscription(_ subscription: WebhookSubscription) async throws {
        change { state in
            if let index = state.webhookSubscriptions.firstIndex(where: { $0.id == subscription.id }) {
                state.webhookSubscriptions[index] = subscription
            }
        }
    }

    func removeWebhookSubscription(id: String) async throws -> Bool {
        change { state in
            guard let index = state.webhookSubscriptions.firstIndex(where: { $0.id == id }) else { return false }
            state.webhookSubscriptions.remove(at: index)
            state.outbox = state.outbox.filter { $0.value.subscription != id }
            return true
        }
    }

    func nextOutboxSequences(_ count: Int) async throws -> [Int64] {
        change { state in
            defer { state.outboxSequence += Int64(count) }
            return (0..<Int64(count)).map { state.outboxSequence + 1 + $0 }
        }
    }

    func raiseOutboxSequence(above sequence: Int64) async throws { change { $0.outboxSequence = max($0.outboxSequence, sequence) } }

    func insertOutboxEntry(_ entry: OutboxEntry) async throws {
        try change { state in
            guard state.outbox[entry.sequence] == nil else { throw Self.violation("outbox entry \(entry.sequence) exists") }
            state.outbox[entry.sequence] = entry
        }
    }

    func dueOutboxEntries(now: Int64, limit: Int) async throws -> [OutboxEntry] {
        change { state in
            Array(
                state.outbox.values.filter { $0.state == .pending && $0.nextAt <= now && ($0.claimedUntil ?? now) <= now }
                    .sorted { $0.sequence < $1.sequence }.prefix(limit))
        }
    }

    func outboxEntry(sequence: Int64) async throws -> OutboxEntry? { change { $0.outbox[sequence] } }

    func updateOutboxEntry(_ entry: OutboxEntry) async throws {
        change { state in
            if state.outbox[entry.sequence] != nil { state.outbox[entry.sequence] = entry }
        }
    }

    func outboxEntries(subscription: String?, states: Set<OutboxEntry.State>, limit: Int) async throws -> [OutboxEntry] {
        change { state in
            Array(
                state.outbox.values.filter { entry in
                    states.contains(entry.state) && (subscription.map { $0 == entry.subscription } ?? true)
                }
                .sorted { $0.sequence > $1.sequence }.prefix(limit))
        }
    }

    func outboxCounts(subscription: String?) async throws -> [OutboxEntry.State: Int] {
        change { state in
            state.outbox.values.filter { entry in subscription.map { $0 == entry.subscription } ?? true }.reduce(into: [:]) {
                counts, entry in counts[entry.state, default: 0] += 1
            }
        }
    }

    func removeDeliveredOutboxEntries(before time: Int64) async throws -> Int {
        change { state in
            let removed = state.outbox.filter { $0.value.state == .delivered && $0.value.nextAt < time }
            for sequence in removed.keys { state.outbox[sequence] = nil }
            return removed.count
        }
    }

    /// Nothing else shares an in-memory store.
    func announce(_ change: StoreChange) async throws {}
}
