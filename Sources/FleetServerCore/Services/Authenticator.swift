import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension Authenticator {
    /// Who is calling.
    public enum Principal: Sendable, Hashable {
        case admin
        case device(Device)
    }

    /// How stale a device's `lastSeenAt` may get before a request writes it again: 60 s. Keeps
    /// the hot path (a 304 long-poll) free of write transactions.
    public static let lastSeenResolution: Int64 = 60

    /// The caller of a request with this `Authorization` header value.
    ///
    /// - Throws: 401 `unauthenticated` for a missing, malformed or unknown bearer token.
    public func authenticate(authorization: String?) async throws -> Principal {
        let hash = try Self.tokenHash(authorization)
        if let known = knownPrincipal(tokenHash: hash) { return known }
        guard var device = try await device(tokenHash: hash) else {
            throw ServiceError(401, .unauthenticated, "the bearer token is not one this server issued")
        }
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

    /// The caller of a request with this `Authorization` header value when that needs nothing
    /// but memory: the admin, or a known, enabled device using its current token and seen
    /// lately. `nil` when ``authenticate(authorization:)`` has more to do.
    ///
    /// Synchronous on purpose: most requests of a fleet end here, and an asynchronous call would
    /// take its frame from the task's stack, which keeps the memory for the connection's life.
    ///
    /// - Throws: 401 `unauthenticated` for a missing or malformed bearer token.
    public func knownPrincipal(authorization: String?) throws(ServiceError) -> Principal? {
        knownPrincipal(tokenHash: try Self.tokenHash(authorization))
    }

    private func knownPrincipal(tokenHash hash: String) -> Principal? {
        if Credentials.constantTimeEquals(hash, adminTokenHash) { return .admin }
        guard let device = cache.device(tokenHash: hash), device.tokenHash == hash, !device.disabled else { return nil }
        let now = wallClock.secondsSinceEpoch()
        guard Self.seenLately(device, now: now) else { return nil }
        return .device(device)
    }

    /// Whether `token` is the admin token (the console's sign-in).
    public func isAdminToken(_ token: String) -> Bool {
        Credentials.constantTimeEquals(Credentials.hash(token), adminTokenHash)
    }

    /// The secret the console's session keys are derived from: the admin token's hash, which
    /// every instance of one fleet shares and which changes with the admin token.
    public var consoleKeyMaterial: [UInt8] { Array(adminTokenHash.utf8) }

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
    /// - Throws: 403 `device-only` for the admin.
    public static func requireDevice(_ principal: Principal) throws(ServiceError) -> Device {
        guard case .device(let device) = principal else {
            throw ServiceError(403, .deviceOnly, "this route is for devices; the admin token cannot act as a device")
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

    /// Checks that the caller of an admin route is the admin.
    ///
    /// - Throws: 403 `admin-only` for a device.
    public static func requireAdmin(_ principal: Principal) throws(ServiceError) {
        guard principal == .admin else {
            throw ServiceError(403, .adminOnly, "this route needs the admin token; device tokens are refused")
        }
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

    /// Who an admin write through the API is recorded as: `admin (token 1a2b3c4d)`, naming the
    /// credential by a digest of its hash (never the token).
    public var adminActor: String { "admin (token \(adminCredentialDigest))" }

    /// Who an admin write through the console is recorded as.
    public var consoleActor: String { "console (token \(adminCredentialDigest))" }
}
