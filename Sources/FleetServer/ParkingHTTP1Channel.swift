import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1

/// Serves HTTP/1.1 connections with channel handlers of fleetset's own, so that neither an idle
/// connection nor a waiting long-poll holds a Swift task.
///
/// Hummingbird serves each connection in a task that lives as long as the connection, and a
/// task keeps the memory its deepest call grew to until it ends: a held long-poll cost about
/// 44 KB, an idle keep-alive connection 24 KB. Here a connection is its NIO pipeline only: each
/// request runs the same router (routes, middleware, limits) in a short task of its own, and a
/// long-poll that must wait parks in the ``ChangeNotifier`` (a ``ParkedAnswer`` on the request's
/// context) and ends its task; its answer is written when the wait ends.
///
/// Requests on a connection are answered one at a time, in order (requests a client pipelines
/// wait their turn, at most ``FleetConnectionHandler/pipelinedLimit`` parts of them). A body
/// is read whole before the route runs, up to ``FleetConnectionHandler/bodyLimit``; a longer
/// one is cut there, so that the route's own limit refuses it (413).
struct ParkingHTTP1Channel: ServerChildChannel {
    struct Value: ServerChildChannelValue {
        let channel: any Channel
    }

    /// The routes, as Hummingbird's router serves them.
    let responder: RouterResponder<FleetRequestContext>
    /// Handlers between the HTTP codec and the requests (the ``SlowClientGuard``).
    let additionalChannelHandlers: @Sendable () -> [any RemovableChannelHandler]
    /// Ends a parked long-poll's wait (the client went away, the server shuts down).
    let cancelWait: @Sendable (WaitCancellation) -> Void
    /// Where each request's route runs (see ``WorkGate``).
    let workGate: WorkGate
    /// The `Server` and `Date` headers of every answer.
    let answerHeaders: AnswerHeaders
    let logger: Logger

    func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            let pipeline = channel.pipeline.syncOperations
            // Parse errors are answered by the connection handler (after the answer in progress).
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false)
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandlers(additionalChannelHandlers())
            try pipeline.addHandler(FleetConnectionHandler(serving: self))
            return Value(channel: channel)
        }
    }

    /// Nothing: the connection is served by its pipeline, and this task ends at once.
    func handle(value: Value, logger: Logger) async {}
}

/// The `Server` and `Date` headers Hummingbird adds to every answer.
struct AnswerHeaders: Sendable {
    let serverName: String?
    let dates = HTTPDateCache()

    func add(to head: inout HTTPResponse) {
        head.headerFields[.date] = dates.now()
        if let serverName { head.headerFields[.server] = serverName }
    }
}

