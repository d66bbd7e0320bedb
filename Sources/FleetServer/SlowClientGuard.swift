import NIOCore
import NIOHTTPTypes
import PosixThreads

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Protects the server from slow and vanished clients, per connection (HTTP/1.1) or stream
/// (HTTP/2):
///
/// - **Read timeout.** A request must arrive whole (head and body) within ``readTimeout`` of the
///   connection opening or of the previous answer, and so must the rest of a body the server
///   answered early (a 401 before the body): a client that sends nothing, or trickles a byte at
///   a time, is disconnected. The answer phase is not limited here (a long-poll waits up to five
///   minutes in silence); its own `wait` bounds it.
/// - **A client that goes away.** When the connection closes, or the client shuts its sending
///   side (Hummingbird keeps half-closed connections open, as HTTP allows), the requests waiting
///   on it are told through ``OpenConnections``: a long-poll ends at once and its waiter goes
///   away. Other answers are still written to a half-closed connection.
/// - **A client that vanished.** A device behind NAT that loses power sends nothing more, and
///   its long-poll would hold a connection (and a long-poll slot) until its wait ends. TCP
///   keepalive probes every connection idle for ``keepaliveIdle`` (then every
///   ``keepaliveInterval``, ``keepaliveProbes`` times): a dead peer is found within two
///   minutes and its long-poll ends, and the probes keep the NAT's mapping of a live long-poll
///   fresh from the server's side too (the agent probes from its side every minute).
final class SlowClientGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// How long a client has to send a whole request.
    static let readTimeout: TimeAmount = .seconds(30)

    /// Seconds a connection is idle before the first keepalive probe: below the idle timeouts
    /// of common NATs and firewalls (a minute and more).
    static let keepaliveIdle = 45
    /// Seconds between probes that get no answer.
    static let keepaliveInterval = 15
    /// Unanswered probes before the connection is dropped.
    static let keepaliveProbes = 4

    private let readTimeout: TimeAmount
    private let connections: OpenConnections
    /// When the request on the clock must be in; `nil` while an answer is being prepared.
    private var deadline: NIODeadline?
    /// The one timer that checks ``deadline``. It is not moved on every request (that would
    /// schedule and cancel a task per request): when it fires early it is set again for the
    /// deadline as it is then.
    private var check: Scheduled<Void>?
    /// A request head came and its answer has not been sent yet.
    private var answerPending = false

    init(readTimeout: TimeAmount = SlowClientGuard.readTimeout, connections: OpenConnections) {
        self.readTimeout = readTimeout
        self.connections = connections
    }

    func handlerAdded(context: ChannelHandlerContext) {
        connections.opened(context.channel)
        // An HTTP/1 connection's parent is the listening socket; an HTTP/2 stream's, its connection.
        let streamOfConnection = context.channel.parent?.parent != nil
        Self.probeWhenIdle(streamOfConnection ? context.channel.parent ?? context.channel : context.channel)
        if context.channel.isActive { arm(context) }
    }

    /// Turns on TCP keepalive for the connection (an HTTP/2 stream's parent).
    static func probeWhenIdle(_ connection: any Channel) {
        let options: [(ChannelOptions.Types.SocketOption, SocketOptionValue)] = [
            (ChannelOptions.socketOption(.so_keepalive), 1),
            (ChannelOptions.tcpOption(NIOBSDSocket.Option(rawValue: TCP_KEEPIDLE)), keepaliveIdle),
            (ChannelOptions.tcpOption(NIOBSDSocket.Option(rawValue: TCP_KEEPINTVL)), keepaliveInterval),
            (ChannelOptions.tcpOption(NIOBSDSocket.Option(rawValue: TCP_KEEPCNT)), keepaliveProbes),
        ]
        // A connection that is gone already refuses them; it needs none.
        for (option, value) in options { connection.setOption(option, value: value).whenFailure { _ in } }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context)
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stopChecking()
        connections.closed(context.channel)
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stopChecking()
        connections.closed(context.channel)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head: answerPending = true
        case .body: break
        case .end:
            // The request is in: while it is answered, no read limit (a long-poll waits).
            // After an early answer, the rest of its body was on the clock: now the next
            // request is, from the answer on (the timer keeps running).
            if answerPending { disarm() }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data) {
            answerPending = false
            arm(context)  // answered: the next request (or the rest of this one) has its time
        }
        context.write(data, promise: promise)
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let event = event as? ChannelEvent, event == .inputClosed {
            connections.closed(context.channel)  // nothing more can come: waiting requests end
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func arm(_ context: ChannelHandlerContext) {
        let due = NIODeadline.now() + readTimeout
        deadline = due
        if check == nil { scheduleCheck(context, at: due) }
    }

    private func disarm() {
        deadline = nil
    }

    private func scheduleCheck(_ context: ChannelHandlerContext, at due: NIODeadline) {
        check = context.eventLoop.assumeIsolated().scheduleTask(deadline: due) { [self] in
            check = nil
            guard let deadline else { return }  // an answer is being prepared: no limit
            if deadline <= .now() {
                context.channel.close(promise: nil)
            } else {
                scheduleCheck(context, at: deadline)
            }
        }
    }

    private func stopChecking() {
        deadline = nil
        check?.cancel()
        check = nil
    }
}

/// The open connections (HTTP/1.1) and streams (HTTP/2), each with what to run when it goes
/// away: one entry per connection, whatever the number of requests it carries, removed when
/// it closes.
final class OpenConnections: Sendable {
    private struct State {
        var hooks: [ObjectIdentifier: [Int: @Sendable () -> Void]] = [:]
        var next = 0
    }

    private let state = Locked(State())

    /// Registers `channel` as open.
    func opened(_ channel: any Channel) {
        state.withLock { state in
            if state.hooks[ObjectIdentifier(channel)] == nil { state.hooks[ObjectIdentifier(channel)] = [:] }
        }
    }

    /// `channel` is gone (or can send nothing more): runs its hooks and forgets it.
    func closed(_ channel: any Channel) {
        let hooks = state.withLock { $0.hooks.removeValue(forKey: ObjectIdentifier(channel)) } ?? [:]
        for hook in hooks.values { hook() }
    }

    /// Runs `hook` when `channel` goes away; returns its id, or `nil` when the channel is not
    /// open any more (the caller acts at once).
    func onClose(_ channel: any Channel, _ hook: @escaping @Sendable () -> Void) -> Int? {
        state.withLock { state in
            guard state.hooks[ObjectIdentifier(channel)] != nil else { return nil }
            state.next += 1
            state.hooks[ObjectIdentifier(channel)]?[state.next] = hook
            return state.next
        }
    }

    /// Forgets a hook (its request ended).
    func remove(_ channel: any Channel, _ id: Int) {
        state.withLock { _ = $0.hooks[ObjectIdentifier(channel)]?.removeValue(forKey: id) }
    }

    /// How many connections are open (for tests).
    var count: Int { state.withLock { $0.hooks.count } }
}
