import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol

/// An app's fleet settings on this device: the files `fleetsetd` keeps in
/// `<stateDirectory>/apps/<app>/` and the app's inbox `<inboxDirectory>/<app>/`.
///
/// Reading needs read access to `settings.json` (the app's `readers` group); changing settings,
/// acknowledging and asking for a sync need the app's `writers` (see the agent's configuration).
/// Nothing here talks to the network: the agent does that.
///
/// ```swift
/// let kiosk = FleetApp("kiosk")
/// let settings = try kiosk.settings()
/// for await change in kiosk.changes(after: settings.revision) { reload(change.settings, change.changedKeys) }
/// ```
public struct FleetApp: Sendable, Hashable {
    /// The app's id.
    public let id: String
    /// Where the agent keeps settings (`stateDirectory` in `fleetsetd.json`).
    public let stateDirectory: String
    /// The inbox root (`inboxDirectory` in `fleetsetd.json`).
    public let inboxDirectory: String

    /// The app `id`, in the agent's default folders unless told otherwise.
    public init(_ id: String, stateDirectory: String = "/var/lib/fleetset", inboxDirectory: String = "/var/spool/fleetset") {
        self.id = id
        self.stateDirectory = stateDirectory
        self.inboxDirectory = inboxDirectory
    }

    var layout: DeviceLayout { DeviceLayout(stateDirectory: stateDirectory, inboxDirectory: inboxDirectory) }

    // MARK: - Holding updates

    /// Runs `body` while holding the app's update lock (shared): the agent applies no new
    /// settings meanwhile; they wait, and `fleetset status` says so. If the agent is applying
    /// right now, this waits until it is done (polling every `retry`) before `body` starts.
    ///
    /// Hold it for the busy stretches only (a transaction, a video to its end): a revision waits
    /// as long as any holder keeps it. The kernel lets go of it if the app dies.
    ///
    /// ```swift
    /// try await kiosk.holdUpdates { try await checkout.finish() }
    /// ```
    ///
    /// - Throws: ``FleetSettingsError/updateLock(app:reason:)`` when the lock file cannot be
    ///   used (the agent makes it at start: `<stateDirectory>/apps/<app>/updates.lock`); what
    ///   `body` throws; `CancellationError` when cancelled while waiting.
    public func holdUpdates<T>(retry: Duration = .milliseconds(100), _ body: () async throws -> T) async throws -> T {
        let lock = UpdateLock(layout: layout, app: id)
        while true {
            let taken: Bool
            do {
                taken = try lock.tryShared()
            } catch {
                throw FleetSettingsError.updateLock(app: id, reason: "\(error)")
            }
            if taken { break }
            try await Task.sleep(for: retry)
        }
        defer { lock.release() }
        return try await body()
    }

    // MARK: - Reading

    /// The settings in `settings.json` now (the previous generation if the current file is
    /// unusable, as the agent serves it).
    ///
    /// - Throws: ``FleetSettingsError/noSettings(app:path:reason:)`` when there are none yet
    ///   (the device has not synced) or they cannot be read.
    public func settings() throws(FleetSettingsError) -> AppSettings {
        let file = layout.settingsFile(id)
        let found = SettingsOnDisk.load(file, app: id)
        guard let settings = found.settings else {
            throw FleetSettingsError.noSettings(
                app: id, path: file.path,
                reason: found.problems.isEmpty ? "the device has not received them yet" : found.problems.joined(separator: "; "))
        }
        return AppSettings(settings)
    }

    /// The metadata the settings in `settings.json` were validated with.
    func metadata(for settings: AppSettings) throws(FleetSettingsError) -> Metadata {
        guard let metadata = MetadataOnDisk.load(layout.metadataFile(id), version: settings.schemaVersion) else {
            throw FleetSettingsError.noSettings(
                app: id, path: layout.metadataFile(id).path, reason: "no metadata of schema version \(settings.schemaVersion) on disk")
        }
        return metadata
    }

    /// The keys of the settings whose values are or hold a secret (`x-secret` at the setting or
    /// anywhere inside it, such as a list item's password) in the metadata of `settings`; every
    /// key when that metadata cannot be read (so nothing secret is ever shown by mistake).
    public func secretKeys(of settings: AppSettings) -> Set<String> {
        guard let metadata = try? metadata(for: settings) else { return Set(settings.keys) }
        return metadata.keysHoldingSecrets(in: settings.values)
    }

