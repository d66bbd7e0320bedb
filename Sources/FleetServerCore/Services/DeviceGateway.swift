import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension DeviceGateway {
    /// The longest long-poll, in seconds.
    public static let maximumWait = 300

    /// Exchanges an enrollment token for a new device's identity.
    ///
    /// - Throws: 400 for a malformed body; 401 `invalid-enrollment-token` saying whether the
    ///   token is unknown, expired or used up.
    public func enroll(_ request: EnrollRequest) async throws -> EnrollResponse {
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

    /// The stored metadata document of `app` and its strong ETag.
    ///
    /// - Throws: 404 `unknown-app`.
    public func metadataDocument(app: String) async throws -> (document: String, etag: String) {
        let stored = try await storedMetadata(app: app)
        return (stored.document, "\"\(stored.version)-\(Credentials.shortDigest(stored.document.utf8))\"")
    }

    /// Keeps a device's status report and writes its log line.
    ///
    /// One line per report, at `info` for `applied` and `pending` and `warning` otherwise, with `event=status`
    /// and the app, device, revision, schema version, state, source, message and (when the report
    /// has one) detail. A report of settings put back after a hand edit counts in
    /// `fleetset_device_restores_total`.
    public func recordStatus(app: String, device: Device, _ report: StatusReport) async throws {
        _ = try await storedMetadata(app: app)
        try await statusWrites.submit(StatusRecord(report: report, app: app, deviceID: device.id, time: wallClock.secondsSinceEpoch()))
        metrics.statusReport(report.state)
        if report.detail == .restoredAfterLocalEdit { metrics.settingsRestored(app: app) }
        rolloutLooks.withLock { _ = $0.reported.insert(app) }
        events.publish(.statusReported(app: app, device: device.id, state: report.state))
        var metadata: Logger.Metadata = [
            "event": "status", "app": "\(app)", "device": "\(device.id)", "revision": "\(report.revision)",
            "schema_version": "\(report.schemaVersion)", "state": "\(report.state.rawValue)", "source": "\(report.source.rawValue)",
            "message": "\(report.message)",
        ]
        if let detail = report.detail { metadata["detail"] = "\(detail.rawValue)" }
        logger.log(level: report.state == .applied || report.state == .pending ? .info : .warning, "status report", metadata: metadata)
    }

    /// Applies a device's report of its facts (`PATCH /v1/device/info`, a merge patch of the
    /// facts that changed; see ``DeviceInfo``). Returns the facts as stored.
    ///
    /// - Throws: 400 naming the first fact that is unknown, of the wrong type, too long, or of
    ///   an app the device is not given; 413 `too-many-facts` when the result would pass the caps.
    public func patchDeviceInfo(device: Device, patch body: JSONObject) async throws -> JSONObject {
        let patch: JSONObject
        do {
            patch = try DeviceInfo.checkPatch(.object(body), apps: device.apps)
        } catch {
            throw ServiceError.badRequest("\(error.location.displayText): \(error.message)")
        }
        let stored: FactsUpdate?
        do {
            stored = try await store.updateDeviceInfo(id: device.id, at: wallClock.secondsSinceEpoch()) { info in
                try DeviceInfo.applying(patch, to: info)
            }
        } catch let error as DocumentError {
            throw ServiceError(413, .tooManyFacts, "\(error.location.displayText): \(error.message)")
        }
        guard let stored else { throw ServiceError.unknownDevice(device.id) }
        guard !patch.isEmpty else { return stored.info }  // nothing reported: nothing to log or show
        logger.info(
            "device facts reported",
            metadata: [
                "event": "device-info", "device": "\(device.id)",
                "facts": "\(DeviceInfo.facts(patch).map(\.name).joined(separator: ","))",
            ])
        if let groups = stored.groups {
            // Its groups moved with its facts: its long-polls answer with what they give now.
            logger.notice(
                "device moved between groups by its facts",
                metadata: [
                    "event": "groups", "device": "\(device.id)",
                    "joined": "\(groups.after.filter { !groups.before.contains($0) }.joined(separator: ","))",
                    "left": "\(groups.before.filter { !groups.after.contains($0) }.joined(separator: ","))",
                ])
            await notifyDeviceChanged(device.id)
        } else {
            events.publish(.deviceChanged(device: device.id))
        }
        return stored.info
    }

    /// What the server asks of `device`'s agent, for each of its apps.
    public func devicePolicy(_ device: Device) async throws -> DevicePolicy {
        try await policy(of: device)
    }
}
