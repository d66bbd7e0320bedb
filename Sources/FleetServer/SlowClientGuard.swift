import NIOCore
import NIOHTTPTypes

/// Protects the server from slow and vanished clients, per connection (HTTP/1.1) or stream
/// (HTTP/2):
///
/// - **Read timeout.** A request must arrive whole (head and body) within ``readTimeout`` of the
///   connection opening or of the previous answer; a client that sends nothing, or trickles a
///   byte at a time, is disconnected. The answer phase is not limited here (a long-poll waits up
///   to five minutes in silence); its own `wait` bounds it.
/// - **A client that goes away.** Hummingbird keeps a connection whose peer shut its sending
///   side open (HTTP allows half-closed connections), so a long-poll would wait for minutes for
///   a client that is gone. A shut input closes the connection, which ends the long-poll at once
///   (see `cancelWhenClosed`) and removes its waiter.
final class SlowClientGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a client has to send a whole request.
    static let readTimeout: TimeAmount = .seconds(30)

    private let readTimeout: TimeAmount
    private var deadline: Scheduled<Void>?

    init(readTimeout: TimeAmount = SlowClientGuard.readTimeout) {
        self.readTimeout = readTimeout
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if case .end = unwrapInboundIn(data) { disarm() }  // the request is in: the answer phase has no read limit
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) { arm(context) }  // answered: the next request has its time
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(_ context: ChannelHandlerContext) {
        disarm()
        let channel = context.channel
        deadline = context.eventLoop.scheduleTask(in: readTimeout) { channel.close(promise: nil) }
    }

    private func disarm() {
        deadline?.cancel()
        deadline = nil
    }
}
