import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging

/// What a device says of itself (its facts) and what the server asks of its agent (the agent
/// policy, and when to poll next while the server sheds load).
extension SettingsService {
    // MARK: - Device facts

    /// Applies a device's report of its facts (`PATCH /v1/device/info`, a merge patch of the
    /// facts that changed; see ``DeviceInfo``). Returns the facts as stored.
    ///
    /// - Throws: 400 naming the first fact that is unknown, of the wrong type, too long, or of
    ///   an app the device is not given; 413 `too-many-facts` when the result would pass the caps.
    public func patchDeviceInfo(device: Device, patch body: JSONValue) async throws -> JSONObject {
        let patch: JSONObject
        do {
            patch = try DeviceInfo.checkPatch(body, apps: device.apps)
        } catch {
            throw ServiceError.badRequest("\(error.location.displayText): \(error.message)")
        }
        let stored: JSONObject?
        do {
            stored = try await store.updateDeviceInfo(id: device.id, at: wallClock.secondsSinceEpoch()) { info in
                try DeviceInfo.applying(patch, to: info)
            }
        } catch let error as DocumentError {
            throw ServiceError(413, .tooManyFacts, "\(error.location.displayText): \(error.message)")
        }
        guard let stored else { throw ServiceError.unknownDevice(device.id) }
        guard !patch.isEmpty else { return stored }  // nothing reported: nothing to log or show
        logger.info(
            "device facts reported",
            metadata: [
                "event": "device-info", "device": "\(device.id)",
                "facts": "\(DeviceInfo.facts(patch).map(\.name).joined(separator: ","))",
            ])
        events.publish(.deviceChanged(device: device.id))
        return stored
    }

    /// The devices whose facts match every filter (all of them with none), each with its apps,
    /// groups, facts, whether it is disabled, and when it was seen.
    public func allDevices(matching filters: [DeviceInfoFilter] = []) async throws -> DeviceRecordList {
        async let devices = store.devices()
        async let facts = store.allDeviceInfo()
        let (all, info) = try await (devices, facts)
        return DeviceRecordList(
            devices: all.compactMap { device in
                let stored = info[device.id]
                let facts = DeviceInfo.visible(stored?.info ?? [:], apps: device.apps)
                guard filters.allSatisfy({ $0.matches(facts) }) else { return nil }
                return Self.record(device, info: stored)
            })
    }

    /// One device, with its facts.
    ///
    /// - Throws: 404 `unknown-device`.
    public func device(id: String) async throws -> DeviceRecord {
        guard let device = try await store.device(id: id) else { throw ServiceError.unknownDevice(id) }
        return Self.record(device, info: try await store.deviceInfo(id: id))
    }

    /// The device's facts and when they last changed (`nil` before its first report).
    public func deviceFacts(id: String) async throws -> StoredDeviceInfo? {
        try await store.deviceInfo(id: id)
    }

    static func record(_ device: Device, info: StoredDeviceInfo?) -> DeviceRecord {
        DeviceRecord(
            id: device.id, apps: device.apps, groups: device.groups, disabled: device.disabled, enrolledAt: device.enrolledAt,
            lastSeenAt: device.lastSeenAt, tokenRotationRequested: device.rotationRequested,
            info: DeviceInfo.visible(info?.info ?? [:], apps: device.apps), infoUpdatedAt: info?.updatedAt)
    }

    // MARK: - Agent policies

    /// Every scope's agent policy, from memory once read (a change invalidates it, here and,
    /// through the change feed, on the other instances).
    func agentPolicies() async throws -> [PolicyScope: AgentPolicy] {
        if let known = cache.policies { return known }
        let epoch = cache.policyEpoch
        let policies = try await store.agentPolicies()
        cache.record(policies: policies, readAt: epoch)
        return policies
    }

