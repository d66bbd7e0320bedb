import CCurl
import CEventPoll

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What libcurl's multi_socket API needs from the transfer thread: the sockets it asks to have
/// watched (in an epoll set), the one timer it asks for, and a way for other threads to wake
/// the wait (an eventfd in the same set).
///
/// With it, the thread's work per wake-up is proportional to the sockets that are ready, not to
/// every transfer in flight, as it is with `curl_multi_perform` and `curl_multi_poll`: one client
/// can hold thousands of long-polls (the fleet simulator does) at little cost.
///
/// Only the transfer thread calls its methods (libcurl's callbacks run on that thread, inside
/// `curl_multi_socket_action`, `curl_multi_add_handle` and `curl_multi_remove_handle`), except
/// ``wake()``, which any thread may call: that is what makes `@unchecked Sendable` sound.
final class SocketWatch: @unchecked Sendable {
    /// A socket that is ready, and the `CURL_CSELECT_*` bits to hand `curl_multi_socket_action`.
    struct Ready {
        let socket: Int32
        let events: Int32
    }

    private let poll: Int32
    private let wakeSignal: Int32
    private var watched: Set<Int32> = []
    private var readyBuffer: [epoll_event]
    /// When libcurl wants `curl_multi_socket_action(CURL_SOCKET_TIMEOUT)` (monotonic ns), if at all.
    private(set) var timerDeadline: UInt64?

    init() throws(HTTPClientError) {
        let poll = epoll_create1(Int32(EPOLL_CLOEXEC))
        guard poll >= 0 else { throw Self.error("epoll_create1") }
        let wakeSignal = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        guard wakeSignal >= 0 else {
            let error = Self.error("eventfd")
            close(poll)
            throw error
        }
        self.poll = poll
        self.wakeSignal = wakeSignal
        readyBuffer = Array(repeating: epoll_event(), count: 512)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.fd = wakeSignal
        guard epoll_ctl(poll, EPOLL_CTL_ADD, wakeSignal, &event) == 0 else { throw Self.error("epoll_ctl") }
    }

    deinit {
        close(wakeSignal)
        close(poll)
    }

