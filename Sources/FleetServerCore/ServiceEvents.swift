import FleetProtocol
import PosixThreads

/// What happened in the service that a watching admin wants to see at once: the console's live
/// updates (server-sent events) follow these.
public enum ServiceEvent: Sendable, Hashable {
    /// A device reported its status for an app.
    case statusReported(app: String, device: String, state: StatusReport.State)
    /// An app's metadata or values changed (`scope`: where).
    case settingsChanged(app: String, scope: Scope)
    /// A device was changed, disabled, deleted or enrolled.
    case deviceChanged(device: String)
    /// Webhook messages were queued (a ping, a redelivery, a digest): the dispatcher looks now.
    case webhooksQueued
    /// Another instance changed something this one cannot name (its change feed reconnected).
    case unknown
}

extension ServiceEvent {
    /// The event of another instance's change.
    public init(_ change: StoreChange) {
        switch change {
        case .values(let app, let scope): self = .settingsChanged(app: app, scope: scope)
        case .device(let id): self = .deviceChanged(device: id)
        case .policy(.device(let id)): self = .deviceChanged(device: id)
        case .policy: self = .unknown
        case .unknown: self = .unknown
        }
    }
}

/// Hands every ``ServiceEvent`` to each current subscriber. A subscriber that falls behind
/// loses the oldest events beyond 256 (it re-reads the state it shows on any event anyway).
public final class ServiceEvents: Sendable {
    private let subscribers = Locked<[Int: AsyncStream<ServiceEvent>.Continuation]>([:])
    private let nextID = Locked(0)

    public init() {}

    /// A stream of the events from now on; it ends when the caller stops iterating it. It keeps
    /// the newest `buffer` events its reader has not taken yet.
    public func subscribe(buffer: Int = 256) -> AsyncStream<ServiceEvent> {
        let id = nextID.withLock { id in
            id += 1
            return id
        }
        let (stream, continuation) = AsyncStream<ServiceEvent>.makeStream(bufferingPolicy: .bufferingNewest(buffer))
        continuation.onTermination = { [weak self] _ in
            _ = self?.subscribers.withLock { $0.removeValue(forKey: id) }
        }
        subscribers.withLock { $0[id] = continuation }
        return stream
    }

    /// How many streams are subscribed.
    public var subscriberCount: Int { subscribers.withLock { $0.count } }

    /// Hands `event` to every subscriber.
    public func publish(_ event: ServiceEvent) {
        for continuation in subscribers.withLock({ Array($0.values) }) { continuation.yield(event) }
    }
}