    /// The values of `settings` with every secret replaced by `********`, at any depth; every
    /// value masked when the metadata cannot be read.
    public func maskedValues(of settings: AppSettings) -> JSONObject {
        guard let metadata = try? metadata(for: settings) else {
            var masked = settings.values
            for key in settings.keys { masked[key] = SettingsValues.mask }
            return masked
        }
        return metadata.masked(settings.values)
    }

    // MARK: - Changing

    /// A mutable copy of the settings the device may change (`x-writable`), to pass to
    /// ``update(_:)`` once changed.
    public func writableSettings() throws(FleetSettingsError) -> WritableSettings {
        let settings = try settings()
        let metadata = try metadata(for: settings)
        var values = JSONObject()
        for key in metadata.settingKeys where metadata.writableKeys.contains(key) { values[key] = settings.values[key] ?? .null }
        return WritableSettings(revision: settings.revision, original: values)
    }

    /// Asks the agent to change the settings changed in `writable`. The change is checked here
    /// first (the keys exist and are writable, the values fit the schema) and then left in the
    /// inbox, where it survives restarts until the agent has queued it.
    ///
    /// - Returns: the request, whose outcome can be awaited.
    /// - Throws: ``FleetSettingsError/refused(app:problems:)`` for a change that cannot be
    ///   made, ``FleetSettingsError/nothingChanged(app:)``, or a file error.
    public func update(_ writable: WritableSettings) throws(FleetSettingsError) -> ChangeRequest {
        let changes = writable.changes
        guard !changes.isEmpty else { throw FleetSettingsError.nothingChanged(app: id) }
        return try submit(changes)
    }

    /// Asks the agent to set `values` (a merge patch of writable settings: `null` removes the
    /// device's own value), checked here first as ``update(_:)`` does.
    public func submit(_ values: JSONObject) throws(FleetSettingsError) -> ChangeRequest {
        let settings = try settings()
        return try submit(values, checkedAgainst: settings.values, metadata: try metadata(for: settings))
    }

    /// ``submit(_:)`` for a caller that has read the settings and their metadata already (the
    /// CLI, which parsed the values with it).
    package func submit(_ values: JSONObject, checkedAgainst current: JSONObject, metadata: Metadata) throws(FleetSettingsError)
        -> ChangeRequest
    {
        let problems = metadata.problems(ofChange: values, to: current)
        guard problems.isEmpty else { throw FleetSettingsError.refused(app: id, problems: problems.map(\.description)) }
        let request = InboxRequest.set(values)
        let size = request.json.serialized().utf8.count
        guard size <= InboxRequest.maximumFileSize, values.count <= InboxRequest.maximumKeys else {
            throw FleetSettingsError.refused(
                app: id,
                problems: [
                    "the change is \(size) bytes in \(values.count) settings; a request may have \(InboxRequest.maximumFileSize) bytes and \(InboxRequest.maximumKeys) settings"
                ])
        }
        return ChangeRequest(app: self, id: try leave(request))
    }

    /// Tells the server, through the agent, what the app made of `revision`.
    public func acknowledge(revision: Int64, state: AcknowledgementState, message: String = "") throws(FleetSettingsError) {
        let protocolState: StatusReport.State =
            switch state {
            case .applied: .applied
            case .error: .error
            case .unsupported: .unsupported
            }
        guard message.unicodeScalars.count <= StatusReport.maximumMessageLength else {
            throw FleetSettingsError.refused(
                app: id, problems: ["the message is longer than \(StatusReport.maximumMessageLength) characters"])
        }
        try leave(.ack(revision: revision, state: protocolState, message: message))
    }

