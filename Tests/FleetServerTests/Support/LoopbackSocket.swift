import Foundation
import PosixThreads

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP connection to 127.0.0.1, for clients no HTTP library would be: silent, trickling.
///
/// Its waits block, so they run on a thread of their own: a test blocking the Swift concurrency
/// pool (two threads on this machine) would stall the in-process server it is waiting for.
final class LoopbackSocket: Sendable {
    private let descriptor: Int32
    /// Bytes read past the last answer returned (the next answer's, when answers came together).
    private let unread = Locked<[UInt8]>([])

    init(port: Int) throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw TestServerFailed() }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(descriptor)
            throw TestServerFailed()
        }
    }

    deinit { close(descriptor) }

    /// Sends `bytes`; false when the server has closed the connection.
    func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { Glibc.send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Waits up to `timeout` for the server to close the connection (a read of 0 bytes).
    func waitForClose(timeout: Duration) async -> Bool {
        await Self.onOwnThread { self.blockingWaitForClose(timeout: timeout) }
    }

    /// Shuts the sending side (a half-close): the server reads the end of the stream.
    func closeSending() {
        shutdown(descriptor, Int32(SHUT_WR))
    }

    /// Reads until the end of a response head and its `Content-Length` body; the head's text.
    func readResponseHead() async -> String? {
        await Self.onOwnThread { self.blockingReadResponseHead() }
    }

    /// Sends `request` `count` times, each after the answer to the one before and a pause of
    /// `gap`; the head of each answer (`nil` where none came). The whole exchange runs on a
    /// thread of its own, so that its timing is the gap's and not that of a Swift concurrency
    /// pool the suite's other tests keep busy: a test task resumed late would be a slow client.
    func exchange(_ request: String, count: Int, gap: Duration) async -> [String?] {
        await Self.onOwnThread {
            var heads: [String?] = []
            for index in 0..<count {
                if index > 0 {
                    let (seconds, attoseconds) = gap.components
                    Thread.sleep(forTimeInterval: Double(seconds) + Double(attoseconds) / 1e18)
                }
                heads.append(self.send(Array(request.utf8)) ? self.blockingReadResponseHead() : nil)
            }
            return heads
        }
    }

    private static func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread { continuation.resume(returning: body()) }
        }
    }

    private func blockingWaitForClose(timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return true }
        }
        return false
    }

    private func blockingReadResponseHead() -> String? {
        var received: [UInt8] = unread.withLock { $0 }
        unread.withLock { $0 = [] }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self)
                let length =
                    head.split(separator: "\r\n").first { $0.lowercased().hasPrefix("content-length:") }
                    .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
                if received.count - end.upperBound >= length {
                    let rest = Array(received[(end.upperBound + length)...])
                    unread.withLock { $0 = rest }
                    return head
                }
            }
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 100) > 0 else { continue }
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return nil }
            received += buffer[..<count]
        }
        return nil
    }
}
