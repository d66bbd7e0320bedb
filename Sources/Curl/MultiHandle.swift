import CCurl

/// Owns one libcurl multi handle, driven through libcurl's multi_socket API (see
/// ``SocketWatch``), and frees it in `deinit`.
///
/// Only the driver thread calls its methods, except ``wakeup()``, which is safe from any
/// thread. That invariant is what makes the `@unchecked Sendable` sound.
final class MultiHandle: @unchecked Sendable {
    private let raw: UnsafeMutableRawPointer
    /// The sockets and timer libcurl asks for; outlives `raw`, whose clean-up may still call it.
    private let watch: SocketWatch

    init() throws(HTTPClientError) {
        guard let raw = curl_multi_init() else {
            throw HTTPClientError(
                kind: .libraryUnusable, message: "libcurl could not create its transfer engine (out of memory)", call: "curl_multi_init")
        }
        do {
            watch = try SocketWatch()
        } catch {
            curl_multi_cleanup(raw)
            throw error
        }
        self.raw = raw
        // On a throw from here on, `self` is fully initialized, so deinit frees the handle.
        // HTTP/2 multiplexing: concurrent requests to one server share one connection.
        let code = ccurl_multi_setopt_long(raw, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        guard code == CURLM_OK else { throw Self.error(code, "curl_multi_setopt(CURLMOPT_PIPELINING)") }
        try check(watch.install(on: raw), "curl_multi_setopt(CURLMOPT_SOCKETFUNCTION)")
    }

    deinit {
        // Every easy handle has been removed by the driver before it lets go of the multi handle,
        // so only a bad handle — a bug here — could make this fail.
        let code = curl_multi_cleanup(raw)
        precondition(code == CURLM_OK, "curl_multi_cleanup failed with \(code.rawValue)")
    }

    func add(_ easy: EasyHandle) throws(HTTPClientError) {
        try check(curl_multi_add_handle(raw, easy.raw), "curl_multi_add_handle")
    }

    /// Detaches a transfer; after this no callback of it runs. Only a handle that was never
    /// added can fail here, which would be a bug in the driver.
    func remove(_ easy: EasyHandle) {
        let code = curl_multi_remove_handle(raw, easy.raw)
        precondition(code == CURLM_OK, "curl_multi_remove_handle failed with \(code.rawValue)")
    }

    /// Waits up to `maxWaitMilliseconds` (less when libcurl's timer is due sooner) for sockets
    /// libcurl watches or a ``wakeup()``, then drives the transfers of the sockets that are
    /// ready, and all of them that are due when the timer is.
    func drive(maxWaitMilliseconds: Int32) throws(HTTPClientError) {
        let (ready, timerDue) = watch.wait(milliseconds: maxWaitMilliseconds)
        var running: Int32 = 0
        for socket in ready {
            try check(curl_multi_socket_action(raw, socket.socket, socket.events, &running), "curl_multi_socket_action")
        }
        if timerDue {
            try check(curl_multi_socket_action(raw, CURL_SOCKET_TIMEOUT, 0, &running), "curl_multi_socket_action")
        }
    }

    /// The transfers that have finished: their easy handles and result codes.
    ///
    /// All of libcurl's messages are read before any handle is removed: libcurl's
    /// `curl_multi_remove_handle` looks through the messages not yet read, so removing each
    /// handle as its message is read costs time in the square of a burst of finished transfers.
    func finished() -> [(easy: UnsafeMutableRawPointer, result: CURLcode)] {
        var done: [(easy: UnsafeMutableRawPointer, result: CURLcode)] = []
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(raw, &remaining) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                done.append((easy, message.pointee.data.result))
            }
        }
        return done
    }

    /// Makes a pending or next ``drive(maxWaitMilliseconds:)`` return at once. Thread-safe.
    func wakeup() {
        watch.wake()
    }

    private func check(_ code: CURLMcode, _ call: String) throws(HTTPClientError) {
        guard code != CURLM_OK else { return }
        throw Self.error(code, call)
    }

    private static func error(_ code: CURLMcode, _ call: String) -> HTTPClientError {
        HTTPClientError(
            kind: .transferFailed, message: "libcurl's transfer engine failed",
            curlCode: Int(code.rawValue), call: call, curlMessage: String(cString: curl_multi_strerror(code)))
    }
}
