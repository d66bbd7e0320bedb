import FleetJSON
import FleetProtocol
import Synchronization

/// A ``SettingsStore`` in memory: the same contract as the SQLite and PostgreSQL stores (it runs
/// the same conformance suite), for tests of the services that need no database and no socket,
/// and for tools that start empty and keep nothing.
///
/// What the databases keep as text (values, facts, policies, rollouts, history) it keeps as the
/// same text would read back, so that a value reads the same from every store. Its constraints
/// are the databases': a second device with a known id or token hash, a status for an unknown
/// device or a history number written twice throws ``InMemoryStore/ConstraintViolation``.
public final class InMemoryStore: SettingsStore {
    private let state = Mutex(MemoryState())
    /// One write at a time: a script works on a copy of the state, which replaces the state when
    /// the script returns.
    private let writer = SerialSection()

    /// An empty store.
    public init() {}

    /// A write that a database's constraint would refuse.
    public struct ConstraintViolation: Error, Sendable, CustomStringConvertible {
        /// What was refused, e.g. "a device with id d-1 exists".
        public let reason: String

        public var description: String { "constraint violated: \(reason)" }
    }

    private func read<T>(_ body: (borrowing MemoryState) throws -> T) rethrows -> T {
        try state.withLock { try body($0) }
    }

    public func write<T: Sendable>(_ body: @escaping @Sendable (any StoreTransaction) async throws -> T) async throws -> T {
        try await writer.run {
            let transaction = MemoryTransaction(state: self.state.withLock { $0 })
            let result = try await body(transaction)
            let written = transaction.state.withLock { $0 }
            self.state.withLock { $0 = written }
            return result
        }
    }

    /// A write of the serving path, straight onto the state (in turn with the scripts).
    private func batchWrite<T: Sendable>(_ body: @escaping @Sendable (inout MemoryState) throws -> T) async throws -> T {
        try await writer.run {
            try self.state.withLock { state in
                var copy = state
                let result = try body(&copy)
                state = copy
                return result
            }
        }
    }

    // MARK: - Metadata, values, history, rollouts

    public func metadata(app: String) async throws -> StoredMetadata? { read { $0.metadata[app] } }

    public func allMetadata() async throws -> [StoredMetadata] {
        read { $0.metadata.values.sorted { $0.app.utf8.lexicographicallyPrecedes($1.app.utf8) } }
    }

    public func values(app: String, scope: Scope) async throws -> JSONObject { read { $0.values[app]?[scope] ?? [:] } }

    public func allValues(app: String) async throws -> [Scope: JSONObject] { read { $0.values[app] ?? [:] } }

    public func valueLayers(app: String, groups: [String], deviceID: String) async throws -> ValueLayers {
        read { state in
            let values = state.values[app] ?? [:]
            var layers = ValueLayers(
                app: values[.app] ?? [:], device: values[.device(deviceID)] ?? [:], rollout: state.activeRollout(app: app))
            for group in groups { layers.groups[group] = values[.group(group)] }
            return layers
        }
    }

    public func history(app: String, page: HistoryPage) async throws -> [HistoryEntry] {
        read { state in
            let entries = state.history[app] ?? [:]
            let numbers =
                if let scope = page.scope { state.historyScopes[app]?[scope.description] ?? [] } else { Set(entries.keys) }
            let newestFirst = numbers.filter { $0 < (page.before ?? .max) }.sorted(by: >).prefix(page.limit ?? .max)
            return newestFirst.reversed().compactMap { entries[$0] }
        }
    }

    public func historyBase(app: String, through number: Int64) async throws -> HistoryBase {
        read { state in
            let entries = state.history[app] ?? [:]
            let newestOfEachScope = Set(
                (state.historyScopes[app] ?? [:]).values.compactMap { numbers in numbers.filter { $0 <= number }.max() })
            return HistoryBase(
                number: number, isKept: entries[number] != nil, newest: entries.keys.max() ?? 0, floor: state.historyFloors[app] ?? 1,
                entries: newestOfEachScope.sorted().compactMap { entries[$0] })
        }
    }

    public func rollouts(app: String) async throws -> [Rollout] {
        read { state in
            state.rollouts.values.filter { $0.app == app }.sorted { first, second in
                first.startedAt != second.startedAt
                    ? first.startedAt > second.startedAt : second.id.utf8.lexicographicallyPrecedes(first.id.utf8)
            }
        }
    }

    public func activeRollouts() async throws -> [Rollout] {
        read { $0.rollouts.values.filter(\.phase.isActive).sorted { $0.app.utf8.lexicographicallyPrecedes($1.app.utf8) } }
    }

    public func activeRollout(app: String) async throws -> Rollout? { read { $0.activeRollout(app: app) } }

