import CCurl

/// Owns one libcurl easy handle together with the memory libcurl points into — the error
/// buffer and the request header list — and frees all of it in `deinit`.
///
/// Not thread-safe: the submitting task configures it, then only the driver thread uses it.
/// Every `CURLcode` goes through ``check(_:_:)``.
final class EasyHandle {
    /// The `CURL *`; valid for the handle's lifetime.
    let raw: UnsafeMutableRawPointer
    private let errorBuffer: UnsafeMutablePointer<CChar>
    /// The string lists libcurl points into (`CURLOPT_HTTPHEADER`, `CURLOPT_CONNECT_TO`), by option.
    private var lists: [UInt32: UnsafeMutablePointer<curl_slist>] = [:]

    init() throws(HTTPClientError) {
        guard let raw = curl_easy_init() else {
            throw HTTPClientError(
                kind: .libraryUnusable, message: "libcurl could not create a transfer (out of memory)", call: "curl_easy_init")
        }
        self.raw = raw
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        try set(CURLOPT_ERRORBUFFER, pointer: UnsafeMutableRawPointer(errorBuffer))
    }

    deinit {
        curl_easy_cleanup(raw)
        for list in lists.values { curl_slist_free_all(list) }
        errorBuffer.deallocate()
    }

    /// libcurl's error-buffer text for the last failure, empty when it wrote none.
    var errorText: String { String(cString: errorBuffer) }

    // MARK: Options

    func set(_ option: CURLoption, _ value: Int) throws(HTTPClientError) {
        try check(ccurl_easy_setopt_long(raw, option, value), option)
    }

    func set(_ option: CURLoption, _ value: Bool) throws(HTTPClientError) {
        try set(option, value ? 1 : 0)
    }

    func set(_ option: CURLoption, offset value: Int64) throws(HTTPClientError) {
        try check(ccurl_easy_setopt_off_t(raw, option, curl_off_t(value)), option)
    }

    /// Sets a string option; libcurl copies the string.
    func set(_ option: CURLoption, _ value: String) throws(HTTPClientError) {
        try check(ccurl_easy_setopt_string(raw, option, value), option)
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) throws(HTTPClientError) {
        try check(ccurl_easy_setopt_pointer(raw, option, pointer), option)
    }

    func set(_ option: CURLoption, callback: curl_write_callback) throws(HTTPClientError) {
        try check(ccurl_easy_setopt_write_callback(raw, option, callback), option)
    }

    /// Replaces the request header list (`CURLOPT_HTTPHEADER`); the handle owns the list.
    func setHeaderLines(_ lines: [String]) throws(HTTPClientError) {
        try set(CURLOPT_HTTPHEADER, lines: lines)
    }

    /// Sets a string-list option; the handle owns the list until it is replaced or freed.
    func set(_ option: CURLoption, lines: [String]) throws(HTTPClientError) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines {
            guard let appended = curl_slist_append(list, line) else {
                curl_slist_free_all(list)
                throw HTTPClientError(
                    kind: .libraryUnusable, message: "out of memory while building a list for option \(option.rawValue)",
                    call: "curl_slist_append")
            }
            list = appended
        }
        try check(ccurl_easy_setopt_slist(raw, option, list), option)
        curl_slist_free_all(lists[option.rawValue])
        lists[option.rawValue] = list
    }

    /// Sets a request body that libcurl copies (`CURLOPT_POSTFIELDSIZE_LARGE` then
    /// `CURLOPT_COPYPOSTFIELDS`), binary-safe.
    func setBody(_ bytes: [UInt8]) throws(HTTPClientError) {
        try set(CURLOPT_POSTFIELDSIZE_LARGE, offset: Int64(bytes.count))
        let code = bytes.withUnsafeBufferPointer { buffer in
            // An empty array may have no storage; libcurl copies zero bytes from "" then.
            guard let base = buffer.baseAddress else {
                return ccurl_easy_setopt_string(raw, CURLOPT_COPYPOSTFIELDS, "")
            }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) {
                ccurl_easy_setopt_string(raw, CURLOPT_COPYPOSTFIELDS, $0)
            }
        }
        try check(code, CURLOPT_COPYPOSTFIELDS)
    }

    // MARK: Information

    // A getinfo of a known CURLINFO with its documented type cannot fail; if it does, the
    // client has a bug, so it traps (as swift-nio does for impossible errno values).

    func info(long info: CURLINFO) -> Int {
        var value = 0
        let code = ccurl_easy_getinfo_long(raw, info, &value)
        precondition(code == CURLE_OK, "curl_easy_getinfo(\(info.rawValue)) failed with \(code.rawValue): wrong CURLINFO type")
        return value
    }

    func info(offset info: CURLINFO) -> Int64 {
        var value: curl_off_t = 0
        let code = ccurl_easy_getinfo_off_t(raw, info, &value)
        precondition(code == CURLE_OK, "curl_easy_getinfo(\(info.rawValue)) failed with \(code.rawValue): wrong CURLINFO type")
        return Int64(value)
    }

    // MARK: The checked funnel

    /// Turns a failed `curl_easy_setopt` into an error naming the option and libcurl's reason.
    private func check(_ code: CURLcode, _ option: CURLoption) throws(HTTPClientError) {
        guard code != CURLE_OK else { return }
        let name = curl_easy_option_by_id(option).flatMap { $0.pointee.name.map { String(cString: $0) } } ?? "\(option.rawValue)"
        let reason = errorText.isEmpty ? String(cString: curl_easy_strerror(code)) : errorText
        throw HTTPClientError(
            kind: code == CURLE_NOT_BUILT_IN || code == CURLE_UNKNOWN_OPTION ? .libraryUnusable : .invalidRequest,
            message: "libcurl refused option CURLOPT_\(name)",
            curlCode: Int(code.rawValue), call: "curl_easy_setopt(CURLOPT_\(name))", curlMessage: reason)
    }
}
