import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension FleetDirectory {
    /// Makes an enrollment token for the apps and groups it names; only its hash is stored.
    public func makeEnrollmentToken(_ request: EnrollmentTokenRequest) async throws -> EnrollmentTokenResponse {
        // Held to the wire's rules (at least one app, the lifetimes and use counts allowed) however
        // it was made: the API decodes it, the console fills it in from a form.
        let request = try ServiceError.decode(request.json, as: EnrollmentTokenRequest.init(json:))
        try Self.checkNames(apps: request.apps, groups: request.groups)
        let defined = Set(try await store.groupDefinitions().map(\.name))
        if let taken = request.groups.first(where: defined.contains) {
            throw ServiceError(409, .badGroup, "/groups: \(GroupRefusal.definedByQuery(group: taken))")
        }
        let token = Credentials.generate(.enrollment)
        let expiresAt = wallClock.secondsSinceEpoch() + request.expiresInSeconds
        let id = Credentials.identifier(prefix: "et-")
        try await store.addEnrollmentToken(
            EnrollmentTokenRecord(
                hash: Credentials.hash(token), id: id, expiresAt: expiresAt, usesLeft: Int(request.uses), apps: request.apps,
                groups: request.groups))
        logger.notice(
            "enrollment token made",
            metadata: [
                "event": "enrollment-token", "id": "\(id)", "apps": "\(request.apps.joined(separator: ","))",
                "groups": "\(request.groups.joined(separator: ","))", "uses": "\(request.uses)",
                "expires": "\(Timestamp.format(expiresAt))",
            ])
        return EnrollmentTokenResponse(
            id: id, enrollmentToken: token, expiresAt: expiresAt, uses: request.uses, apps: request.apps, groups: request.groups)
    }

    /// The enrollment tokens that can still be used (by id; the tokens themselves are never
    /// shown again).
    public func enrollmentTokens() async throws -> EnrollmentTokenList {
        let now = wallClock.secondsSinceEpoch()
        return EnrollmentTokenList(
            tokens: try await store.enrollmentTokens().filter { $0.expiresAt > now && $0.usesLeft > 0 }.map { token in
                EnrollmentTokenInfo(
                    id: token.id, apps: token.apps, groups: token.groups, usesLeft: Int64(token.usesLeft), expiresAt: token.expiresAt)
            })
    }

    /// Revokes an enrollment token: no device can enroll with it any more (devices enrolled
    /// with it stay).
    ///
    /// - Throws: 404 `unknown-enrollment-token`.
    public func revokeEnrollmentToken(id: String) async throws {
        guard try await store.deleteEnrollmentToken(id: id) else {
            throw ServiceError(404, .unknownEnrollmentToken, "no enrollment token has the id \"\(id)\"")
        }
        logger.notice("enrollment token revoked", metadata: ["event": "enrollment-token-revoked", "id": "\(id)"])
    }

    /// Changes a device's apps or groups, disables or enables it, or asks it to rotate its
    /// token. Its waiting long-polls are woken to check it again at once: a disabled device's
    /// are answered 401, and those of an app taken away 404.
    ///
    /// Moving a device between groups or apps is not checked against the values it will then
    /// get: it gets them as any device of those groups would, and reports what it makes of them.
    ///
    /// - Throws: 400 for a malformed change, 404 `unknown-device`.
    public func updateDevice(id: String, _ update: DeviceUpdate) async throws -> DeviceRecord {
        try Self.checkNames(apps: update.apps ?? [], groups: update.groups ?? [])
        let change = DeviceChange(
            apps: update.apps, groups: update.groups, disabled: update.disabled, rotationRequested: update.rotateToken)
        let updated: Device?
        do {
            updated = try await store.updateDevice(id: id, change, at: now)
        } catch let refusal as GroupRefusal {
            throw ServiceError(409, .badGroup, "/groups: \(refusal)")
        }
        guard let device = updated else { throw ServiceError.unknownDevice(id) }
        await notifyDeviceChanged(id)
        var changed: [String] = []
        if let apps = update.apps { changed.append("apps=\(apps.joined(separator: ","))") }
        if let groups = update.groups { changed.append("groups=\(groups.joined(separator: ","))") }
        if let disabled = update.disabled { changed.append(disabled ? "disabled" : "enabled") }
        if update.rotateToken == true { changed.append("token rotation requested") }
        logger.notice("device changed", metadata: ["event": "device", "device": "\(id)", "change": "\(changed.joined(separator: " "))"])
        return Self.record(device, info: try await store.deviceInfo(id: id))
    }

    /// Deletes a device: its token stops working at once (waiting long-polls are answered 401),
    /// and its device-scope values, revisions and reports go. To bring it back, enroll it again
    /// with a new enrollment token (see docs/operators/agent.md, "Re-enrolling a revoked device").
    ///
    /// - Throws: 404 `unknown-device`.
    public func deleteDevice(id: String) async throws {
        guard try await store.deleteDevice(id: id, at: now) else { throw ServiceError.unknownDevice(id) }
        cache.invalidatePolicies()  // its device-scope policy went with it
        await notifyDeviceChanged(id)
        logger.notice("device deleted", metadata: ["event": "device-deleted", "device": "\(id)"])
    }

    /// App ids as metadata has them; group names as scopes have them.
    private static func checkNames(apps: [String], groups: [String]) throws(ServiceError) {
        for (index, app) in apps.enumerated() where !Metadata.isValidAppID(app) {
            throw ServiceError.badRequest(
                "/apps/\(index): an app id has 1 to 64 characters of a-z 0-9 . _ -, starting with a letter or digit")
        }
        for (index, group) in groups.enumerated() where !Scope.isValidName(group) {
            throw ServiceError.badRequest("/groups/\(index): a group name has 1 to 128 characters and no control characters")
        }
    }

    /// The devices whose facts match every filter (all of them with none), each with its apps,
    /// groups, facts, whether it is disabled, and when it was seen.
    public func allDevices(matching filters: [DeviceInfoFilter] = [], visibleTo caller: Caller? = nil) async throws -> DeviceRecordList {
        async let devices = store.devices()
        async let facts = store.allDeviceInfo()
        let (all, info) = try await (devices, facts)
        return DeviceRecordList(
            devices: all.compactMap { device in
                let stored = info[device.id]
                let facts = DeviceInfo.visible(stored?.info ?? [:], apps: device.apps)
                guard filters.allSatisfy({ $0.matches(facts) }), caller.map({ $0.sees(device) }) ?? true else { return nil }
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

    /// The policy of the device with `id` (`GET /v1/admin/devices/{id}/policy`).
    ///
    /// - Throws: 404 `unknown-device`.
    public func devicePolicy(id: String) async throws -> DevicePolicy {
        guard let device = try await store.device(id: id) else { throw ServiceError.unknownDevice(id) }
        return try await policy(of: device)
    }

    /// Every scope's policy, in scope order (`GET /v1/admin/policies`).
    public func policyList(visibleTo caller: Caller? = nil) async throws -> PolicyList {
        var policies = try await agentPolicies()
        if let caller, !caller.scope.isEverything {
            let devices = Dictionary(uniqueKeysWithValues: try await store.devices().map { ($0.id, $0) })
            policies = policies.filter { caller.sees($0.key, devices: devices) }
        }
        return PolicyList(policies: policies.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
    }

    /// Changes the policy at the scope named `scopeText` by a merge patch (`null` removes a
    /// key; a policy left empty is removed), and wakes the long-polls of the devices it reaches
    /// so that each learns of it at once. Returns the scope's new policy.
    ///
    /// - Throws: 400 for a malformed scope or patch, 404 for a device that does not exist.
    public func patchPolicy(scope: PolicyScope, patch: JSONObject) async throws -> AgentPolicy {
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
