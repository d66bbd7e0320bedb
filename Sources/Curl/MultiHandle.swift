import CCurl

/// Owns one libcurl multi handle and frees it in `deinit`.
///
/// Only the driver thread calls its methods, except ``wakeup()``, which libcurl documents as
/// safe from any thread. That invariant is what makes the `@unchecked Sendable` sound.
final class MultiHandle: @unchecked Sendable {
    private let raw: UnsafeMutableRawPointer

    init() throws(HTTPClientError) {
        guard let raw = curl_multi_init() else {
            throw HTTPClientError(
                kind: .libraryUnusable, message: "libcurl could not create its transfer engine (out of memory)", call: "curl_multi_init")
        }
        self.raw = raw
        // HTTP/2 multiplexing: concurrent requests to one server share one connection.
        let code = ccurl_multi_setopt_long(raw, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        // On a throw from here on, `self` is fully initialized, so deinit frees the handle.
        guard code == CURLM_OK else { throw Self.error(code, "curl_multi_setopt(CURLMOPT_PIPELINING)") }
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

    /// Drives every transfer as far as it can go without blocking.
    func perform() throws(HTTPClientError) {
        var running: Int32 = 0
        try check(curl_multi_perform(raw, &running), "curl_multi_perform")
    }

    /// The next finished transfer: its easy handle and result code.
    func nextFinished() -> (easy: UnsafeMutableRawPointer, result: CURLcode)? {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(raw, &remaining) {
            if message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle {
                return (easy, message.pointee.data.result)
            }
        }
        return nil
    }

    /// Waits for socket activity, libcurl's next timer, a ``wakeup()`` or `maxWait`, whichever
    /// comes first.
    func poll(maxWaitMilliseconds: Int32) throws(HTTPClientError) {
        var ready: Int32 = 0
        try check(curl_multi_poll(raw, nil, 0, maxWaitMilliseconds, &ready), "curl_multi_poll")
    }

    /// Makes a pending or next ``poll(maxWaitMilliseconds:)`` return at once. Thread-safe.
    func wakeup() {
        let code = curl_multi_wakeup(raw)
        precondition(code == CURLM_OK, "curl_multi_wakeup failed with \(code.rawValue)")
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
