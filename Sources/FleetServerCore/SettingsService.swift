import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

/// What the server does, without HTTP: authentication, enrollment, serving a device its
/// settings (long-polls included), write-back, status reports and the admin operations.
///
/// The HTTP layer (`FleetServer`) only reads requests, calls one method and writes the answer;
/// a refused request is a ``ServiceError`` carrying its status and code. Storage is any
/// ``SettingsStore``; time is injected (``WallClock`` for timestamps, a `Clock` for waits).
public final class SettingsService: Sendable {
    /// Who is calling.
    public enum Principal: Sendable, Hashable {
        case admin
        case device(Device)
    }

    /// How stale a device's `lastSeenAt` may get before a request writes it again: 60 s. Keeps
    /// the hot path (a 304 long-poll) free of write transactions.
    public static let lastSeenResolution: Int64 = 60
    /// The longest long-poll, in seconds.
    public static let maximumWait = 300

    let store: any SettingsStore
    let notifier: ChangeNotifier
    let wallClock: any WallClock
    let waitSpread: @Sendable (Duration) -> Duration
    let logger: Logger
    private let adminTokenHash: String
    /// Names the admin credential in the history: a digest of its hash, never the token.
    let adminCredentialDigest: String
    /// Serialises the writes that check before they write (across instances with a shared lock).
    let writes: SerialSection
    /// What the hot path reads instead of the store; the notifier invalidates it.
    var cache: ServingCache { notifier.cache }
    /// Revision advances, status reports and last-seen times, written in shared transactions.
    let revisionWrites: GroupCommit<RevisionAdvance, RevisionState>
    let statusWrites: GroupCommit<StatusRecord, Void>
    let seenWrites: GroupCommit<DeviceSeen, Void>
    /// What the server measures.
    public let metrics: ServerMetrics
    /// Reports and changes as they happen, for the console's live updates.
    public let events = ServiceEvents()
    /// Which running rollouts have news to look at (see ``superviseRollouts(onlyWhenDue:)``).
    let rolloutLooks = Locked(RolloutLooks())
    /// When the last write woke long-polls (for ``ServerMetrics/longPollWoken(after:)``).
    private let lastNotified = Locked(ContinuousClock.now)
    /// What a device whose long-poll finds the server busy (``ChangeNotifier/busyLimit``) is
    /// told: poll again after this, spread.
    let busyPollDelay: @Sendable () -> Duration

    /// - Parameters:
    ///   - adminTokenHash: ``Credentials/hash(_:)`` of the admin token.
    ///   - waitSpread: how long a long-poll asking for a wait really waits at most
    ///     (``spreadWait(_:fraction:)`` with a random fraction by default).
    ///   - busyPollDelay: when a device whose long-poll finds the server busy should poll again
    ///     (``busyPollDelay(_:fraction:)`` of ``defaultBusyPollInterval`` with a random fraction
    ///     by default).
    ///   - writeLock: the lock shared with the other instances on the same database, if any
    ///     (their changes reach this one through ``ChangeNotifier/changedElsewhere(_:)``).
    public init(
        store: any SettingsStore, adminTokenHash: String, wallClock: any WallClock,
        waitSpread: @escaping @Sendable (Duration) -> Duration = { SettingsService.spreadWait($0, fraction: .random(in: 0..<1)) },
        busyPollDelay: @escaping @Sendable () -> Duration = {
            SettingsService.busyPollDelay(SettingsService.defaultBusyPollInterval, fraction: .random(in: 0..<1))
        },
        notifier: ChangeNotifier = ChangeNotifier(), metrics: ServerMetrics = ServerMetrics(), writeLock: (any SharedWriteLock)? = nil,
        logger: Logger
    ) {
        self.store = store
        self.writes = SerialSection(shared: writeLock)
        self.adminTokenHash = adminTokenHash
        self.adminCredentialDigest = String(Credentials.shortDigest(adminTokenHash.utf8).prefix(8))
        self.wallClock = wallClock
        self.waitSpread = waitSpread
        self.busyPollDelay = busyPollDelay
        self.notifier = notifier
        self.logger = logger
        self.revisionWrites = GroupCommit { try await store.advanceRevisions($0) }
        self.statusWrites = GroupCommit { try await store.recordStatuses($0) }
        self.seenWrites = GroupCommit { try await store.touch($0) }
        self.metrics = metrics
    }