    /// What the server asks of `device`'s agent, for each of its apps.
    public func devicePolicy(_ device: Device) async throws -> DevicePolicy {
        DevicePolicy.resolve(apps: device.apps, groups: device.groups, deviceID: device.id, policies: try await agentPolicies())
    }

    /// The tag of `device`'s policy (``DevicePolicy/tag``), which every settings answer
    /// carries: from memory for a device with no policy at its own scope (the tag then depends
    /// only on its apps and groups, which many devices share), resolved anew for the others.
    func devicePolicyTag(_ device: Device) async throws -> String {
        // The policies, the device's own-scope check and the kept tag all of one epoch: a
        // change meanwhile makes the lookup miss, and the tag is resolved from `policies`.
        let epoch = cache.policyEpoch
        let policies = try await agentPolicies()
        if policies.isEmpty { return "0" }
        let resolve = { DevicePolicy.resolve(apps: device.apps, groups: device.groups, deviceID: device.id, policies: policies).tag }
        if policies[.device(device.id)] != nil { return resolve() }
        let key = ServingCache.PolicyTagKey(apps: device.apps, groups: device.groups)
        if let known = cache.policyTag(key, at: epoch) { return known }
        let tag = resolve()
        cache.record(policyTag: tag, for: key, readAt: epoch)
        return tag
    }

    /// The policy of the device with `id` (`GET /v1/admin/devices/{id}/policy`).
    ///
    /// - Throws: 404 `unknown-device`.
    public func devicePolicy(id: String) async throws -> DevicePolicy {
        guard let device = try await store.device(id: id) else { throw ServiceError.unknownDevice(id) }
        return try await devicePolicy(device)
    }

    /// Every scope's policy, in scope order (`GET /v1/admin/policies`).
    public func policyList() async throws -> PolicyList {
        PolicyList(policies: try await agentPolicies().sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// Changes the policy at the scope named `scopeText` by a merge patch (`null` removes a
    /// key; a policy left empty is removed), and wakes the long-polls of the devices it reaches
    /// so that each learns of it at once. Returns the scope's new policy.
    ///
    /// - Throws: 400 for a malformed scope or patch, 404 for a device that does not exist.
    public func patchPolicy(scope scopeText: String, patch body: JSONValue) async throws -> AgentPolicy {
        guard let scope = PolicyScope(scopeText) else {
            throw ServiceError.badParameter("a policy scope is app:APP, group:NAME or device:ID")
        }
        switch scope {
        case .app(let app) where !Metadata.isValidAppID(app):
            throw ServiceError.badParameter("an app id has 1 to 64 characters of a-z 0-9 . _ -, starting with a letter or digit")
        case .group(let name) where !Scope.isValidName(name):
            throw ServiceError.badParameter("a group name has 1 to 128 characters and no control characters")
        case .device(let id):
            guard try await store.device(id: id) != nil else { throw ServiceError.unknownDevice(id) }
        default:
            break
        }
        guard case .object(let patch) = body else { throw ServiceError.badRequest("the policy patch must be a JSON object") }
        let policy = try await writes.run {
            var policy = try await self.store.agentPolicies()[scope] ?? AgentPolicy()
            for (keyText, value) in patch {
                guard let key = AgentPolicy.Key(rawValue: keyText) else {
                    throw ServiceError.badRequest(
                        "/\(keyText): is not a policy key (\(AgentPolicy.Key.allCases.map(\.rawValue).joined(separator: ", ")))")
                }
                do throws(DocumentError) {
                    try policy.set(key, to: value, at: JSONPointer.root.appending(keyText))
                } catch {
                    throw ServiceError.badRequest("\(error.location.displayText): \(error.message)")
                }
            }
            try await self.store.setAgentPolicy(policy, scope: scope)
            return policy
        }
        await notifier.policyChanged(scope)
        logger.notice(
            "agent policy changed",
            metadata: ["event": "policy", "scope": "\(scope)", "policy": "\(policy.isEmpty ? "(none)" : policy.summary)"])
        return policy
    }
}
