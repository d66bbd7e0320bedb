import FleetJSON
import FleetProtocol
import Logging
import PosixThreads

/// Who is calling: the bearer tokens of devices (their rotation and last-seen times included),
/// accounts' API tokens (their expiry, revocation and last use) and the admin token file, the
/// bootstrap owner's.
public struct Authenticator: FleetService {
    public let context: ServiceContext
    let adminTokenHash: String
    /// Last-seen times, written in shared transactions.
    let seenWrites: GroupCommit<DeviceSeen, Void>

    /// - Parameter adminTokenHash: ``Credentials/hash(_:)`` of the admin token.
    public init(context: ServiceContext, adminTokenHash: String) {
        self.context = context
        self.adminTokenHash = adminTokenHash
        self.seenWrites = GroupCommit { [store = context.store] in try await store.touch($0) }
    }
}

/// People and service accounts, their roles and scopes, their API tokens, passwords and second
/// factors, sign-in; who may see which device (``AccessControl``).
public struct AccountService: FleetService {
    public let context: ServiceContext
    /// Password hashing, at most two at a time, and the failed sign-ins per account.
    let signIns: SignInGuard

    public init(context: ServiceContext, signIns: SignInGuard = SignInGuard()) {
        self.context = context
        self.signIns = signIns
    }
}

/// The tamper-evident audit trail: every admin action appended, hash-chained, logged as
/// `event=audit`; read back and verified.
public struct AuditTrail: FleetService {
    public let context: ServiceContext

    public init(context: ServiceContext) { self.context = context }
}

/// What a device does: enroll, fetch and long-poll its settings, write back the ones it may
/// change, report status and facts, rotate its token, learn its agent policy.
public struct DeviceGateway: FleetService {
    public let context: ServiceContext
    /// How long a long-poll asking for a wait really waits at most.
    let waitSpread: @Sendable (Duration) -> Duration
    /// What a device whose long-poll finds the server busy (``ChangeNotifier/busyLimit``) is
    /// told: poll again after this, spread.
    let busyPollDelay: @Sendable () -> Duration
    /// Status reports, written in shared transactions.
    let statusWrites: GroupCommit<StatusRecord, Void>

    /// - Parameters:
    ///   - waitSpread: how long a long-poll asking for a wait really waits at most
    ///     (``spreadWait(_:fraction:)`` with a random fraction by default).
    ///   - busyPollDelay: when a device whose long-poll finds the server busy should poll again
    ///     (``busyPollDelay(_:fraction:)`` of ``defaultBusyPollInterval`` with a random fraction
    ///     by default).
    public init(
        context: ServiceContext,
        waitSpread: @escaping @Sendable (Duration) -> Duration = { DeviceGateway.spreadWait($0, fraction: .random(in: 0..<1)) },
        busyPollDelay: @escaping @Sendable () -> Duration = {
            DeviceGateway.busyPollDelay(DeviceGateway.defaultBusyPollInterval, fraction: .random(in: 0..<1))
        }
    ) {
        self.context = context
        self.waitSpread = waitSpread
        self.busyPollDelay = busyPollDelay
        self.statusWrites = GroupCommit { [store = context.store] in try await store.recordStatuses($0) }
    }
}

/// What an admin does with an app's settings: its metadata, its values at every scope (key
/// paths included), the history and reverts, and the read views of them (explain, a scope's
/// values, the devices' standing).
public struct SettingsAdmin: FleetService {
    public let context: ServiceContext

    public init(context: ServiceContext) { self.context = context }
}

/// Safe changes: rollouts started, resumed and aborted by an admin, and supervised on a timer.
public struct RolloutService: FleetService {
    public let context: ServiceContext

    public init(context: ServiceContext) { self.context = context }
}

/// The fleet's members and what governs them: devices, enrollment tokens, agent policies, and
/// the console's ended sessions.
public struct FleetDirectory: FleetService {
    public let context: ServiceContext

    public init(context: ServiceContext) { self.context = context }
}

/// Webhook subscriptions: made, listed, shown with their messages, rotated, redelivered, removed.
public struct WebhookService: FleetService {
    public let context: ServiceContext

    public init(context: ServiceContext) { self.context = context }
}

/// Every service of one server over one ``ServiceContext``: what the HTTP layer calls.
public final class FleetServices: Sendable {
    public let context: ServiceContext
    public let auth: Authenticator
    public let gateway: DeviceGateway
    public let admin: SettingsAdmin
    public let rollouts: RolloutService
    public let directory: FleetDirectory
    public let accounts: AccountService
    public let audit: AuditTrail
    public let webhooks: WebhookService

    /// - Parameters:
    ///   - adminTokenHash: ``Credentials/hash(_:)`` of the admin token.
    ///   - clock: what waits and durations are measured by (the system's continuous clock by default).
    ///   - waitSpread, busyPollDelay: see ``DeviceGateway/init(context:waitSpread:busyPollDelay:)``.
    ///   - notifier: the change notifier, made with `clock` (a new one by default).
    ///   - writeLock: the lock shared with the other instances on the same database, if any.
    ///   - passwordParameters: what new password hashes cost (scrypt's N = 2^17 unless told).
    public init(
        store: any SettingsStore, adminTokenHash: String, wallClock: any WallClock, clock: ServiceClock = .continuous,
        waitSpread: @escaping @Sendable (Duration) -> Duration = { DeviceGateway.spreadWait($0, fraction: .random(in: 0..<1)) },
        busyPollDelay: @escaping @Sendable () -> Duration = {
            DeviceGateway.busyPollDelay(DeviceGateway.defaultBusyPollInterval, fraction: .random(in: 0..<1))
        },
        notifier: ChangeNotifier? = nil, metrics: ServerMetrics = ServerMetrics(), writeLock: (any SharedWriteLock)? = nil,
        passwordParameters: PasswordHash.Parameters = .current, logger: Logger
    ) {
        let context = ServiceContext(
            store: store, wallClock: wallClock, clock: clock, notifier: notifier ?? ChangeNotifier(clock: clock), metrics: metrics,
            writeLock: writeLock, logger: logger)
        self.context = context
        auth = Authenticator(context: context, adminTokenHash: adminTokenHash)
        gateway = DeviceGateway(context: context, waitSpread: waitSpread, busyPollDelay: busyPollDelay)
        admin = SettingsAdmin(context: context)
        rollouts = RolloutService(context: context)
        directory = FleetDirectory(context: context)
        accounts = AccountService(context: context, signIns: SignInGuard(parameters: passwordParameters))
        audit = AuditTrail(context: context)
        webhooks = WebhookService(context: context)
    }

    /// The wall clock's time, in seconds since the epoch.
    public var now: Int64 { context.now }
    /// Reports and changes as they happen, for the console's live updates.
    public var events: ServiceEvents { context.events }
    /// What the server measures.
    public var metrics: ServerMetrics { context.metrics }
}
