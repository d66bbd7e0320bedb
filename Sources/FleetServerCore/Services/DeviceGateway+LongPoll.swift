import FleetJSON
import FleetMetadata
import FleetProtocol
import HTTPTypes
import Logging
import PosixThreads

extension DeviceGateway {
    /// The device's effective settings for `app` as a document with its revision (advanced
    /// when they changed since the revision last served).
    public func settings(app: String, device: Device) async throws -> SettingsDocument {
        try await served(app: app, device: device).document
    }

    /// The settings document and the stored layers it was computed from, read from the store
    /// (not from memory): what a device's write is checked against.
    func current(app: String, device: Device) async throws -> (document: SettingsDocument, layers: ValueLayers) {
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
    /// The calling task waits: see ``longPoll(app:device:knownRevision:knownPolicyTag:wait:cancellation:answerLater:)``
    /// for a long-poll that holds no task while it waits.
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
        var poll = try await startLongPoll(
            app: app, device: device, knownRevision: knownRevision, knownPolicyTag: knownPolicyTag, wait: wait)
        while true {
            if let answer = try await check(&poll, cancellation: cancellation) { return answer }
            let outcome = await notifier.waitForChange(
                of: app, device: poll.device.id, groups: poll.device.groups, after: poll.generation, timeout: poll.deadline - clock.now,
                cancellation: cancellation)
            if let answer = try settle(&poll, after: outcome) { return answer }
        }
    }

    /// As ``longPoll(app:device:knownRevision:knownPolicyTag:wait:cancellation:)``, but no task
    /// waits: when the answer is not there at once, the long-poll is parked in the notifier (a
    /// small record: the device, its revision, its deadline) and this returns `nil`; when the
    /// wait ends, a job of the ``ServiceContext/workGate`` works out the answer and hands it, or
    /// the error, to `answerLater` (once). A server holding thousands of long-polls then holds no task stack for any of them.
    ///
    /// - Parameter cancellation: ends the wait (304 through `answerLater`) when given to
    ///   ``cancelLongPoll(_:)``.
    /// - Returns: the answer when there is one without waiting (`answerLater` is then never called).
    public func longPoll(
        app: String, device: Device, knownRevision: Int64?, knownPolicyTag: String? = nil, wait: Duration,
        cancellation: WaitCancellation, answerLater: @escaping @Sendable (Result<LongPollAnswer, any Error>) async -> Void
    ) async throws -> LongPollAnswer? {
        let poll = try await startLongPoll(
            app: app, device: device, knownRevision: knownRevision, knownPolicyTag: knownPolicyTag, wait: wait)
        return try await advanceParked(poll, cancellation: cancellation, answerLater: answerLater)
    }

    /// Checks `poll` and, while there is no answer, parks it; `nil`: parked.
    private func advanceParked(
        _ poll: PendingLongPoll, cancellation: WaitCancellation,
        answerLater: @escaping @Sendable (Result<LongPollAnswer, any Error>) async -> Void
    ) async throws -> LongPollAnswer? {
        var poll = poll
        while true {
            if let answer = try await check(&poll, cancellation: cancellation) { return answer }
            let waiting = poll
            let outcome = await notifier.park(
                of: poll.app, device: poll.device.id, groups: poll.device.groups, after: poll.generation,
                timeout: poll.deadline - clock.now, cancellation: cancellation
            ) { outcome in
                context.workGate.submit {
                    await self.resumeParked(waiting, after: outcome, cancellation: cancellation, answerLater: answerLater)
                }
            }
            guard let outcome else { return nil }
            if let answer = try settle(&poll, after: outcome) { return answer }
        }
    }