    /// Tells the notifier of a write of `app` at `scope` (it invalidates what the hot path keeps
    /// and wakes the long-polls the write reaches).
    func notifyChanged(_ app: String, scope: Scope) async {
        lastNotified.withLock { $0 = .now }
        await notifier.changed(app, scope: scope)
        events.publish(.settingsChanged(app: app, scope: scope))
    }

    /// Tells the notifier that a device itself changed.
    func notifyDeviceChanged(_ id: String) async {
        lastNotified.withLock { $0 = .now }
        await notifier.deviceChanged(id)
        events.publish(.deviceChanged(device: id))
    }

    // MARK: - Authentication

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

    /// The device with `id`: from memory, or read once from the store.
    func device(id: String) async throws -> Device? {
        if let known = cache.device(id: id) { return known }
        let epoch = cache.epoch
        guard let stored = try await store.device(id: id) else { return nil }
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

    /// The device as stored now, checked again: after a long-poll wakes, the device may have been
    /// deleted or disabled (401), its token rotated and the old one retired (401), or `app`
    /// taken from it (404 as for any unknown app).
    func recheck(_ device: Device, app: String) async throws -> Device {
        guard let current = try await self.device(id: device.id),
            current.tokenHash == device.tokenHash || current.pendingTokenHash == device.tokenHash
        else {
            throw ServiceError(401, .unauthenticated, "the bearer token is not one this server issued")
        }
        guard !current.disabled else { throw ServiceError.deviceDisabled }
        guard current.has(app: app) else { throw ServiceError.unknownApp(app) }
        return current
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

    // MARK: - Enrollment

    /// Exchanges an enrollment token for a new device's identity.
    ///
    /// - Throws: 400 for a malformed body; 401 `invalid-enrollment-token` saying whether the
    ///   token is unknown, expired or used up.
    public func enroll(_ body: JSONValue) async throws -> EnrollResponse {
        let request = try Self.read(body, as: EnrollRequest.init(json:))
        let enrollmentTokenHash = Credentials.hash(request.enrollmentToken)
        // A read first: a token that does not exist never takes the write lock.
        guard try await store.enrollmentToken(hash: enrollmentTokenHash) != nil else {
            try refuseEnrollment("the enrollment token is not one this server issued")
        }
        let deviceToken = Credentials.generate(.device)
        let tokenHash = Credentials.hash(deviceToken)
        let now = wallClock.secondsSinceEpoch()
        // Without a request id (an agent from before it), an id of the server's own: no retry
        // can match it, so each such request is an enrollment of its own, as it was for them.
        let attempt = EnrollmentAttempt(
            tokenHash: enrollmentTokenHash, requestID: request.requestId ?? Credentials.identifier(prefix: "server-made-"), now: now,
            retryWindow: Self.enrollmentRetryWindow)
        let outcome = try await store.enroll(attempt, newTokenHash: tokenHash) { apps, groups in
            Device(
                id: Credentials.identifier(prefix: "d-"), tokenHash: tokenHash, apps: apps, groups: groups, enrolledAt: now, lastSeenAt: now
            )
        }
        let refusal: String
        switch outcome {
        case .enrolled(let device):
            let again = device.enrolledAt != now
            if again { await notifyDeviceChanged(device.id) } else { events.publish(.deviceChanged(device: device.id)) }
            logger.info(
                again ? "device enrolled again (a retry: same device, new token)" : "device enrolled",
                metadata: [
                    "event": "enrolled", "device": "\(device.id)", "apps": "\(device.apps.joined(separator: ","))",
                    "groups": "\(device.groups.joined(separator: ","))", "retry": "\(again)",
                    "request_id": "\(request.requestId == nil ? "none (an older agent: a retry enrolls another device)" : "sent")",
                ])
            return EnrollResponse(deviceId: device.id, deviceToken: deviceToken, apps: device.apps, groups: device.groups)
        case .unknown: refusal = "the enrollment token is not one this server issued"
        case .expired: refusal = "the enrollment token has expired; ask the admin for a new one"
        case .usedUp: refusal = "the enrollment token has been used as often as it allows; ask the admin for a new one"
        }
        try refuseEnrollment(refusal)
    }

    /// How long after an enrollment a retry with the same request id gets the same device: a day.
    public static let enrollmentRetryWindow: Int64 = 86_400

    private func refuseEnrollment(_ refusal: String) throws -> Never {
        logger.notice("enrollment refused", metadata: ["event": "enrollment-refused", "reason": "\(refusal)"])
        throw ServiceError(401, .invalidEnrollmentToken, refusal)
    }

    /// Hands the device a new token (`POST /v1/device/token`). The old token keeps working until
    /// the new one is first used, so an answer lost on the way locks nothing out; asking again
    /// replaces the pending token.
    public func rotateToken(device: Device) async throws -> TokenRotation {
        let token = Credentials.generate(.device)
        try await store.setPendingToken(deviceID: device.id, hash: Credentials.hash(token))
        await notifyDeviceChanged(device.id)
        logger.notice("device token rotation started", metadata: ["event": "token-rotation", "device": "\(device.id)"])
        return TokenRotation(deviceToken: token)
    }

    // MARK: - Metadata and settings

    /// The stored metadata document of `app` and its strong ETag.
    ///
    /// - Throws: 404 `unknown-app`.
    public func metadataDocument(app: String) async throws -> (document: String, etag: String) {
        let stored = try await storedMetadata(app: app)
        return (stored.document, "\"\(stored.version)-\(Credentials.shortDigest(stored.document.utf8))\"")
    }

    func storedMetadata(app: String) async throws -> StoredMetadata {
        try await cachedMetadata(app: app).stored
    }

    func metadata(app: String) async throws -> Metadata {
        try await cachedMetadata(app: app).metadata
    }

    /// The stored metadata of `app` and the metadata parsed from it: from memory, or read and
    /// parsed once after each upload.
    private func cachedMetadata(app: String) async throws -> (stored: StoredMetadata, metadata: Metadata) {
        guard Metadata.isValidAppID(app) else { throw ServiceError.unknownApp(app) }
        return try await cache.metadata(app: app) { [store] in
            guard let stored = try await store.metadata(app: app) else { throw ServiceError.unknownApp(app) }
            do {
                return (stored, try Metadata(json: Array(stored.document.utf8)))
            } catch {
                throw ServiceError(500, .internalError, "the stored metadata of \(app) cannot be read: \(error)")
            }
        }
    }

    /// The device's effective settings for `app` as a document with its revision (advanced
    /// when they changed since the revision last served).
    public func settings(app: String, device: Device) async throws -> SettingsDocument {
        try await served(app: app, device: device).document
    }

    /// A settings document and the text of its body.
    public struct ServedSettings: Sendable {
        public let document: SettingsDocument
        /// The text of the values when every device that gets them shares it; `nil` for a
        /// device with values of its own.
        let sharedValuesText: String?

        /// `document.json.serialized()`, written from values whose text is shared by every
        /// device that gets the same values. Written when asked for: a 304 needs none.
        public var body: String {
            SettingsDocument.jsonText(
                app: document.app, schemaVersion: document.schemaVersion, revision: document.revision,
                valuesText: sharedValuesText ?? JSONValue.object(document.values).serialized())
        }
    }

    /// The device's settings as it gets them, from memory when nothing changed: the layers of
    /// its groups are read and written as text once for every device in the same groups, its
    /// own values once, and its revision moves (in the store) only when its values changed.
    func served(app: String, device: Device) async throws -> ServedSettings {
        let shared = try await cache.sharedLayers(app: app, groups: device.groups) {
            let epoch = self.cache.epoch
            let metadata = try await self.metadata(app: app)
            let layers = try await self.store.valueLayers(app: app, groups: device.groups, deviceID: device.id)
            // The same read has this device's own values: kept, so they are not read again below.
            self.cache.fill(deviceValues: layers.device, app: app, deviceID: device.id, readAt: epoch)
            return ServingCache.SharedLayers.Parts(metadata: metadata, app: layers.app, groups: layers.groups, rollout: layers.rollout)
        }
        let variant = shared.variant(for: device)
        let own: JSONObject
        if let known = cache.deviceValues(app: app, deviceID: device.id) {
            own = known
        } else {
            let epoch = cache.epoch
            own = try await store.values(app: app, scope: .device(device.id))
            cache.fill(deviceValues: own, app: app, deviceID: device.id, readAt: epoch)
        }
        let values: JSONObject
        let fingerprint: UInt64
        let sharedText: String?
        if own.isEmpty {
            (values, fingerprint, sharedText) = (variant.effective.values, variant.fingerprint, variant.valuesText)
        } else {
            let effective = EffectiveSettings(
                metadata: shared.metadata, app: variant.app, groups: variant.groups, device: own, deviceID: device.id)
            values = effective.values
            fingerprint = effective.fingerprint(schemaVersion: shared.metadata.version)
            sharedText = nil
        }
        let schemaVersion = Int64(shared.metadata.version)
        let state = try await revision(app: app, deviceID: device.id, fingerprint: fingerprint)
        return ServedSettings(
            document: SettingsDocument(app: app, schemaVersion: schemaVersion, revision: state.revision, values: values),
            sharedValuesText: sharedText)
    }

    /// The device's revision for values with `fingerprint`: the one last served when they are
    /// the same (no store access), otherwise advanced in the store (many devices' advances
    /// share a transaction, see ``GroupCommit``).
    private func revision(app: String, deviceID: String, fingerprint: UInt64) async throws -> RevisionState {
        if let known = cache.revision(app: app, deviceID: deviceID), known.fingerprint == fingerprint { return known }
        let epoch = cache.revisionEpoch
        let state = try await revisionWrites.submit(RevisionAdvance(app: app, deviceID: deviceID, fingerprint: fingerprint))
        cache.record(state, app: app, deviceID: deviceID, readAt: epoch)
        return state
    }

    /// The settings document and the stored layers it was computed from, read from the store
    /// (not from memory): what a device's write is checked against.
    private func current(app: String, device: Device) async throws -> (document: SettingsDocument, layers: ValueLayers) {
        let metadata = try await metadata(app: app)
        let layers = try await store.valueLayers(app: app, groups: device.groups, deviceID: device.id).served(to: device)
        let effective = EffectiveSettings(
            metadata: metadata, app: layers.app, groups: layers.groups, device: layers.device, deviceID: device.id)
        let state = try await revision(app: app, deviceID: device.id, fingerprint: effective.fingerprint(schemaVersion: metadata.version))
        let document = SettingsDocument(
            app: app, schemaVersion: Int64(metadata.version), revision: state.revision, values: effective.values)
        return (document, layers)
    }

    /// The settings when their revision differs from `knownRevision`; otherwise waits up to
    /// `wait` for a change and returns `nil` (304) when none came — or when the calling task is
    /// cancelled, as on a graceful shutdown.
    ///
    /// The wait is woken by the write itself (``ChangeNotifier``), never by polling the store.
    public func settings(app: String, device: Device, knownRevision: Int64?, wait: Duration) async throws -> SettingsDocument? {
        try await longPoll(app: app, device: device, knownRevision: knownRevision, wait: wait).document
    }

    /// What a long-poll answers: the settings (`nil`: unchanged, 304) and the device as it is
    /// at the answer, whose state (a token rotation the admin asked for meanwhile) goes with it,
    /// the tag of its agent policy, and when to poll next if the server is busy.
    public struct LongPollAnswer: Sendable {
        /// The settings and the text of the answer's body; `nil`: unchanged.
        public var settings: ServedSettings?
        public var device: Device
        /// ``DevicePolicy/tag`` of the device's agent policy (the `Fleetset-Policy` header).
        public var policyTag: String
        /// The server is busy: the device should send its next request after this, not at once
        /// (the `Fleetset-Next-Poll` header, in seconds).
        public var nextPoll: Duration?

        /// The settings document, `nil` when unchanged.
        public var document: SettingsDocument? { settings?.document }

        public init(settings: ServedSettings?, device: Device, policyTag: String = "0", nextPoll: Duration? = nil) {
            self.settings = settings
            self.device = device
            self.policyTag = policyTag
            self.nextPoll = nextPoll
        }
    }

    /// How long a busy server asks devices to wait before their next request: 120 s.
    public static let defaultBusyPollInterval: Duration = .seconds(120)

    /// `interval` spread over its second half by `fraction` (0 to 1), so that devices told at
    /// the same moment do not all come back together.
    public static func busyPollDelay(_ interval: Duration, fraction: Double) -> Duration {
        interval / 2 + (interval / 2) * min(1, max(0, fraction))
    }

    /// As ``settings(app:device:knownRevision:wait:)``, with the device as it is at the answer.
    /// A rotation the admin asks for while the device waits ends the wait at once (304), so the
    /// device learns of it without waiting out the long-poll.
    ///
    /// - Parameter cancellation: ends the wait (304) when given to ``cancelLongPoll(_:)``: the
    ///   client went away, or the server is shutting down.
    /// - Parameter knownPolicyTag: the tag of the agent policy the device has (its
    ///   `Fleetset-Policy` header); when the device's policy has another, the answer comes at
    ///   once (304 when the settings are unchanged), so that the device fetches it.
    public func longPoll(
        app: String, device: Device, knownRevision: Int64?, knownPolicyTag: String? = nil, wait: Duration,
        cancellation: WaitCancellation? = nil
    ) async throws -> LongPollAnswer {
        let spread = wait > .zero ? waitSpread(wait) : wait
        return try await answerWhenChanged(
            app: app, device: device, knownRevision: knownRevision, knownPolicyTag: knownPolicyTag, wait: spread,
            cancellation: cancellation)
    }

    /// Ends the long-poll `cancellation` was given to (at once if it has not begun waiting yet).
    /// Safe from any thread, synchronous code included.
    public func cancelLongPoll(_ cancellation: WaitCancellation) {
        notifier.cancel(cancellation)
    }

    /// `wait` shortened by `fraction` (0 to 1) of its sixteenth, as Consul spreads its blocking
    /// queries: long-polls that started together (after a restart, or answered by one
    /// app-wide change) do not all time out together, and no wait is ever longer than asked.
    public static func spreadWait(_ wait: Duration, fraction: Double) -> Duration {
        wait - (wait / 16) * min(1, max(0, fraction))
    }

    private func answerWhenChanged(
        app: String, device original: Device, knownRevision: Int64?, knownPolicyTag: String?, wait: Duration,
        cancellation: WaitCancellation?
    ) async throws -> LongPollAnswer {
        let deadline = ContinuousClock.now.advanced(by: wait)
        var device = original
        var woken = false
        // The policy the device should learn of: its own when it says, else the one at the start.
        var knownPolicy = knownPolicyTag ?? ""
        if knownPolicyTag == nil { knownPolicy = try await devicePolicyTag(original) }
        while true {
            // A request that will not wait (no `wait`) needs no generation: nothing can be missed.
            let generation = wait > .zero ? await notifier.generation(of: app, device: device.id) : .start
            if woken { device = try await recheck(device, app: app) }
            // Read after the generation: a policy change after this wakes the wait below.
            let policyTag = try await devicePolicyTag(device)
            if device.rotationRequested && !original.rotationRequested || policyTag != knownPolicy {
                return LongPollAnswer(settings: nil, device: device, policyTag: policyTag)
            }
            let served = try await served(app: app, device: device)
            let document = served.document
            if document.revision != knownRevision {
                if woken { metrics.longPollWoken(after: lastNotified.withLock { $0 }.duration(to: .now)) }
                return LongPollAnswer(settings: served, device: device, policyTag: policyTag)
            }
            let remaining = ContinuousClock.now.duration(to: deadline)
            guard remaining > .zero, !Task.isCancelled, cancellation?.isCancelled != true else {
                logger.trace(
                    "settings unchanged",
                    metadata: ["event": "not-modified", "app": "\(app)", "device": "\(device.id)", "revision": "\(document.revision)"])
                return LongPollAnswer(settings: nil, device: device, policyTag: policyTag)
            }
            logger.debug(
                "long-poll waiting",
                metadata: ["event": "long-poll", "app": "\(app)", "device": "\(device.id)", "revision": "\(document.revision)"])
            let outcome = await notifier.waitForChange(
                of: app, device: device.id, groups: device.groups, after: generation, timeout: remaining, cancellation: cancellation)
            if outcome == .shed {
                metrics.longPollShed()
                logger.warning(
                    "long-poll shed",
                    metadata: ["event": "shed", "app": "\(app)", "device": "\(device.id)", "held": "\(notifier.capacity)"])
                throw ServiceError.overloaded(held: notifier.capacity)
            }
            if outcome == .busy {
                metrics.longPollBusy()
                let nextPoll = busyPollDelay()
                logger.info(
                    "long-poll answered busy",
                    metadata: [
                        "event": "busy", "app": "\(app)", "device": "\(device.id)", "held": "\(notifier.busyLimit)",
                        "next_poll_seconds": "\(nextPoll.components.seconds)",
                    ])
                return LongPollAnswer(settings: nil, device: device, policyTag: policyTag, nextPoll: nextPoll)
            }
            guard outcome == .changed else { return LongPollAnswer(settings: nil, device: device, policyTag: policyTag) }
            woken = true
        }
    }

    /// Applies a device's merge patch of writable settings at device scope. A patch that leaves
    /// the device's values as they are (`{}`, or the values it already set) commits nothing:
    /// no history entry, no wake-up; the answer is the current document.
    ///
    /// - Throws: 428 without `If-Match`, 400 for a malformed one or a body that is not an
    ///   object, 409 when it names a stale revision, 403 naming each key that is not
    ///   `x-writable`, 422 with each validation error the change causes.
    public func patchSettings(app: String, device: Device, ifMatch: String?, patch body: JSONValue) async throws -> SettingsDocument {
        guard let ifMatch else {
            throw ServiceError(428, .ifMatchRequired, "send If-Match with the revision the change is based on, e.g. If-Match: \"41\"")
        }
        guard let expected = RevisionTag.revision(ifMatch) else {
            throw ServiceError(400, .badPrecondition, "If-Match must be one strong revision tag like \"41\"")
        }
        guard case .object(let patch) = body else { throw ServiceError.badRequest("the merge patch must be a JSON object of settings") }
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
        let (current, layers) = try await current(app: app, device: device)
        return DeviceWriteState(revision: current.revision, layers: layers, metadata: metadata)
    }

    /// Keeps a device's status report and writes its log line.
    ///
    /// One line per report, at `info` for `applied` and `pending` and `warning` otherwise, with `event=status`
    /// and the app, device, revision, schema version, state, source and message.
    public func recordStatus(app: String, device: Device, _ body: JSONValue) async throws {
        let report = try Self.read(body) { json throws(DocumentError) in try StatusReport(json: json) }
        _ = try await storedMetadata(app: app)
        try await statusWrites.submit(StatusRecord(report: report, app: app, deviceID: device.id, time: wallClock.secondsSinceEpoch()))
        metrics.statusReport(report.state)
        rolloutLooks.withLock { _ = $0.reported.insert(app) }
        events.publish(.statusReported(app: app, device: device.id, state: report.state))
        let metadata: Logger.Metadata = [
            "event": "status", "app": "\(app)", "device": "\(device.id)", "revision": "\(report.revision)",
            "schema_version": "\(report.schemaVersion)", "state": "\(report.state.rawValue)", "source": "\(report.source.rawValue)",
            "message": "\(report.message)",
        ]
        logger.log(level: report.state == .applied || report.state == .pending ? .info : .warning, "status report", metadata: metadata)
    }

    // MARK: - Helpers

    /// Reads a wire message, turning its error into a 400 that names the member.
    static func read<Message>(_ body: JSONValue, as make: (JSONValue) throws(DocumentError) -> Message) throws(ServiceError) -> Message {
        do {
            return try make(body)
        } catch {
            throw ServiceError.badRequest("\(error.location.displayText): \(error.message)")
        }
    }
}
