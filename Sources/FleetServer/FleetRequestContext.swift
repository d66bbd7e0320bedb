import Hummingbird
import NIOCore
import Synchronization

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

/// Runs `operation`, cancelled as soon as `channel` closes (the client disconnected): a waiting
/// long-poll then ends at once and its waiter goes away, instead of holding memory for minutes.
func cancelWhenClosed<T: Sendable>(_ channel: any Channel, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            await ClosedSignal(channel).wait()
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next() else { throw CancellationError() }
        guard let result = first else { throw CancellationError() }
        return result
    }
}

/// Waits for a channel to close, or for the waiting task to be cancelled, whichever comes first
/// (`closeFuture.get()` alone cannot be cancelled, and would hold its task group open).
private final class ClosedSignal: Sendable {
    private let channel: any Channel
    private let continuation = Mutex<(continuation: CheckedContinuation<Void, Never>?, done: Bool)>((nil, false))

    init(_ channel: any Channel) {
        self.channel = channel
    }

    func wait() async {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let resumeNow = self.continuation.withLock { state in
                    if state.done { return true }
                    state.continuation = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
                channel.closeFuture.whenComplete { _ in self.finish() }
            }
        } onCancel: {
            finish()
        }
    }

    private func finish() {
        let waiting = continuation.withLock { state in
            defer { state = (nil, true) }
            return state.continuation
        }
        waiting?.resume()
    }
}