    /// Goes on with a parked long-poll whose wait ended with `outcome`.
    private func resumeParked(
        _ poll: PendingLongPoll, after outcome: ChangeNotifier.WaitOutcome, cancellation: WaitCancellation,
        answerLater: @escaping @Sendable (Result<LongPollAnswer, any Error>) async -> Void
    ) async {
        do {
            var poll = poll
            if let answer = try settle(&poll, after: outcome) {
                await answerLater(.success(answer))
            } else if let answer = try await advanceParked(poll, cancellation: cancellation, answerLater: answerLater) {
                await answerLater(.success(answer))
            }
        } catch {
            await answerLater(.failure(error))
        }
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

    /// A long-poll between its checks: what the device has and until when it may wait.
    struct PendingLongPoll: Sendable {
        let app: String
        /// The device as it was when the long-poll came.
        let original: Device
        /// The device as it was at the last check.
        var device: Device
        let knownRevision: Int64?
        /// The policy the device should learn of: its own when it says, else the one at the start.
        let knownPolicy: String
        let deadline: Duration
        /// Whether it may wait at all (`wait` above zero).
        let waits: Bool
        /// A wait ended with a change: the device is checked again.
        var woken = false
        /// The changes seen before the last check (what its wait starts from).
        var generation = ChangeNotifier.Generation.start
    }

    private func startLongPoll(
        app: String, device: Device, knownRevision: Int64?, knownPolicyTag: String?, wait: Duration
    ) async throws -> PendingLongPoll {
        let spread = wait > .zero ? waitSpread(wait) : wait
        let knownPolicy: String
        if let knownPolicyTag { knownPolicy = knownPolicyTag } else { knownPolicy = try await devicePolicyTag(device) }
        return PendingLongPoll(
            app: app, original: device, device: device, knownRevision: knownRevision, knownPolicy: knownPolicy,
            deadline: clock.now + spread, waits: wait > .zero)
    }

    /// The answer when there is one now; `nil`: wait from `poll.generation` until its deadline.
    private func check(_ poll: inout PendingLongPoll, cancellation: WaitCancellation?) async throws -> LongPollAnswer? {
        let app = poll.app
        // A request that will not wait (no `wait`) needs no generation: nothing can be missed.
        poll.generation = poll.waits ? await notifier.generation(of: app, device: poll.device.id) : .start
        if poll.woken { poll.device = try await recheck(poll.device, app: app) }
        let device = poll.device
        // Read after the generation: a policy change after this wakes the wait.
        let policyTag = try await devicePolicyTag(device)
        if device.rotationRequested && !poll.original.rotationRequested || policyTag != poll.knownPolicy {
            return LongPollAnswer(settings: nil, device: device, policyTag: policyTag)
        }
        let served = try await served(app: app, device: device)
        let document = served.document
        if document.revision != poll.knownRevision {
            if poll.woken { metrics.longPollWoken(after: clock.now - lastNotified.withLock { $0 }) }
            return LongPollAnswer(settings: served, device: device, policyTag: policyTag)
        }
        guard poll.deadline > clock.now, !Task.isCancelled, cancellation?.isCancelled != true else {
            logger.trace(
                "settings unchanged",
                metadata: ["event": "not-modified", "app": "\(app)", "device": "\(device.id)", "revision": "\(document.revision)"])
            return LongPollAnswer(settings: nil, device: device, policyTag: policyTag)
        }
        logger.debug(
            "long-poll waiting",
            metadata: ["event": "long-poll", "app": "\(app)", "device": "\(device.id)", "revision": "\(document.revision)"])
        return nil
    }

    /// What a wait's `outcome` makes of `poll`: an answer, an error (shed), or `nil` when it
    /// was woken by a change and is checked again.
    private func settle(_ poll: inout PendingLongPoll, after outcome: ChangeNotifier.WaitOutcome) throws -> LongPollAnswer? {
        let device = poll.device
        switch outcome {
        case .shed:
            metrics.longPollShed()
            logger.warning(
                "long-poll shed",
                metadata: ["event": "shed", "app": "\(poll.app)", "device": "\(device.id)", "held": "\(notifier.capacity)"])
            throw ServiceError.overloaded(held: notifier.capacity)
        case .busy:
            metrics.longPollBusy()
            let nextPoll = busyPollDelay()
            logger.info(
                "long-poll answered busy",
                metadata: [
                    "event": "busy", "app": "\(poll.app)", "device": "\(device.id)", "held": "\(notifier.busyLimit)",
                    "next_poll_seconds": "\(nextPoll.components.seconds)",
                ])
            return LongPollAnswer(settings: nil, device: device, policyTag: poll.knownPolicy, nextPoll: nextPoll)
        case .changed:
            poll.woken = true
            return nil
        case .cancelled, .replaced, .timedOut:
            return LongPollAnswer(settings: nil, device: device, policyTag: poll.knownPolicy)
        }
    }
}
