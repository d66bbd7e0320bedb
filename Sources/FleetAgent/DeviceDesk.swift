import FleetAgentCore
import FleetAgentRequests
import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol
import Logging
import PosixThreads

/// The server's agent policy as this device holds it: fetched when a settings answer names a
/// new tag, kept in `policy.json` (so a restart starts with it), settled with the configuration
/// file's pins (``SettledPolicy``) and applied without a restart: the log level at once, each
/// app's polling and reporting from its next request (``SyncMachine/Event/retune(_:)``).
final class PolicyKeeper: Sendable {
    private struct State {
        var tag: String
        /// The newest tag a settings answer named, when it is not the one held yet.
        var heard: String?
        var server: DevicePolicy
        var settled: SettledPolicy
        var subscribers: [String: @Sendable (PollTuning) -> Void] = [:]
    }

    private let state: Locked<State>
    private let configuration: AgentConfiguration
    private let applyLogLevel: @Sendable (String) -> Void
    private let logger: Logger

    /// Starts with the policy `policy.json` keeps (none when it is missing or unreadable) and
    /// applies its log level.
    init(configuration: AgentConfiguration, applyLogLevel: @escaping @Sendable (String) -> Void, logger: Logger) {
        self.configuration = configuration
        self.applyLogLevel = applyLogLevel
        self.logger = logger
        var tag = "0"
        var server = DevicePolicy()
        if let bytes = try? FileSystem.readFileIfPresent(configuration.layout.policyFile, maximumSize: 1 << 20),
            case .object(let kept)? = try? JSONParser.parse(bytes), case .string(let keptTag)? = kept["tag"],
            let keptPolicy = try? DevicePolicy(json: kept["server"] ?? .null)
        {
            tag = keptTag
            server = keptPolicy
        }
        let settled = Self.settle(server, configuration)
        state = Locked(State(tag: tag, server: server, settled: settled))
        applyLogLevel(settled.logLevelName)
        // What `fleetset status` shows follows the configuration read now (a reload's pins too).
        keep(tag: tag, server: server, settled: settled)
    }

    /// The configuration file's own polling and reporting (defaults filled in).
    private static func localTuning(_ configuration: AgentConfiguration) -> PollTuning {
        PollTuning(
            longPollWait: configuration.longPollWait, pollInterval: configuration.pollInterval, jitter: configuration.jitter,
            reportDetail: configuration.statusReports)
    }

    private static func settle(_ server: DevicePolicy, _ configuration: AgentConfiguration) -> SettledPolicy {
        SettledPolicy.settle(
            local: localTuning(configuration), localLogLevel: configuration.logLevel, pinned: configuration.pinnedPolicy, server: server,
            apps: configuration.apps.map(\.id))
    }

    /// Writes `policy.json`: the server's policy, its tag, and the policy as settled.
    private func keep(tag: String, server: DevicePolicy, settled: SettledPolicy) {
        do {
            let kept: JSONValue = ["tag": .string(tag), "server": server.json, "settled": settled.json]
            try FileSystem.writeAtomically(
                Array((kept.serialized(.pretty) + "\n").utf8), to: configuration.layout.policyFile, mode: 0o644, group: nil, durable: false)
        } catch {
            logger.error("cannot keep the agent policy", metadata: ["event": "disk-error", "error": "\(error)"])
        }
    }

    /// The tag of the policy held (`0`: none).
    var tag: String { state.withLock { $0.tag } }

    /// The tag sent with every settings request: the newest the server named, fetched or not
    /// (the server answers a request with another at once, so one being fetched is not asked
    /// about again and again).
    var knownTag: String { state.withLock { $0.heard ?? $0.tag } }

    /// A settings answer named `tag`.
    func hear(_ tag: String) {
        state.withLock { $0.heard = tag == $0.tag ? nil : tag }
    }

    /// The policy as settled now.
    var settled: SettledPolicy { state.withLock { $0.settled } }

    /// How `app` polls and reports now.
    func tuning(for app: String) -> PollTuning {
        state.withLock { $0.settled.tuning(for: app) } ?? Self.localTuning(configuration)
    }

    /// Calls `onChange` with `app`'s new tuning whenever a new policy changes it.
    func subscribe(app: String, _ onChange: @escaping @Sendable (PollTuning) -> Void) {
        state.withLock { $0.subscribers[app] = onChange }
    }

    /// Takes a policy fetched from the server: keeps it, applies it, and tells each app whose
    /// tuning it changed.
    func adopt(_ server: DevicePolicy, tag: String) {
        let settled = Self.settle(server, configuration)
        let (before, subscribers) = state.withLock { state in
            defer {
                state.tag = tag
                if state.heard == tag { state.heard = nil }
                state.server = server
                state.settled = settled
            }
            return (state.settled, state.subscribers)
        }
        keep(tag: tag, server: server, settled: settled)
        guard settled != before else { return }
        logger.notice(
            "agent policy applied",
            metadata: [
                "event": "policy", "tag": "\(tag)", "log_level": "\(settled.logLevelName)",
                "log_level_from": "\(settled.logLevel.source)",
            ])
        applyLogLevel(settled.logLevelName)
        for (app, onChange) in subscribers {
            guard let tuning = settled.tuning(for: app), tuning != before.tuning(for: app) else { continue }
            onChange(tuning)
        }
    }
}