    /// Sets the app's own facts about the device (its version, for one), which the agent
    /// reports to the server as `apps.<app>.<name>` (see `FleetProtocol.DeviceInfo`); `nil`
    /// removes one. Names have 1 to 64 characters of `A-Z a-z 0-9 _ -`, values at most 256
    /// characters; an app has at most 32 facts. Every admin sees them: never put a secret in one.
    ///
    /// - Throws: ``FleetSettingsError/refused(app:problems:)`` naming each bad fact;
    ///   ``FleetSettingsError/inbox(app:reason:)`` when the request cannot be left.
    public func setDeviceInfo(_ facts: [String: String?]) throws(FleetSettingsError) {
        var object = JSONObject()
        for (name, value) in facts { object[name] = value.map(JSONValue.string) ?? .null }
        do {
            _ = try InboxRequest(json: ["request": "facts", "facts": .object(object)])
        } catch {
            throw FleetSettingsError.refused(app: id, problems: [error.description])
        }
        try leave(.facts(object))
    }

    /// Asks the agent to contact the server for this app now.
    public func requestSync() throws(FleetSettingsError) {
        try leave(.sync)
    }

    @discardableResult
    private func leave(_ request: InboxRequest) throws(FleetSettingsError) -> String {
        do {
            return try request.submit(to: layout.inboxDirectory(id))
        } catch {
            throw FleetSettingsError.inbox(app: id, reason: "\(error)")
        }
    }

    /// Where the request `id` stands now. A superseded change is followed to the one that
    /// carried its keys on: ``ChangeOutcome/superseded(by:outcome:)`` says which, and what became
    /// of it.
    public func outcome(ofRequest id: String) -> ChangeOutcome {
        guard let journal = try? ChangeJournal.load(layout.changesFile(self.id)) else { return .pending }
        var current = id
        var supersededBy: String?
        // What became of `current`, said of the change asked about.
        func reported(_ outcome: ChangeOutcome) -> ChangeOutcome {
            supersededBy.map { .superseded(by: $0, outcome: outcome) } ?? outcome
        }
        for _ in 0..<ChangeJournal.endedCapacity {
            switch journal.lookup(current) {
            case .queued: return reported(.pending)
            case .unknown:
                // Still in the inbox, or taken and no longer remembered (or refused by the inbox).
                let waiting = (try? FileSystem.status(of: "\(layout.inboxDirectory(self.id))/\(current).json")) != nil
                return reported(waiting ? .pending : .unknown)
            case .ended(let outcome):
                switch outcome.state {
                case .applied: return reported(.applied(revision: outcome.revision ?? 0))
                case .refused: return reported(.refused(outcome.message))
                case .superseded:
                    guard let next = outcome.supersededBy else { return reported(.pending) }
                    supersededBy = next
                    current = next
                }
            }
        }
        return reported(.pending)
    }
}

/// What an app made of a revision.
public enum AcknowledgementState: String, Sendable, CaseIterable {
    /// The app uses the revision.
    case applied
    /// The app could not use it; say why in the message.
    case error
    /// The revision asks for something the app cannot do.
    case unsupported
}

/// Why settings could not be read or changed.
public enum FleetSettingsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// There are no usable settings on disk.
    case noSettings(app: String, path: String, reason: String)
    /// The setting is not in this revision.
    case missingSetting(app: String, key: String, revision: Int64)
    /// The setting holds another type of value.
    case wrongType(app: String, key: String, expected: String, found: String)
    /// The change cannot be made: each problem names the setting.
    case refused(app: String, problems: [String])
    /// ``FleetApp/update(_:)`` was given no change.
    case nothingChanged(app: String)
    /// The request could not be left in the inbox.
    case inbox(app: String, reason: String)
    /// The update lock cannot be used (the agent has not made it yet, or it cannot be read).
    case updateLock(app: String, reason: String)

    public var description: String {
        switch self {
        case .noSettings(let app, let path, let reason): "\(app): no settings at \(path): \(reason)"
        case .missingSetting(let app, let key, let revision): "\(app): no setting \"\(key)\" in revision \(revision)"
        case .wrongType(let app, let key, let expected, let found): "\(app): setting \"\(key)\" must be \(expected), but it is \(found)"
        case .refused(let app, let problems): "\(app): the change cannot be made: \(problems.joined(separator: "; "))"
        case .nothingChanged(let app): "\(app): nothing was changed"
        case .inbox(let app, let reason): "\(app): cannot leave the request in the inbox: \(reason)"
        case .updateLock(let app, let reason): "\(app): cannot hold the update lock: \(reason)"
        }
    }
}
