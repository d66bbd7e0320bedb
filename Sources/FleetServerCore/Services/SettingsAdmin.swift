import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension SettingsAdmin {
    /// Stores a new metadata document for `app`.
    ///
    /// - Throws: 400 for text that is not JSON or names another app; 422 `invalid-metadata` or
    ///   `unsupported-metadata` with each problem; 409 `version-not-increased` unless the version
    ///   is greater than the stored one; 409 `values-invalid` listing every stored value the new
    ///   schema refuses, for which devices — unless `force` (then the devices report the error).
    ///   A new version while a rollout of the app is active is refused with 409
    ///   `rollout-in-progress` unless forced (the rollout's staged values were checked against
    ///   the version stored when it started).
    public func putMetadata(
        app: String, document bytes: [UInt8], force: Bool, actor: String, message: String = ""
    ) async throws -> MetadataPutResult {
        let metadata = try Self.readMetadata(app: app, document: bytes)
        let document = String(decoding: bytes, as: UTF8.self)
        // The stored values are checked against the new version outside the write section;
        // the section writes only if nothing the check read has changed since.
        return try await writes.checkedWrite(
            read: { () async throws -> MetadataWriteState in
                let stored = try await self.store.metadata(app: app)
                guard !force else { return MetadataWriteState(storedVersion: stored?.version, values: [:], audiences: [], rollout: nil) }
                return MetadataWriteState(
                    storedVersion: stored?.version, values: try await self.store.allValues(app: app),
                    audiences: try await self.audiences(of: .app, app: app), rollout: try await self.store.activeRollout(app: app))
            },
            check: { state in
                if let storedVersion = state.storedVersion, storedVersion >= metadata.version {
                    throw ServiceError(
                        409, .versionNotIncreased,
                        "version \(metadata.version) is not greater than the stored version \(storedVersion); a changed document needs a new version"
                    )
                }
                guard !force else { return }
                if let rollout = state.rollout { throw ServiceError.rolloutInProgress(rollout, doing: "store the new version") }
                let findings = ValueAudit.findings(metadata: metadata, values: state.values, audiences: state.audiences)
                guard findings.isEmpty else {
                    throw ServiceError(
                        409, .valuesInvalid,
                        "stored values are not valid under version \(metadata.version); change them first, or force the upload and let the devices report the error",
                        details: findings.map(\.detail))
                }
            },
            commit: { state, _ in
                let change = ChangeRecord(
                    at: self.wallClock.secondsSinceEpoch(), actor: actor, message: message, kind: .metadata,
                    metadataVersion: metadata.version)
                let replaced = try await self.store.replaceMetadata(
                    StoredMetadata(app: app, version: metadata.version, document: document), expectedVersion: state.storedVersion,
                    recording: change)
                guard replaced else {
                    throw ServiceError(
                        409, .versionNotIncreased, "another upload for \(app) was stored at the same time; fetch it and retry")
                }
                await self.notifyChanged(app, scope: .defaults)
                self.logger.notice(
                    "metadata stored",
                    metadata: [
                        "event": "metadata", "app": "\(app)", "version": "\(metadata.version)",
                        "previous_version": "\(state.storedVersion.map { String($0) } ?? "none")", "forced": "\(force)",
                    ])
                return MetadataPutResult(app: app, version: Int64(metadata.version), previousVersion: state.storedVersion.map { Int64($0) })
            })
    }

    /// Reads an uploaded metadata document for `app`.
    ///
    /// - Throws: 400 for text that is not JSON or names another app; 422 `invalid-metadata` or
    ///   `unsupported-metadata` with each problem.
    static func readMetadata(app: String, document bytes: [UInt8]) throws(ServiceError) -> Metadata {
        let json: JSONValue
        do {
            json = try JSONParser.parse(bytes)
        } catch {
            throw ServiceError.badRequest("the metadata is not JSON: \(error)")
        }
        if case .object(let object) = json, case .string(let named)? = object["app"], named != app {
            throw ServiceError(400, .appMismatch, "the document is for app \"\(named)\" but was sent to the path of app \"\(app)\"")
        }
        let metadata: Metadata
        do {
            metadata = try Metadata(json)
        } catch {
            let code: ErrorCode = error.isUnsupported ? .unsupportedMetadata : .invalidMetadata
            let summary = error.isUnsupported ? "the metadata uses what fleetset does not support" : "the metadata is not valid"
            throw ServiceError(
                422, code, summary,
                details: error.problems.map { ErrorBody.Detail(pointer: $0.location.description, message: $0.message) })
        }
        return metadata
    }

    /// What a metadata upload is checked against (whose settings: ids and groups, not the
    /// devices' last-seen times, which change all the time).
    struct MetadataWriteState: Equatable, Sendable {
        let storedVersion: Int?
        let values: [Scope: JSONObject]
        let audiences: [ValueAudit.Audience]
        let rollout: Rollout?
    }

    /// The stored metadata of `app`, or `nil` when it has none.
    public func currentMetadata(app: String) async throws -> Metadata? {
        guard try await store.metadata(app: app) != nil else { return nil }
        return try await metadata(app: app)
    }

    /// What storing `bytes` as `app`'s metadata would do, without storing it.
    ///
    /// - Throws: what ``putMetadata(app:document:force:)`` throws for a document it cannot read.
    public func previewMetadata(app: String, document bytes: [UInt8]) async throws -> MetadataPreview {
        let proposed = try Self.readMetadata(app: app, document: bytes)
        let stored = try await store.metadata(app: app)
        let storedMetadata = stored == nil ? nil : try await metadata(app: app)
        var versionProblem: String?
        if let stored, stored.version >= proposed.version {
            versionProblem = "version \(proposed.version) is not greater than the stored version \(stored.version)"
        }
        let findings = ValueAudit.findings(
            metadata: proposed, values: try await store.allValues(app: app), audiences: try await audiences(of: .app, app: app))
        return MetadataPreview(stored: storedMetadata, proposed: proposed, versionProblem: versionProblem, breaks: findings.map(\.detail))
    }

    /// The values set at one scope, secrets masked.
    ///
    /// - Throws: 400 for a bad scope, 404 for an unknown app or device.
    public func values(app: String, scope named: Scope) async throws -> ScopedValues {
        let metadata = try await metadata(app: app)
        let scope = try await writableScope(named)
        let values = try await store.values(app: app, scope: scope)
        return ScopedValues(app: app, scope: scope.description, values: metadata.masked(values))
    }

    /// Applies a merge patch to the values at one scope, after validating the effective
    /// settings of every device it reaches — and of devices that enroll later.
    ///
    /// - Throws: 404 for an unknown app or device; 422 `invalid-values` with each problem the change causes, naming the devices.
    ///
    /// While a rollout of the app is active, a patch of settings it stages is refused with 409
    /// `rollout-in-progress`, unless `force`: the forced values then go to every device at once,
    /// and (at the rollout's scope) leave the rollout, which is aborted when nothing is left of it.
    ///
    /// - Parameters:
    ///   - actor: who the history records.
    ///   - message: why, for the history.
    ///   - precondition: checked against the scope's values as the write finds them, in the
    ///     write section (the console's "changed since the form was drawn"): what it throws
    ///     refuses the write.
    public func patchValues(
        app: String, scope named: Scope, patch: JSONObject, actor: String, message: String = "", force: Bool = false,
        precondition: (@Sendable (ScopeValuesView) throws -> Void)? = nil
    ) async throws -> ScopedValues {
        _ = try await metadata(app: app)  // 404 for an unknown app
        let scope = try await writableScope(named)
        return try await writeValues(app: app, scope: scope, actor: actor, message: message, force: force) { state in
            try precondition?(
                Self.scopeValuesView(
                    metadata: state.metadata, scope: scope, all: state.values, deviceGroups: state.audiences.first?.groups ?? []))
            return patch
        }
    }

    /// Sets (`value`) or removes (`nil`) the value at a key path inside one setting at a scope
    /// (`PUT`/`DELETE /v1/admin/apps/{app}/values/{keyPath}`): a merge patch of the whole
    /// top-level setting, made from what the scope holds, or, when it holds nothing for that
    /// setting, from what its devices get from the wider scopes (the app's value or the
    /// metadata's default; for a device, its groups too). Checked and recorded as any write.
    ///
    /// - Throws: 400 for a malformed key path or one that does not fit the value (an index out
    ///   of range, a path through a string), 404 `unknown-key` for removing what is not there,
    ///   and what ``patchValues(app:scope:patch:actor:message:force:)`` throws.
    public func setValue(
        app: String, scope named: Scope, keyPath text: String, to value: JSONValue?, actor: String, message: String = "",
        force: Bool = false
    ) async throws -> ScopedValues {
        _ = try await metadata(app: app)
        let scope = try await writableScope(named)
        guard let path = JSONPointer(keyPath: text), let key = path.topLevelKey else {
            throw ServiceError(
                400, .badKeyPath, "a key path is the setting's name, then / and the parts inside it (~1 for a / in a name)")
        }
        return try await writeValues(app: app, scope: scope, actor: actor, message: message, force: force) { state in
            if case .device = scope, path.tokens.count > 1 {
                // The device's own value at the path only (the rest keeps following the fleet);
                // removing it gives the fleet's value there again.
                let own = state.values[scope] ?? [:]
                let held = own.keys.contains { name in
                    KeyPathValues.setting(of: name) == key
                        && (!KeyPathValues.isKeyPath(name)
                            || JSONPointer(name).map { path.tokens.starts(with: $0.tokens) || $0.tokens.starts(with: path.tokens) } == true)
                }
                guard value != nil || held else { throw ServiceError(404, .unknownKey, "\(scope) sets nothing at \(path.keyPath)") }
                return [path.description: value ?? .null]
            }
            let own = state.values[scope]?[key]
            let base = own ?? Self.inheritedValue(key, at: scope, state)
            let holdsKeyPaths =
                state.values[scope]?.keys.contains { KeyPathValues.isKeyPath($0) && KeyPathValues.setting(of: $0) == key } ?? false
            guard path.tokens.count > 1 || value != nil || own != nil || holdsKeyPaths else {
                throw ServiceError(404, .unknownKey, "\(scope) sets no \(key)")
            }
            // A whole setting: what the scope holds is replaced (members it no longer has: null).
            if path.tokens.count == 1 { return [key: value.map { JSONValue.wholeValueMergePatch(from: own, to: $0) } ?? .null] }
            do throws(KeyPathError) {
                let new = try (base ?? .object([:])).setting(value, at: JSONPointer(tokens: Array(path.tokens.dropFirst())))
                // The whole new setting, as a merge patch of what the scope holds (members gone: null).
                return [key: JSONValue.wholeValueMergePatch(from: own, to: new)]
            } catch {
                let missing = error.kind == .missing
                throw ServiceError(
                    missing ? 404 : 400, missing ? .unknownKey : .badKeyPath, "\(key)/\(error.location.keyPath): \(error.message)")
            }
        }
    }

    /// What the devices of `scope` get for `key` from the scopes wider than it.
    private static func inheritedValue(_ key: String, at scope: Scope, _ state: ValuesWriteState) -> JSONValue? {
        var groups: [String: JSONObject] = [:]
        if case .device = scope, let device = state.audiences.first {
            for group in device.groups { groups[group] = state.values[.group(group)] }
        }
        let app = scope == .app ? [:] : state.values[.app] ?? [:]
        return EffectiveSettings(metadata: state.metadata, app: app, groups: groups, device: [:], deviceID: "").values[key]
    }

    /// Writes the merge patch `makePatch` makes from the app's values (read outside the write
    /// section, checked again in it) at `scope`.
    private func writeValues(
        app: String, scope: Scope, actor: String, message: String, force: Bool,
        makePatch: @escaping @Sendable (ValuesWriteState) throws -> JSONObject
    ) async throws -> ScopedValues {
        // Validated outside the write section; written only if nothing checked has changed.
        return try await writes.checkedWrite(
            read: { try await self.rolloutWriteState(app: app, scope: scope) },
            check: { whole -> (values: JSONObject, rollout: Rollout?, patch: JSONObject) in
                let state = whole.values
                let patch = try makePatch(state)
                var after = state.values
                after[scope] = try Self.scopeValues(applying: patch, at: scope, state)
                var findings = ValueAudit.newFindings(
                    metadata: state.metadata, before: state.values, after: after, audiences: state.audiences)
                var rollout = whole.rollout
                if let active = rollout {
                    let overlap = active.keys.intersection(patch.keys.compactMap(KeyPathValues.setting(of:))).sorted()
                    if !overlap.isEmpty {
                        guard force else { throw ServiceError.rolloutInProgress(active, doing: "write them", keys: overlap) }
                        if active.scope == scope { rollout = active.without(keys: overlap, at: self.wallClock.secondsSinceEpoch()) }
                    }
                    // The devices already admitted get the rollout's patch over these values.
                    if let staged = rollout, staged.phase.isActive {
                        findings += ValueAudit.newFindings(
                            metadata: state.metadata, before: staged.staged(state.values), after: staged.staged(after),
                            audiences: state.audiences)
                    }
                }
                guard findings.isEmpty else {
                    throw ServiceError(422, .invalidValues, "the change makes settings invalid", details: findings.map(\.detail))
                }
                return (after[scope] ?? [:], rollout == whole.rollout ? nil : rollout, patch)
            },
            commit: { whole, checked in
                let state = whole.values
                let values = checked.values
                let change = ChangeRecord(
                    at: self.wallClock.secondsSinceEpoch(), actor: actor, message: message, kind: .values,
                    scopes: [ChangeRecord.ScopeChange(scope: scope, patch: checked.patch, after: values, masking: state.metadata)])
                let number = try await self.store.commit(
                    AppWrite(app: app, values: [scope: values], rollout: checked.rollout, change: change))
                await self.notifyChanged(app, scope: scope)
                if checked.rollout != nil { await self.notifyChanged(app, scope: .app) }
                self.logger.notice(
                    "values changed",
                    metadata: [
                        "event": "values", "app": "\(app)", "scope": "\(scope)", "revision": "\(number)", "actor": "\(actor)",
                        "keys": "\(SettingsValues.changedKeys(state.values[scope] ?? [:], values).joined(separator: ","))",
                        "forced": "\(force)",
                    ])
                return ScopedValues(app: app, scope: scope.description, values: state.metadata.masked(values))
            })
    }

    /// A scope's values after an admin's merge patch. A device's own values may hold key-path
    /// values (``KeyPathValues``, applied as a device's write is); other scopes hold whole
    /// settings only.
    ///
    /// - Throws: 400 `bad-key-path` for a key-path value at another scope, or one that does not fit.
    static func scopeValues(applying patch: JSONObject, at scope: Scope, _ state: ValuesWriteState) throws(ServiceError) -> JSONObject {
        let own = state.values[scope] ?? [:]
        guard case .device = scope else {
            try refuseKeyPaths(in: patch, at: scope)
            return SettingsValues.merged(own, patch)
        }
        var layers = ValueLayers(app: state.values[.app] ?? [:])
        for group in state.audiences.first?.groups ?? [] { layers.groups[group] = state.values[.group(group)] }
        return try DeviceGateway.deviceValues(applying: patch, to: own, inherited: layers, metadata: state.metadata)
    }

    /// Refuses key-path members (``KeyPathValues``) in what is written at `scope`, which is not
    /// a device's.
    ///
    /// - Throws: 400 `bad-key-path` naming each.
    static func refuseKeyPaths(in values: JSONObject, at scope: Scope) throws(ServiceError) {
        let keyPaths = values.keys.filter(KeyPathValues.isKeyPath).sorted()
        guard keyPaths.isEmpty else {
            throw ServiceError(
                400, .badKeyPath, "only a device's own values hold values at a key path; set the whole setting at \(scope)",
                details: keyPaths.map { ErrorBody.Detail(pointer: JSONPointer.root.appending($0).description, message: "is a key path") })
        }
    }
}