/// Reads the requests of one connection and writes their answers, on the connection's event
/// loop; see ``ParkingHTTP1Channel``.
final class FleetConnectionHandler: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    /// The largest body any route accepts (4 MiB: metadata, apply, console forms).
    static let largestRouteBody = max(Routes.metadataLimit, ConsoleRoutes.formLimit)
    /// The most of a body read before the route runs: ``largestRouteBody`` and one byte, so
    /// that a longer body meets the route's own 413. A request whose `Content-Length` says more
    /// is answered 413 at once, unread.
    static let bodyLimit = largestRouteBody + 1
    /// The most request parts held while an earlier request is answered; past it the client
    /// is disconnected. (While parts wait, the connection is not read further.)
    static let pipelinedLimit = 256

    /// One request being answered (used on the connection's event loop only). It holds
    /// nothing that holds it: the answer's sender refers to it, not the other way round.
    final class Exchange {
        /// Ends the request's parked wait, if it parks.
        let cancellation: WaitCancellation
        /// The task streaming the answer's body (server-sent events), while it runs.
        private var stream: Task<Void, Never>?
        /// The server is shutting down or the connection is gone: a stream ends at once.
        private var streamEnded = false

        init(cancellation: WaitCancellation) { self.cancellation = cancellation }

        func streamStarted(_ task: Task<Void, Never>) {
            if streamEnded { task.cancel() } else { stream = task }
        }

        /// The stream's task ended (and its memory can go).
        func streamFinished() { stream = nil }

        /// Ends the stream, now or as soon as it starts.
        func endStream() {
            streamEnded = true
            stream?.cancel()
        }
    }

    private let serving: ParkingHTTP1Channel
    private var context: ChannelHandlerContext?
    private var head: HTTPRequest?
    private var body = ByteBuffer()
    private var exchange: Exchange?
    private var pipelined = CircularBuffer<HTTPRequestPart>()
    /// Close once the answer in progress is written (the client asked, or the server is
    /// shutting down, or the client can send nothing more).
    private var closeAfterAnswer = false
    /// The server is shutting down.
    private var quiescing = false
    /// The connection closes after the answer being written: what the client sends is ignored.
    private var closing = false
    /// A read the channel asked for while requests wait their turn: made once they are taken.
    private var readHeld = false

    init(serving: ParkingHTTP1Channel) {
        self.serving = serving
    }

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        endExchange()
        self.context = nil
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        guard !closing else { return }
        guard exchange == nil, pipelined.isEmpty else {
            pipelined.append(part)
            if pipelined.count > Self.pipelinedLimit { context.close(promise: nil) }
            return
        }
        read(part, context: context)
    }

    private func read(_ part: HTTPRequestPart, context: ChannelHandlerContext) {
        switch part {
        case .head(let request):
            if let length = request.headerFields[.contentLength].flatMap(Int.init), length > Self.largestRouteBody {
                refuseLargeBody(request, context: context)
                return
            }
            head = request
            body.clear()
        case .body(var chunk):
            let room = Self.bodyLimit - body.readableBytes
            if room > 0, let bytes = chunk.readSlice(length: min(room, chunk.readableBytes)) { body.writeImmutableBuffer(bytes) }
        case .end:
            guard let request = head else { return }
            head = nil
            begin(request, context: context)
        }
    }

    /// Reads are held while requests wait their turn (a client that sends and never reads
    /// cannot make the server hold its requests or answers without end), and made once they
    /// are taken.
    func read(context: ChannelHandlerContext) {
        guard pipelined.isEmpty else {
            readHeld = true
            return
        }
        context.read()
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { takePipelined(context: context) }
        context.fireChannelWritabilityChanged()
    }

    /// A request that cannot be parsed: nothing more is read; 400 and the connection closed, or,
    /// with an answer in progress (bytes after a `Connection: close` request), that answer and
    /// then the close.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        guard error is HTTPParserError else {
            context.fireErrorCaught(error)
            return
        }
        guard !closing else { return }
        closing = true
        closeAfterAnswer = true
        pipelined.removeAll()
        guard exchange == nil else { return }
        refuse(.badRequest, message: "the request is not HTTP/1.1 as it must be: \(error)", context: context)
    }

    func channelInactive(context: ChannelHandlerContext) {
        endExchange()
        pipelined.removeAll()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            // Shutting down: an idle connection closes now, a waiting long-poll answers (304),
            // a stream of events ends, a request in progress finishes; then the connection closes.
            quiescing = true
            exchange?.endStream()
            closeWhenDone(context: context)
        } else if let event = event as? ChannelEvent, event == .inputClosed {
            // The client can send nothing more: what it asked is answered, then the connection closes.
            closeWhenDone(context: context)
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func closeWhenDone(context: ChannelHandlerContext) {
        closeAfterAnswer = true
        guard let exchange else {
            if head == nil { context.close(promise: nil) }
            return
        }
        serving.cancelWait(exchange.cancellation)
    }

    /// The connection is gone: a parked wait ends and its record goes; a stream of events stops.
    private func endExchange() {
        guard let exchange else { return }
        self.exchange = nil
        serving.cancelWait(exchange.cancellation)
        exchange.endStream()
    }

    /// Runs `request`'s route in a task of its own, which ends as soon as the route returns.
    private func begin(_ request: HTTPRequest, context: ChannelHandlerContext) {
        if let connection = request.headerFields[.connection], connection.lowercased().contains("close") { closeAfterAnswer = true }
        let exchange = Exchange(cancellation: WaitCancellation())
        let answer = Answer(
            handler: NIOLoopBound(self, eventLoop: context.eventLoop), exchange: NIOLoopBound(exchange, eventLoop: context.eventLoop),
            headers: serving.answerHeaders)
        let parked = ParkedAnswer(cancellation: exchange.cancellation, send: answer.send)
        self.exchange = exchange
        // A request that arrived whole after the server began shutting down does not wait.
        if quiescing { serving.cancelWait(parked.cancellation) }
        let bodyRead = body
        body = ByteBuffer()
        let (responder, logger, channel) = (serving.responder, serving.logger, context.channel)
        let running = NIOLoopBound(exchange, eventLoop: context.eventLoop)
        serving.workGate.submit {
            var requestContext = FleetRequestContext(source: ApplicationRequestContextSource(channel: channel, logger: logger))
            requestContext.parkedAnswer = parked
            let response: Response
            do {
                response = try await responder.respond(
                    to: Request(head: request, body: RequestBody(buffer: bodyRead)), context: requestContext)
            } catch {
                logger.debug("request failed", metadata: ["error": "\(error)"])
                response = Response(status: .internalServerError)
            }
            if parked.isParked { return }
            guard response.body.contentLength == nil else {
                await answer.send(response)
                return
            }
            // A stream (server-sent events) may go on for hours: in a task of its own, outside
            // the gate, kept while it runs so that a shutdown or a close can end it.
            let stream = Task { await answer.send(response) }
            running.eventLoop.execute { running.value.streamStarted(stream) }
            Task {
                await stream.value
                running.eventLoop.execute { running.value.streamFinished() }
            }
        }
    }

    // MARK: - Writing answers (on the event loop)

    /// Writes a whole answer of `exchange`.
    fileprivate func write(_ exchange: Exchange, head: HTTPResponse, body: ByteBuffer) {
        guard exchange === self.exchange, let context else { return }
        writeHead(head, context: context)
        if body.readableBytes > 0 { context.write(wrapOutboundOut(.body(body)), promise: nil) }
        finish(exchange, context: context)
    }

    /// Starts a streamed answer of `exchange`.
    fileprivate func writeStreamHead(_ exchange: Exchange, head: HTTPResponse) {
        guard exchange === self.exchange, let context else { return }
        writeHead(head, context: context)
        context.flush()
        // The server began shutting down before the stream did: it ends at once.
        if quiescing { exchange.endStream() }
    }

    /// A part of a streamed answer, written when the future succeeds; `nil` when the connection
    /// or the exchange is gone.
    fileprivate func writeStreamPart(_ exchange: Exchange, _ part: ByteBuffer) -> EventLoopFuture<Void>? {
        guard exchange === self.exchange, let context else { return nil }
        let promise = context.eventLoop.makePromise(of: Void.self)
        context.writeAndFlush(wrapOutboundOut(.body(part)), promise: promise)
        return promise.futureResult
    }

    /// Ends a streamed answer; `failed`: it could not be written whole, and the connection closes.
    fileprivate func endStream(_ exchange: Exchange, failed: Bool) {
        guard exchange === self.exchange, let context else { return }
        if failed {
            self.exchange = nil
            context.close(promise: nil)
            return
        }
        finish(exchange, context: context)
    }

    private func writeHead(_ head: HTTPResponse, context: ChannelHandlerContext) {
        var head = head
        if closeAfterAnswer { head.headerFields[.connection] = "close" }
        context.write(wrapOutboundOut(.head(head)), promise: nil)
    }

    /// Ends the answer in progress, then closes the connection or reads the next request.
    private func finish(_ exchange: Exchange, context: ChannelHandlerContext) {
        self.exchange = nil
        guard !closeAfterAnswer else {
            closing = true
            let channel = context.channel
            context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
            return
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        takePipelined(context: context)
    }

    /// Takes the requests that waited their turn while the client reads its answers (a client
    /// that does not read is not answered further until it does), then reads on.
    private func takePipelined(context: ChannelHandlerContext) {
        while exchange == nil, !closing, context.channel.isWritable, let part = pipelined.popFirst() { read(part, context: context) }
        if pipelined.isEmpty && readHeld {
            readHeld = false
            context.read()
        }
    }

    /// Answers 413 to a request whose body is longer than any route takes, without reading
    /// it, and closes the connection.
    private func refuseLargeBody(_ request: HTTPRequest, context: ChannelHandlerContext) {
        refuse(.contentTooLarge, code: .tooLarge, message: "the body is larger than \(Self.largestRouteBody) bytes", context: context)
    }

    /// Answers `status` with an error body at once, and closes the connection.
    private func refuse(
        _ status: HTTPResponse.Status, code: ErrorCode = .badRequest, message: String, context: ChannelHandlerContext
    ) {
        closing = true
        var head = HTTPResponse(status: status)
        let body = ByteBuffer(string: ErrorBody(error: code, message: message).json.serialized())
        head.headerFields[.contentType] = "application/json"
        head.headerFields[.contentLength] = "\(body.readableBytes)"
        head.headerFields[.connection] = "close"
        head.headerFields[.xContentTypeOptions] = "nosniff"
        serving.answerHeaders.add(to: &head)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }
}

/// Sends a request's answer from whatever task has it, onto its connection's event loop.
private final class Answer: Sendable {
    private let handler: NIOLoopBound<FleetConnectionHandler>
    private let exchange: NIOLoopBound<FleetConnectionHandler.Exchange>
    private let headers: AnswerHeaders

    init(
        handler: NIOLoopBound<FleetConnectionHandler>, exchange: NIOLoopBound<FleetConnectionHandler.Exchange>, headers: AnswerHeaders
    ) {
        self.handler = handler
        self.exchange = exchange
        self.headers = headers
    }

    /// Writes `response`: a body of known length whole, in one hop; any other streamed.
    func send(_ response: Response) async {
        let exchange = exchange
        var answerHead = response.head
        headers.add(to: &answerHead)
        let head = answerHead
        let (handler, eventLoop) = (handler, handler.eventLoop)
        if response.body.contentLength != nil {
            let collected = CollectedBody()
            try? await response.body.write(CollectingBodyWriter(collected: collected))
            let body = collected.buffer
            eventLoop.execute { handler.value.write(exchange.value, head: head, body: body) }
            return
        }
        eventLoop.execute { handler.value.writeStreamHead(exchange.value, head: head) }
        do {
            try await response.body.write(StreamingBodyWriter(handler: handler, exchange: exchange))
        } catch {
            eventLoop.execute { handler.value.endStream(exchange.value, failed: true) }
        }
    }

    /// A streamed body's parts, each written before the next is asked for.
    private struct StreamingBodyWriter: ResponseBodyWriter {
        let handler: NIOLoopBound<FleetConnectionHandler>
        let exchange: NIOLoopBound<FleetConnectionHandler.Exchange>

        mutating func write(_ buffer: ByteBuffer) async throws {
            let (handler, exchange) = (handler, exchange)
            try await handler.eventLoop.flatSubmit {
                handler.value.writeStreamPart(exchange.value, buffer) ?? handler.eventLoop.makeFailedFuture(ChannelError.ioOnClosedChannel)
            }.get()
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            let (handler, exchange) = (handler, exchange)
            handler.eventLoop.execute { handler.value.endStream(exchange.value, failed: false) }
        }
    }
}

/// A body of known length, collected to be written in one go.
private final class CollectedBody: @unchecked Sendable {
    // Written by one task, then read by it: no other access.
    var buffer = ByteBuffer()
}

private struct CollectingBodyWriter: ResponseBodyWriter {
    let collected: CollectedBody

    mutating func write(_ buffer: ByteBuffer) async throws {
        // The usual body is one buffer: kept as it is, not copied.
        guard collected.buffer.readableBytes > 0 else {
            collected.buffer = buffer
            return
        }
        var buffer = buffer
        collected.buffer.writeBuffer(&buffer)
    }

    consuming func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