/// The agent's device-wide work beside the apps' loops, one request at a time:
/// - fetching the agent policy when a settings answer names a tag other than the one held;
/// - reporting the device's facts (``DeviceInfo``): after enrollment, when an app sets its
///   own, and when one changes (looked at every ``factsInterval``), only the facts that changed
///   (``DeviceInfoChanges``). What the server took is kept in `device-info.json`.
///
/// A failure waits the backoff (full jitter, at least `Retry-After`) and is tried again.
struct DeviceDesk<C: Clock>: Sendable where C.Duration == Duration {
    /// How often the facts are looked at for changes.
    static var factsInterval: Duration { .seconds(600) }

    let configuration: AgentConfiguration
    let environment: SyncEnvironment
    let keeper: PolicyKeeper
    let nudges: DeskNudges
    let clock: C
    var facts = DeviceFacts()

    func run() async {
        guard let credentials = await environment.credentials.value() else { return }
        let logger = environment.logger
        var random = environment.makeRandom()
        var backoff = RetryBackoff()
        var factsDue = true
        var firstLook = true
        var wantedTag: String?
        while !Task.isCancelled {
            let nudged = nudges.take()
            if nudged.facts { factsDue = true }
            if let tag = nudged.policyTag { wantedTag = tag }
            var delay = Self.factsInterval
            let client = credentials.client(http: environment.http, server: configuration.server)
            do {
                if let wanted = wantedTag, wanted != keeper.tag {
                    let (policy, tag) = try await client.devicePolicy()
                    keeper.adopt(policy, tag: tag)
                }
                wantedTag = nil
                if factsDue {
                    let sent = try await reportFacts(client, deviceID: credentials.identity.deviceId)
                    if !sent {
                        logger.log(
                            level: firstLook ? .info : .debug, "device facts unchanged since the server took them",
                            metadata: ["event": "device-info-unchanged"])
                    }
                    factsDue = false
                    firstLook = false
                }
                backoff.reset()
            } catch is CancellationError {
                return
            } catch {
                if Task.isCancelled { return }
                let failure = SyncFailure.classifying(error)
                delay = backoff.delayAfterFailure(retryAfter: failure.retryAfter, using: &random)
                logger.warning(
                    "device request failed; retrying",
                    metadata: ["event": "device-desk", "error": "\(failure.summary)", "retry_in": "\(delay)"])
                // What failed stays wanted (wantedTag, factsDue) and is tried after the backoff:
                // a nudge meanwhile does not cut the backoff short.
                try? await clock.sleep(for: delay)
                continue
            }
            await nudges.wait(upTo: delay, clock: clock)
            if !nudges.hasNews { factsDue = true }  // the timer, not a nudge: look at the facts again
        }
    }

    /// Sends the facts that changed since the server last took them; returns whether any had.
    private func reportFacts(_ client: FleetClient, deviceID: String) async throws -> Bool {
        let layout = configuration.layout
        let reported = Self.reported(layout.deviceInfoFile, deviceID: deviceID)
        let current = facts.read(stateDirectory: configuration.stateDirectory, layout: layout, apps: configuration.apps.map(\.id))
        let patch = DeviceInfoChanges.patch(reported: reported, current: current)
        guard !patch.isEmpty else { return false }
        _ = try await client.reportDeviceInfo(patch)
        environment.logger.info(
            "device facts reported",
            metadata: ["event": "device-info", "facts": "\(DeviceInfo.facts(patch).map(\.name).joined(separator: ","))"])
        // What was sent, not what the server kept: facts it drops (an app the device is not
        // given) are then not sent again and again.
        let sent = (try? DeviceInfo.applying(patch, to: reported)) ?? current
        do {
            let kept: JSONValue = ["device": .string(deviceID), "info": .object(sent)]
            try FileSystem.writeAtomically(
                Array((kept.serialized(.pretty) + "\n").utf8), to: layout.deviceInfoFile, mode: 0o644, group: nil, durable: false)
        } catch {
            environment.logger.error("cannot keep the reported facts", metadata: ["event": "disk-error", "error": "\(error)"])
        }
        return true
    }

    /// The facts the server took from this device (none when the file is missing, unreadable,
    /// or of another device: enrolled again, everything is reported again).
    static func reported(_ path: String, deviceID: String) -> JSONObject {
        guard let bytes = try? FileSystem.readFileIfPresent(path, maximumSize: 1 << 20),
            case .object(let kept)? = try? JSONParser.parse(bytes), kept["device"] == .string(deviceID),
            case .object(let info)? = kept["info"]
        else { return [:] }
        return info
    }
}

/// What the apps' loops tell the ``DeviceDesk``: a policy tag a settings answer named, and that
/// an app set its own facts.
final class DeskNudges: Sendable {
    private struct State {
        var policyTag: String?
        var facts = false
    }

    private let state = Locked(State())
    private let wakeup = Wakeup()

    /// A settings answer named this policy tag.
    func hear(policyTag: String) {
        state.withLock { $0.policyTag = policyTag }
        wakeup.signal()
    }

    /// An app's own facts changed.
    func factsChanged() {
        state.withLock { $0.facts = true }
        wakeup.signal()
    }

    /// Whether anything was heard since the last ``take()``.
    var hasNews: Bool { state.withLock { $0.policyTag != nil || $0.facts } }

    /// Takes what was heard.
    func take() -> (policyTag: String?, facts: Bool) {
        state.withLock { state in
            defer { state = State() }
            return (state.policyTag, state.facts)
        }
    }

    /// Returns when something is heard, after `duration`, or when the task is cancelled.
    func wait<C: Clock>(upTo duration: Duration, clock: C) async where C.Duration == Duration {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.wakeup.wait() }
            group.addTask { try? await clock.sleep(for: duration) }
            await group.next()
            group.cancelAll()
        }
    }
}
