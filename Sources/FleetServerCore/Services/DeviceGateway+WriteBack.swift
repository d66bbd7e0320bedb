import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension DeviceGateway {
    /// Applies a device's merge patch of writable settings at device scope. A patch that leaves
    /// the device's values as they are (`{}`, or the values it already set) commits nothing:
    /// no history entry, no wake-up; the answer is the current document.
    ///
    /// - Throws: 428 without `If-Match`, 400 for a malformed one, 409 when it names a stale revision, 403 naming each key that is not
    ///   `x-writable`, 422 with each validation error the change causes.
    public func patchSettings(app: String, device: Device, ifMatch: String?, patch: JSONObject) async throws -> SettingsDocument {
        guard let ifMatch else {
            throw ServiceError(428, .ifMatchRequired, "send If-Match with the revision the change is based on, e.g. If-Match: \"41\"")
        }
        guard let expected = RevisionTag.revision(ifMatch) else {
            throw ServiceError(400, .badPrecondition, "If-Match must be one strong revision tag like \"41\"")
        }
        // Validation runs outside the write section, on a snapshot that the section checks is
        // still current before it writes (see SerialSection.checkedWrite).
        let written = try await writes.checkedWriteUnlessUnchanged(
            read: { try await self.deviceWriteState(app: app, device: device) },
            check: { state -> JSONObject? in
                guard state.revision == expected else {
                    throw ServiceError(
                        409, .staleRevision,
                        "the settings are at revision \(state.revision), not \(expected); download them, re-apply the change and send it again"
                    )
                }
                let forbidden = state.metadata.forbiddenKeys(in: patch)
                guard forbidden.isEmpty else {
                    throw ServiceError(
                        403, .notWritable, "the device may change only settings marked x-writable",
                        details: forbidden.map {
                            ErrorBody.Detail(pointer: JSONPointer.root.appending($0).description, message: "is not x-writable")
                        })
                }
                var before: [Scope: JSONObject] = [.app: state.layers.app, .device(device.id): state.layers.device]
                for (group, values) in state.layers.groups { before[.group(group)] = values }
                var after = before
                after[.device(device.id)] = try Self.deviceValues(
                    applying: patch, to: state.layers.device, inherited: state.layers, metadata: state.metadata)
                if after[.device(device.id)] == before[.device(device.id)] { return nil }
                let findings = ValueAudit.newFindings(metadata: state.metadata, before: before, after: after, audiences: [.device(device)])
                guard findings.isEmpty else {
                    throw ServiceError(
                        422, .invalidValues, "the change makes the settings invalid",
                        details: findings.map { ErrorBody.Detail(pointer: $0.pointer.description, message: $0.message) })
                }
                return after[.device(device.id)] ?? [:]
            },
            commit: { state, deviceValues in
                let change = ChangeRecord(
                    at: self.wallClock.secondsSinceEpoch(), actor: Self.deviceActor(device), kind: .values,
                    scopes: [
                        ChangeRecord.ScopeChange(scope: .device(device.id), patch: patch, after: deviceValues, masking: state.metadata)
                    ])
                _ = try await self.store.commit(AppWrite(app: app, values: [.device(device.id): deviceValues], change: change))
                await self.notifyChanged(app, scope: .device(device.id))
                let updated = try await self.settings(app: app, device: device)
                self.logger.info(
                    "device changed settings",
                    metadata: [
                        "event": "device-write", "app": "\(app)", "device": "\(device.id)", "revision": "\(updated.revision)",
                        "keys": "\(patch.keys.sorted().joined(separator: ","))",
                    ])
                return updated
            })
        if let written { return written }
        logger.debug(
            "device write changed nothing", metadata: ["event": "device-write-unchanged", "app": "\(app)", "device": "\(device.id)"])
        return try await settings(app: app, device: device)
    }

    /// The device's own values after its write `patch`, which may hold key-path values
    /// (``KeyPathValues``): only the place it changes is kept, so the rest of the setting keeps
    /// following the wider scopes.
    ///
    /// - Throws: 400 `bad-key-path` naming a path that is malformed or does not fit the value.
    static func deviceValues(
        applying patch: JSONObject, to own: JSONObject, inherited layers: ValueLayers, metadata: Metadata
    ) throws(ServiceError) -> JSONObject {
        let inherited = EffectiveSettings(metadata: metadata, app: layers.app, groups: layers.groups, device: [:], deviceID: "").values
        do {
            let after = try KeyPathValues.applying(patch, to: own, inherited: inherited)
            // A key-path value must fit the setting it goes into now (one that stops fitting
            // later, after a change of the fleet's values, is left out and explained).
            var settings = inherited
            for (key, value) in after where !KeyPathValues.isKeyPath(key) { settings[key] = value }
            let unapplied = KeyPathValues.overlay(after, onto: &settings).filter { patch[$0.key] != nil }
            guard unapplied.isEmpty else {
                throw ServiceError(
                    400, .badKeyPath, "a key path does not fit the setting",
                    details: unapplied.values.map { ErrorBody.Detail(pointer: $0.location.description, message: $0.message) })
            }
            return after
        } catch let error as ServiceError {
            throw error
        } catch let error as KeyPathError {
            throw ServiceError(
                400, .badKeyPath, "a key path does not fit the setting",
                details: [ErrorBody.Detail(pointer: error.location.description, message: error.message)])
        } catch {
            throw ServiceError.badRequest("the change cannot be applied: \(error)")  // not thrown with the inherited values at hand
        }
    }

    /// What a device's write is checked against: its revision and value layers (equal states
    /// mean nothing the check depends on has changed), with the metadata of that revision.
    struct DeviceWriteState: Equatable, Sendable {
        let revision: Int64
        let layers: ValueLayers
        let metadata: Metadata

        static func == (lhs: Self, rhs: Self) -> Bool {
            lhs.revision == rhs.revision && lhs.layers == rhs.layers && lhs.metadata.version == rhs.metadata.version
        }
    }

    private func deviceWriteState(app: String, device: Device) async throws -> DeviceWriteState {
        // The device as it is now: one deleted, disabled or stripped of the app meanwhile writes nothing.
        let device = try await recheck(device, app: app)
        let metadata = try await metadata(app: app)
        let (current, layers) = try await self.current(app: app, device: device)
        return DeviceWriteState(revision: current.revision, layers: layers, metadata: metadata)
    }
}
