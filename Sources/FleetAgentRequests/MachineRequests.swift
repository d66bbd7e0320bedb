import FleetAgentCore
import FleetClient
import FleetJSON
import FleetProtocol

/// The sync machine's requests to the server, sent with ``FleetClient``: each one's answer, or
/// its failure classified once (``FleetAgentCore/SyncFailure``), as the machine takes it. The
/// agent (`AppDriver`) and the fleet simulator send them with this same code, so a simulated
/// fleet sends what `fleetsetd` sends and classifies every answer as it does. A request ended
/// by its task's cancellation throws `CancellationError` (the machine's `requestCancelled`).
///
/// `observe`, when given, sees each failure as it was thrown, before it is classified (the
/// simulator counts failures by their kind: a lost connection, a 503).
public enum MachineRequests {
    /// Sees a request's failure as it was thrown.
    public typealias Observer = @Sendable (any Error) -> Void

    /// The settings answer as the machine takes it, and the agent policy tag the server sent.
    public struct Settings: Sendable {
        public var answer: SettingsAnswer
        public var policyTag: String?
    }

    /// `GET …/settings` as ``SyncMachine/Action/fetchSettings(wait:knownRevision:notBefore:repeatsWhileUnchanged:carrying:)``
    /// asks: sent after `delay`, repeated while unchanged, carrying a report when given.
    /// `policyTag` is the agent policy the device has.
    public static func settings(
        _ client: FleetClient, app: String, knownRevision: Int64?, wait: Int, after delay: Duration = .zero,
        repeatsWhileUnchanged repeats: [Duration] = [], policyTag: String? = nil, carrying report: StatusOnPoll.Carried? = nil,
        observe: Observer? = nil
    ) async throws(CancellationError) -> Result<Settings, SyncFailure> {
        try await classified(observe) {
            let answer = try await client.settingsAnswer(
                app: app, knownRevision: knownRevision, wait: wait, after: delay, repeatsWhileUnchanged: repeats, policyTag: policyTag,
                status: report)
            return Settings(
                answer: SettingsAnswer(
                    document: answer.document, rotationRequested: answer.tokenRotationRequested, nextPoll: answer.nextPoll,
                    acceptsStatus: answer.acceptsStatus),
                policyTag: answer.policyTag)
        }
    }

    /// `GET …/metadata` with `If-None-Match`: `nil` when not modified.
    public static func metadata(_ client: FleetClient, app: String, ifNoneMatch etag: String?, observe: Observer? = nil)
        async throws(CancellationError) -> Result<(bytes: [UInt8], etag: String)?, SyncFailure>
    {
        try await classified(observe) { try await client.metadata(app: app, ifNoneMatch: etag).map { ($0.document, $0.etag) } }
    }

    /// `PATCH …/settings` with `If-Match`: the revision the server made.
    public static func patch(_ client: FleetClient, app: String, _ patch: JSONObject, basedOn base: Int64, observe: Observer? = nil)
        async throws(CancellationError) -> Result<Int64, SyncFailure>
    {
        try await classified(observe) { try await client.patchSettings(app: app, patch: patch, basedOn: base).revision }
    }

    /// `POST …/status`.
    public static func report(_ client: FleetClient, app: String, _ report: StatusReport, observe: Observer? = nil)
        async throws(CancellationError) -> Result<Void, SyncFailure>
    {
        try await classified(observe) { try await client.reportStatus(app: app, report) }
    }

    private static func classified<Value>(_ observe: Observer?, _ request: () async throws -> Value) async throws(CancellationError)
        -> Result<Value, SyncFailure>
    {
        do {
            return .success(try await request())
        } catch {
            if error is CancellationError || Task.isCancelled { throw CancellationError() }
            observe?(error)
            return .failure(SyncFailure.classifying(error))
        }
    }
}
