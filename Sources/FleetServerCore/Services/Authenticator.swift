import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension Authenticator {
    /// Who is calling.
    public enum Principal: Sendable, Hashable {
        /// An account, with the credential it used.
        case account(Caller)
        case device(Device)
    }

    /// The account the admin token file acts as: made when the server first starts on a store
    /// without accounts (and by `fleetset-server accounts restore-owner`).
    public static let bootstrapOwner = "owner"

    /// How stale an API token's last use may get before a request writes it again: 60 s.
    public static let lastUsedResolution: Int64 = 60

    /// How stale a device's `lastSeenAt` may get before a request writes it again: 60 s. Keeps
    /// the hot path (a 304 long-poll) free of write transactions.
    public static let lastSeenResolution: Int64 = 60

    /// The caller of a request with this `Authorization` header value, sent from `address`:
    /// an account (the admin token file's, or an API token's) or a device.
    ///
    /// - Throws: 401 `unauthenticated` for a missing, malformed, unknown, expired or revoked
    ///   token, or one whose account is disabled; 401 `device-disabled` for a disabled device.
    public func authenticate(authorization: String?, from address: String = "-") async throws -> Principal {
        let hash = try Self.tokenHash(authorization)
        if Credentials.constantTimeEquals(hash, adminTokenHash) {
            // A store from before accounts gets its bootstrap owner at the first use of the token.
            if try await store.account(name: Self.bootstrapOwner) == nil { try await AccountService(context: context).bootstrap() }
            let owner = try await enabledAccount(Self.bootstrapOwner, credential: "the admin token file")
            return .account(Caller(account: owner, credential: .adminTokenFile))
        }
        if let known = knownPrincipal(tokenHash: hash) { return known }
        let isAPIToken = Self.bearerToken(authorization)?.hasPrefix(Credentials.Kind.api.rawValue) == true
        if !isAPIToken, var device = try await device(tokenHash: hash) {
            guard !device.disabled else { throw ServiceError.deviceDisabled }
            if device.pendingTokenHash == hash {
                // The first use of a rotated token: from now on the old one is refused.
                device = try await store.promotePendingToken(deviceID: device.id, hash: hash) ?? device
                await notifyDeviceChanged(device.id)
                logger.notice("device token rotated", metadata: ["event": "token-rotated", "device": "\(device.id)"])
            }
            let now = wallClock.secondsSinceEpoch()
            if !Self.seenLately(device, now: now) {
                try await seenWrites.submit(DeviceSeen(deviceID: device.id, time: now))
                cache.touch(deviceID: device.id, at: now)
                device.lastSeenAt = now
            }
            return .device(device)
        }
        guard let token = try await store.apiToken(hash: hash) else {
            throw ServiceError(401, .unauthenticated, "the bearer token is not one this server issued")
        }
        let now = wallClock.secondsSinceEpoch()
        let whose = ServiceError.RefusedCaller(account: token.info.account, credential: "token \(token.id)")
        guard !token.info.revoked else {
            var refused = ServiceError(401, .unauthenticated, "API token \(token.id) was revoked")
            refused.refusedCaller = whose
            throw refused
        }
        guard now < token.info.expiresAt else {
            var refused = ServiceError(401, .unauthenticated, "API token \(token.id) expired at \(Timestamp.format(token.info.expiresAt))")
            refused.refusedCaller = whose
            throw refused
        }
        let account: Account
        do {
            account = try await enabledAccount(token.info.account, credential: "API token \(token.id)")
        } catch var refused as ServiceError {
            refused.refusedCaller = whose
            throw refused
        }
        if now - (token.info.lastUsedAt ?? .min / 2) >= Self.lastUsedResolution {
            // Best effort: a request is not refused because its token's last use was not written.
            _ = try? await store.changeAPIToken(id: token.id) { stored in
                var used = stored
                used.info.lastUsedAt = now
                used.info.lastUsedFrom = address
                return used
            }
        }
        return .account(Caller(account: account, credential: .apiToken(id: token.id)))
    }

    /// The account named `name`, which must exist and be enabled.
    ///
    /// - Throws: 401 `unauthenticated` naming the credential.
    private func enabledAccount(_ name: String, credential: String) async throws -> Account {
        guard let stored = try await store.account(name: name) else {
            throw ServiceError(401, .unauthenticated, "\(credential) acts as account \(name), which does not exist")
        }
        guard !stored.account.disabled else {
            throw ServiceError(401, .unauthenticated, "\(credential) acts as account \(name), which is disabled")
        }
        return stored.account
    }

    /// The caller of a request with this `Authorization` header value when that needs nothing
    /// but memory: a known, enabled device using its current token and seen lately. `nil` when
    /// ``authenticate(authorization:from:)`` has more to do (an account's token is always checked
    /// against the store: a disabled account or a revoked token is refused on every instance at once).
    ///
    /// Synchronous on purpose: most requests of a fleet end here, and an asynchronous call would
    /// take its frame from the task's stack, which keeps the memory for the connection's life.
    ///
    /// - Throws: 401 `unauthenticated` for a missing or malformed bearer token.
    public func knownPrincipal(authorization: String?) throws(ServiceError) -> Principal? {
        knownPrincipal(tokenHash: try Self.tokenHash(authorization))
    }

    private func knownPrincipal(tokenHash hash: String) -> Principal? {
        guard let device = cache.device(tokenHash: hash), device.tokenHash == hash, !device.disabled else { return nil }
        let now = wallClock.secondsSinceEpoch()
        guard Self.seenLately(device, now: now) else { return nil }
        return .device(device)
    }

    /// Whether `token` is the admin token file's (the console's sign-in as the bootstrap owner).
    public func isAdminToken(_ token: String) -> Bool {
        Credentials.constantTimeEquals(Credentials.hash(token), adminTokenHash)
    }

    /// Whether the device's last-seen time is recent enough that a request need not record it.
    private static func seenLately(_ device: Device, now: Int64) -> Bool {
        now - (device.lastSeenAt ?? .min / 2) < lastSeenResolution
    }

    private static func tokenHash(_ authorization: String?) throws(ServiceError) -> String {
        guard let token = bearerToken(authorization) else {
            throw ServiceError(401, .unauthenticated, "send the device or admin token as \"Authorization: Bearer <token>\"")
        }
        return Credentials.hash(token)
    }

    /// The device whose token or pending token hashes to `tokenHash`: from memory, or read
    /// once from the store.
    private func device(tokenHash: String) async throws -> Device? {
        if let known = cache.device(tokenHash: tokenHash), known.tokenHash == tokenHash || known.pendingTokenHash == tokenHash {
            return known
        }
        let epoch = cache.epoch
        guard let stored = try await store.device(tokenHash: tokenHash) else { return nil }
        cache.fill(stored, readAt: epoch)
        return stored
    }

    /// The device calling a device route.
    ///
    /// - Throws: 403 `device-only` for an account.
    public static func requireDevice(_ principal: Principal) throws(ServiceError) -> Device {
        guard case .device(let device) = principal else {
            throw ServiceError(403, .deviceOnly, "this route is for devices; an account's token cannot act as a device")
        }
        return device
    }

    /// The device calling a device route about `app`, which must be one of its apps.
    ///
    /// - Throws: 403 `device-only` for the admin; for an app the device was not given, exactly
    ///   what an app that does not exist gets (404 `unknown-app`), so that a device learns
    ///   nothing about other apps.
    public static func requireDevice(_ principal: Principal, app: String) throws(ServiceError) -> Device {
        let device = try requireDevice(principal)
        guard device.has(app: app) else { throw ServiceError.unknownApp(app) }
        return device
    }

    /// The account calling an admin route.
    ///
    /// - Throws: 403 `admin-only` for a device.
    public static func requireAccount(_ principal: Principal) throws(ServiceError) -> Caller {
        guard case .account(let caller) = principal else {
            throw ServiceError(403, .adminOnly, "this route is for admin accounts; device tokens are refused")
        }
        return caller
    }

    /// The token of an `Authorization: Bearer <token>` header value (the scheme in any case,
    /// spaces around), or `nil` for any other value: another scheme, no token, a token with a
    /// space in it or longer than 512 bytes.
    public static func bearerToken(_ header: String?) -> String? {
        guard let header else { return nil }
        // Read as bytes (every request has one): the scheme, case-insensitively, then spaces.
        let text = header[...].trimmingSpaces()
        let scheme = Array("bearer".utf8)
        let bytes = text.utf8
        guard bytes.count > scheme.count,
            zip(bytes, scheme).allSatisfy({ $0 | 0x20 == $1 }),
            bytes[bytes.index(bytes.startIndex, offsetBy: scheme.count)] == UInt8(ascii: " ")
        else { return nil }
        let token = text.dropFirst(scheme.count).trimmingSpaces()
        guard (1...512).contains(token.utf8.count), !token.utf8.contains(UInt8(ascii: " ")) else { return nil }
        return String(token)
    }
}