    // MARK: - Devices and tokens

    public func device(tokenHash: String) async throws -> Device? {
        read { $0.devices.values.first { $0.device.tokenHash == tokenHash || $0.device.pendingTokenHash == tokenHash }?.device }
    }

    public func device(id: String) async throws -> Device? { read { $0.devices[id]?.device } }

    public func devices() async throws -> [Device] {
        read { $0.devices.values.map(\.device).sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) } }
    }

    public func touch(_ seen: [DeviceSeen]) async throws -> [Void] {
        try await batchWrite { state in
            for device in seen { state.devices[device.deviceID]?.device.lastSeenAt = device.time }
            return seen.map { _ in () }
        }
    }

    public func enrollmentToken(hash: String) async throws -> EnrollmentTokenRecord? { read { $0.tokens[hash] } }

    public func enrollmentTokens() async throws -> [EnrollmentTokenRecord] {
        read { $0.tokens.values.sorted { $0.id.utf8.lexicographicallyPrecedes($1.id.utf8) } }
    }

    // MARK: - Revisions and reports

    public func revision(app: String, deviceID: String) async throws -> RevisionState? { read { $0.revisions[app]?[deviceID] } }

    public func revisions(app: String) async throws -> [String: RevisionState] { read { $0.revisions[app] ?? [:] } }

    public func advanceRevisions(_ advances: [RevisionAdvance]) async throws -> [RevisionState] {
        try await batchWrite { state in
            try advances.map { advance in
                let next = RevisionState.next(after: state.revisions[advance.app]?[advance.deviceID], fingerprint: advance.fingerprint)
                try state.setRevision(next, app: advance.app, deviceID: advance.deviceID)
                return next
            }
        }
    }

    public func recordStatuses(_ records: [StatusRecord]) async throws -> [Void] {
        try await batchWrite { state in
            try state.record(records)
            return records.map { _ in () }
        }
    }

    public func latestStatus(app: String, deviceID: String) async throws -> (report: StatusReport, receivedAt: Int64)? {
        read { state in state.latest[app]?[deviceID].map { ($0.report, $0.time) } }
    }

    public func latestStatuses(app: String) async throws -> [String: (report: StatusReport, receivedAt: Int64)] {
        read { state in (state.latest[app] ?? [:]).mapValues { ($0.report, $0.time) } }
    }

    public func recentStatuses(deviceID: String) async throws -> [StatusRecord] {
        read { state in
            (state.statusHistory[deviceID] ?? [:]).values.flatMap(\.values).sorted { first, second in
                if first.time != second.time { return first.time > second.time }
                if first.app != second.app { return first.app.utf8.lexicographicallyPrecedes(second.app.utf8) }
                if first.report.revision != second.report.revision { return first.report.revision > second.report.revision }
                return first.report.source.rawValue.utf8.lexicographicallyPrecedes(second.report.source.rawValue.utf8)
            }
        }
    }

    public func statusHistory(app: String) async throws -> [StatusRecord] {
        read { state in state.statusHistory.values.flatMap { $0[app]?.values.map { $0 } ?? [] } }
    }

    // MARK: - Facts, policies, snapshot

    public func deviceInfo(id: String) async throws -> StoredDeviceInfo? { read { $0.deviceInfo[id] } }

    public func allDeviceInfo() async throws -> [String: StoredDeviceInfo] { read { $0.deviceInfo } }

    public func agentPolicies() async throws -> [PolicyScope: AgentPolicy] { read { $0.policies } }

    public func snapshot() async throws -> StoreSnapshot {
        read { $0.snapshot }
    }

    // MARK: - Accounts, API tokens, the audit trail

    public func accounts() async throws -> [StoredAccount] { read { $0.sortedAccounts } }

    public func account(name: String) async throws -> StoredAccount? { read { $0.accounts[name] } }

    public func apiToken(hash: String) async throws -> StoredAPIToken? { read { $0.apiTokens.values.first { $0.hash == hash } } }

    public func apiTokens(account: String?) async throws -> [StoredAPIToken] {
        read { state in
            state.apiTokens.values.filter { account == nil || $0.info.account == account }.sorted {
                ($0.info.createdAt, $0.id) < ($1.info.createdAt, $1.id)
            }
        }
    }

    public func auditRecords(_ query: AuditQuery) async throws -> [AuditRecord] {
        read { state in
            Array(
                state.audit.lazy.filter { record in
                    record.sequence > query.after && query.since.map { record.at >= $0 } ?? true
                        && query.actor.map { record.actor == $0 } ?? true && query.action.map { record.action == $0 } ?? true
                }.prefix(query.limit))
        }
    }
}
