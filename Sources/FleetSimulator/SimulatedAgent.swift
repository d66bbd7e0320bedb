import Curl
import FleetAgentCore
import FleetAgentRequests
import FleetClient
import FleetDeviceState
import FleetJSON
import FleetProtocol
import PosixThreads

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One simulated device: `fleetsetd`'s own sync machine (``FleetAgentCore/SyncMachine``) with
/// the app's folder in memory (``FleetAgentCore/MemoryAppFiles``), its requests sent with the
/// agent's own code (``FleetAgentRequests/MachineRequests``). So a simulated fleet sends what
/// the agent sends, in its order, and decides on every answer (a revision decided on already,
/// a 4xx without fleetset's error body, a busy server, a failure) by the agent's rules: the
/// simulator has no model of the agent to drift from it.
///
/// What the driver does is what `AppDriver` does for a request, an alarm and a cancellation
/// (see ``run()`` for how it does it in less); there is no disk, hook, watch or policy. The
/// simulated app (``SimulatedApp``) answers through the inbox, as a real app does: an error
/// acknowledgement for settings it cannot use, a change of a writable setting when the fleet
/// asks for one.
struct SimulatedAgent: Sendable {
    typealias Machine = SyncMachine<ContinuousClock.Instant, MemoryAppFiles>

    let index: Int
    let client: FleetClient
    let app: String
    let rules: SyncRules
    let counters: FleetCounters
    let metadata: MetadataCache
    let simulatedApp: SimulatedApp

    /// Runs until its task is cancelled; the request in flight is abandoned (its connection closed).
    ///
    /// The device's own task sends each request and waits for its answer: a simulated device
    /// has nothing that could end a request early (no inbox but its app's answers, which come
    /// before the next request goes, no hook, no apply window, no "sync now"), so it needs no
    /// task per request and no event stream, which `AppDriver` has. A request the machine asks
    /// for and cancels in the same step (a long-poll, then a write-back of the app's) is not
    /// sent. An alarm set while a request is in flight would be taken after the answer; the
    /// simulator's configuration sets none then.
    func run() async {
        var machine = Machine(rules: rules, random: SystemRandomNumberGenerator(), files: MemoryAppFiles())
        var pending: [Machine.Event] = [.started(LoadedState())]
        var alarm: ContinuousClock.Instant?
        var served: Int64?
        var inboxCount = 0
        // Events go in the order they came, a step's own after those before it: a batch is
        // taken whole, reversed, and each event moved out of its end (not copied).
        var batch: [Machine.Event] = []
        while !Task.isCancelled {
            var request: Machine.Action?
            while !pending.isEmpty {
                swap(&batch, &pending)
                batch.reverse()
                while let event = batch.popLast() {
                    var cancelled = false
                    var actions = machine.handle(event, at: Self.now())
                    actions.reverse()  // moved out of the end in order, not copied
                    while let action = actions.popLast() {
                        switch action {
                        case .awaitOnline:
                            pending.append(.online(requests: []))  // enrolled already, and nothing in the inbox
                        case .runHook:
                            pending.append(.hookFinished(.succeeded))  // the simulated app has no hook
                        case .cancelRequest:
                            cancelled = true
                        case .wake(let at):
                            alarm = at
                        case .log(let record):
                            counters.logged(record.event)
                        case .showStatus, .served:
                            break
                        case .fetchSettings, .fetchMetadata, .patchSettings, .deliverReport, .rotateToken:
                            request = action
                        }
                    }
                    if cancelled, request != nil {
                        request = nil  // never sent
                        pending.append(.requestCancelled)
                    }
                    // The app reads what was written, and answers through the inbox.
                    if let settings = machine.settings, settings.revision != served {
                        served = settings.revision
                        var requests: [InboxRequest] = []
                        if let failure = simulatedApp.failure(index, settings) {
                            requests.append(.ack(revision: settings.revision, state: .error, message: failure))
                        }
                        if counters.received(settings.values, device: index), let change = simulatedApp.writeBack(index, settings) {
                            requests.append(.set(change))
                        }
                        if !requests.isEmpty {
                            pending.append(
                                .inboxRequests(
                                    requests.map { request in
                                        inboxCount += 1
                                        return InboxDelivery(id: "sim-\(inboxCount)", path: nil, content: .request(request))
                                    }))
                        }
                    }
                }
            }
            if let request {
                guard let answer = await perform(request, served: served) else { break }  // stopped
                pending.append(answer)
            } else if let at = alarm {
                do {
                    try await Task.sleep(until: at, clock: .continuous)
                } catch {
                    break
                }
                alarm = nil
                pending.append(.alarm)
            } else {
                break  // nothing to wait for: the machine stopped
            }
        }
        _ = machine.handle(.stop, at: Self.now())
    }