    /// Installs this watch as `multi`'s socket and timer callbacks.
    func install(on multi: UnsafeMutableRawPointer) -> CURLMcode {
        let context = Unmanaged.passUnretained(self).toOpaque()
        for code in [
            ccurl_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, context),
            ccurl_multi_setopt_socket_callback(multi, socketCallback),
            ccurl_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, context),
            ccurl_multi_setopt_timer_callback(multi, timerCallback),
        ] where code != CURLM_OK {
            return code
        }
        return CURLM_OK
    }

    /// Makes a pending or the next ``wait(milliseconds:)`` return at once. Thread-safe.
    func wake() {
        var one: UInt64 = 1
        // EAGAIN means the counter is already non-zero: the waiter wakes anyway.
        _ = write(wakeSignal, &one, MemoryLayout<UInt64>.size)
    }

    /// Waits up to `milliseconds` (less when libcurl's timer is due sooner) for ready sockets or
    /// a ``wake()``; returns the ready sockets, and whether libcurl's timer is due.
    func wait(milliseconds: Int32) -> (ready: [Ready], timerDue: Bool) {
        var timeout = milliseconds
        if let deadline = timerDeadline {
            let now = MonotonicTime.now()
            let untilDue = deadline > now ? (deadline - now + 999_999) / 1_000_000 : 0
            timeout = Int32(min(UInt64(timeout), untilDue))
        }
        let count = readyBuffer.withUnsafeMutableBufferPointer { buffer in
            epoll_wait(poll, buffer.baseAddress, Int32(buffer.count), timeout)
        }
        var ready: [Ready] = []
        if count > 0 {
            ready.reserveCapacity(Int(count))
            for event in readyBuffer[0..<Int(count)] {
                if event.data.fd == wakeSignal {
                    var value: UInt64 = 0
                    _ = read(wakeSignal, &value, MemoryLayout<UInt64>.size)
                    continue
                }
                ready.append(Ready(socket: event.data.fd, events: Self.curlEvents(event.events)))
            }
        }
        // EINTR (count -1) is a wake-up like any other: the caller loops. A wait that ended by
        // its own timeout counts as libcurl's timer too, whether or not libcurl asked for one
        // then: a safety net (libcurl checks what is due, which costs next to nothing), so that
        // a missed timer or event holds a transfer up for a second at most.
        let timerDue = count == 0 || (timerDeadline.map { $0 <= MonotonicTime.now() } ?? false)
        if timerDue { timerDeadline = nil }
        return (ready, timerDue)
    }

    /// The `CURL_CSELECT_*` bits for epoll's `events`. A hang-up or error is handed on as both
    /// readable and an error, so that libcurl reads the end of the stream and sees why.
    static func curlEvents(_ events: UInt32) -> Int32 {
        var bits: Int32 = 0
        if events & (EPOLLIN.rawValue | EPOLLHUP.rawValue | EPOLLERR.rawValue) != 0 { bits |= CURL_CSELECT_IN }
        if events & EPOLLOUT.rawValue != 0 { bits |= CURL_CSELECT_OUT }
        if events & (EPOLLERR.rawValue | EPOLLHUP.rawValue) != 0 { bits |= CURL_CSELECT_ERR }
        return bits
    }

    /// libcurl's `CURLMOPT_SOCKETFUNCTION`: what to watch `socket` for (`CURL_POLL_*`).
    /// Returns 0, or -1 when the socket cannot be watched (libcurl then fails the transfers
    /// rather than leaving them to wait for ever).
    fileprivate func watch(_ socket: Int32, what: Int32) -> Int32 {
        guard what != CURL_POLL_REMOVE else {
            if watched.remove(socket) != nil { _ = epoll_ctl(poll, EPOLL_CTL_DEL, socket, nil) }
            return 0
        }
        var event = epoll_event()
        if what == CURL_POLL_IN || what == CURL_POLL_INOUT { event.events |= EPOLLIN.rawValue }
        if what == CURL_POLL_OUT || what == CURL_POLL_INOUT { event.events |= EPOLLOUT.rawValue }
        event.data.fd = socket
        // The set may not be what `watched` says: a socket libcurl closed leaves the set by
        // itself (ENOENT on a change), and its number may come back for a new one (EEXIST on an
        // add). Either way the other operation is the right one.
        var result = epoll_ctl(poll, watched.contains(socket) ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, socket, &event)
        if result != 0, errno == ENOENT {
            result = epoll_ctl(poll, EPOLL_CTL_ADD, socket, &event)
        } else if result != 0, errno == EEXIST {
            result = epoll_ctl(poll, EPOLL_CTL_MOD, socket, &event)
        }
        guard result == 0 else {
            watched.remove(socket)
            return -1
        }
        watched.insert(socket)
        return 0
    }

    /// libcurl's `CURLMOPT_TIMERFUNCTION`: call back in `milliseconds`, or never (-1).
    fileprivate func setTimer(milliseconds: Int) {
        timerDeadline = milliseconds < 0 ? nil : MonotonicTime.now() &+ UInt64(milliseconds) &* 1_000_000
    }

    private static func error(_ call: String) -> HTTPClientError {
        HTTPClientError(
            kind: .libraryUnusable, message: "could not set up the HTTP client's socket wait (\(String(cString: strerror(errno))))",
            call: call)
    }
}

private let socketCallback: curl_socket_callback = { _, socket, what, context, _ in
    guard let context else { return 0 }
    return Unmanaged<SocketWatch>.fromOpaque(context).takeUnretainedValue().watch(socket, what: what)
}

private let timerCallback: curl_multi_timer_callback = { _, milliseconds, context in
    guard let context else { return 0 }
    Unmanaged<SocketWatch>.fromOpaque(context).takeUnretainedValue().setTimer(milliseconds: milliseconds)
    return 0
}
