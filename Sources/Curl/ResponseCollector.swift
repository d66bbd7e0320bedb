/// Collects a response's header lines and body as libcurl's callbacks deliver them, enforcing
/// the body-size cap as bytes arrive (after content decoding, so a compressed bomb is caught).
///
/// libcurl calls it on the driver thread only; it is reached through an unretained pointer that
/// stays valid because the owning ``Transfer`` outlives the transfer inside libcurl.
final class ResponseCollector {
    private(set) var headers = HTTPClient.Headers()
    private(set) var body: [UInt8] = []
    /// Set when the body outgrew the cap; the write callback then makes libcurl abort.
    private(set) var exceededCap = false
    private let maxBodyBytes: Int

    init(maxBodyBytes: Int) { self.maxBodyBytes = maxBodyBytes }

    /// Forgets the previous answer before the same transfer is sent again.
    func reset() {
        headers.removeAll()
        body.removeAll(keepingCapacity: true)
        exceededCap = false
    }

    /// Appends body bytes; returns how many were taken. Anything short of `bytes.count` makes
    /// libcurl abort the transfer with `CURLE_WRITE_ERROR`.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard body.count + bytes.count <= maxBodyBytes else {
            exceededCap = true
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }

    /// Takes one header line (`Name: value\r\n`). A status line starts a new response, so the
    /// headers of interim `1xx` responses are dropped.
    func receiveHeaderLine(_ bytes: UnsafeRawBufferPointer) {
        // Work on bytes: in Swift, "\r\n" is one Character, which makes String trimming subtle.
        var end = bytes.endIndex
        while end > bytes.startIndex, bytes[end - 1] == UInt8(ascii: "\r") || bytes[end - 1] == UInt8(ascii: "\n") {
            end -= 1
        }
        let line = bytes[bytes.startIndex..<end]
        if line.starts(with: "HTTP/".utf8) {
            headers.removeAll()
            return
        }
        guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { return }
        let isBlank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var valueStart = colon + 1
        while valueStart < end, isBlank(line[valueStart]) { valueStart += 1 }
        var valueEnd = end
        while valueEnd > valueStart, isBlank(line[valueEnd - 1]) { valueEnd -= 1 }
        headers.add(
            name: String(decoding: line[line.startIndex..<colon], as: UTF8.self),
            value: String(decoding: line[valueStart..<valueEnd], as: UTF8.self))
    }
}