    static func now() -> Machine.Moment {
        Machine.Moment(.now, wall: Int64(time(nil)))
    }

    /// Sends one request and returns the event it ends with, counting what it saw; `nil` when
    /// the device was stopped meanwhile.
    private func perform(_ action: Machine.Action, served: Int64?) async -> Machine.Event? {
        let observe: MachineRequests.Observer = { [counters] error in counters.failed(Self.kind(of: error)) }
        do {
            switch action {
            case .fetchSettings(let wait, let known, let notBefore, let repeats, let report):
                let delay = notBefore.map { max(.zero, ContinuousClock.now.duration(to: $0)) } ?? .zero
                if wait > 0 { counters.beginWait() }
                defer { if wait > 0 { counters.endWait() } }
                let result = try await MachineRequests.settings(
                    client, app: app, knownRevision: known, wait: wait, after: delay, repeatsWhileUnchanged: repeats, carrying: report,
                    observe: observe)
                guard case .success(let settings) = result else { return .requestFailed(result.failure) }
                let answer = settings.answer
                if report != nil, answer.acceptsStatus {
                    counters.count(report?.report.state == .error ? "status error on poll" : "status on poll")
                }
                if answer.document == nil {
                    counters.count(answer.nextPoll == nil ? "settings 304" : "settings 304 busy")
                } else {
                    // A download after a confirmed change is the write-back's, not a change reaching the device.
                    counters.count(known == nil && wait == 0 && served != nil ? "settings 200 after write-back" : "settings 200")
                }
                return .settingsAnswer(answer)
            case .fetchMetadata(let etag):
                let result = try await MachineRequests.metadata(client, app: app, ifNoneMatch: etag, observe: observe)
                guard case .success(let fetched) = result else { return .requestFailed(result.failure) }
                counters.count(fetched == nil ? "metadata 304" : "metadata 200")
                return .metadataAnswer(fetched.map { metadata.document(bytes: $0.bytes, etag: $0.etag) })
            case .patchSettings(let patch, let base):
                let result = try await MachineRequests.patch(client, app: app, patch, basedOn: base, observe: observe)
                guard case .success(let revision) = result else { return .requestFailed(result.failure) }
                counters.count("write-back 200")
                return .changeConfirmed(revision: revision)
            case .deliverReport(let report):
                let result = try await MachineRequests.report(client, app: app, report, observe: observe)
                guard case .success = result else { return .requestFailed(result.failure) }
                counters.count(report.state == .error ? "status error 202" : "status 202")
                return .reportDelivered
            case .rotateToken:
                // A simulated fleet's tokens are in fleet.json: a rotation would lose them.
                return .requestFailed(.transient("the simulator does not rotate tokens"))
            default:
                return .requestCancelled
            }
        } catch {
            return nil
        }
    }

    /// How a failure is counted: the status and fleetset's code, or the transport's kind.
    static func kind(of error: any Error) -> String {
        switch error {
        case let error as FleetClientError:
            [error.status.map(String.init) ?? "bad-answer", error.code?.rawValue].compactMap { $0 }.joined(separator: " ")
        case let error as HTTPClientError:
            "\(error.kind)"
        default:
            "other"
        }
    }
}

extension Result where Failure == SyncFailure {
    /// The failure (only asked for after a `.success` was ruled out).
    fileprivate var failure: SyncFailure {
        if case .failure(let failure) = self { failure } else { .transient("no failure") }
    }
}

/// What the simulated app does with the settings its device serves: the fleet decides, per
/// device (its index) and settings.
struct SimulatedApp: Sendable {
    /// The app cannot use these settings: it acknowledges them as `error` with this message.
    var failure: @Sendable (Int, DeviceSettings) -> String?
    /// The app changes a writable setting after these settings (a `set` request in the inbox).
    var writeBack: @Sendable (Int, DeviceSettings) -> JSONObject?
}

/// The app's metadata as the devices fetched it: every device asks the server (as the agent
/// does), but devices given the same document share one parsed copy (its compiled schema), so a
/// fleet of thousands holds it once.
final class MetadataCache: Sendable {
    private let documents = Locked<[String: MetadataDocument]>([:])

    func document(bytes: [UInt8], etag: String) -> MetadataDocument {
        if let known = documents.withLock({ $0[etag] }), known.bytes == bytes { return known }
        let parsed = MetadataDocument(bytes: bytes, etag: etag)
        documents.withLock { $0[etag] = parsed }
        return parsed
    }
}
