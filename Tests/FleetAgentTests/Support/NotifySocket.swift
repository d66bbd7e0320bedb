import FleetTestSupport
import Foundation
import PosixThreads

/// The socket systemd would own: a datagram socket at a path, given to the agent as
/// `NOTIFY_SOCKET`; a thread reads what the agent sends as it arrives, as systemd does.
final class NotifySocket: Sendable {
    let path: String
    private let descriptor: Int32
    private let received = Locked<[(line: String, at: ContinuousClock.Instant)]>([])
    private let closed = Locked(false)

    init(directory: String) throws {
        path = directory + "/notify.sock"
        descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        guard descriptor >= 0 else { throw ProcessFailed(log: "socket: \(errno)") }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { buffer in
            for (index, byte) in path.utf8.enumerated() { buffer[index] = byte }
        }
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw ProcessFailed(log: "bind \(path): \(errno)") }
        var timeout = timeval(tv_sec: 0, tv_usec: 20_000)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        Thread.detachNewThread { [self] in
            while !closed.withLock({ $0 }) { receive() }
        }
    }

    /// Stops reading (the socket closes when the reader thread lets go of it).
    func close() { closed.withLock { $0 = true } }

    deinit { Glibc.close(descriptor) }

    /// Every line received so far, in order.
    var lines: [String] { received.withLock { $0.map(\.line) } }

    /// When each occurrence of `line` arrived.
    func arrivals(of line: String) -> [ContinuousClock.Instant] {
        received.withLock { $0.filter { $0.line == line }.map(\.at) }
    }

    /// Waits until `line` has been received `count` times; returns every line so far.
    @discardableResult
    func waitFor(_ line: String, count: Int = 1, timeout: Duration = .seconds(60)) async throws -> [String] {
        try await Waiting.until(timeout: timeout, "\(line) ×\(count) never arrived; got \(lines)") {
            lines.filter { $0 == line }.count >= count
        }
        return lines
    }

    private func receive() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        let now = ContinuousClock.now
        received.withLock { $0 += text.split(separator: "\n").map { (String($0), now) } }
    }
}
