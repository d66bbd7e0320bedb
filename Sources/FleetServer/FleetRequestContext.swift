import Hummingbird
import NIOCore

/// The request context of fleetset's routes: Hummingbird's core context plus the connection the
/// request came on, so that a long-poll ends when its client goes away, and limits can be kept
/// per client address.
struct FleetRequestContext: RequestContext, RemoteAddressRequestContext {
    var coreContext: CoreRequestContextStorage
    /// The connection (for HTTP/2, the request's stream).
    let channel: any Channel

    init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        channel = source.channel
    }

    var remoteAddress: SocketAddress? { channel.remoteAddress ?? channel.parent?.remoteAddress }
}

/// Runs `operation`, cancelled as soon as `channel` goes away (the client disconnected or shut
/// its sending side): a waiting long-poll then ends at once and its waiter goes away, instead of
/// holding memory for minutes. A channel the guard does not know runs `operation` as it is.
func cancelWhenClosed<T: Sendable>(
    _ channel: any Channel, connections: OpenConnections, _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    let task = Task { try await operation() }
    guard let hook = connections.onClose(channel, { task.cancel() }) else {
        if channel.isActive == false { task.cancel() }
        return try await task.value
    }
    defer { connections.remove(channel, hook) }
    return try await withTaskCancellationHandler {
        try await task.value
    } onCancel: {
        task.cancel()
    }
}
