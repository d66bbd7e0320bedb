import Foundation
import SystemdNotify
import Testing

@Suite("The systemd notify protocol")
struct SystemdNotifierTests {
    /// A datagram socket bound at `address` (a path, or an abstract name starting with "@").
    final class Receiver {
        let descriptor: Int32
        init(_ address: String) throws {
            descriptor = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
            var socketAddress = sockaddr_un()
            socketAddress.sun_family = sa_family_t(AF_UNIX)
            var bytes = Array(address.utf8)
            if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
            withUnsafeMutableBytes(of: &socketAddress.sun_path) { buffer in for (index, byte) in bytes.enumerated() { buffer[index] = byte }
            }
            let length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + (bytes.first == 0 ? 0 : 1))
            let bound = withUnsafePointer(to: &socketAddress) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) }
            }
            guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
            var timeout = timeval(tv_sec: 2, tv_usec: 0)
            setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        }
        deinit { close(descriptor) }
        func receive() -> String? {
            var buffer = [UInt8](repeating: 0, count: 4096)
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            return count > 0 ? String(decoding: buffer[..<count], as: UTF8.self) : nil
        }
    }

    @Test("messages arrive as one datagram of KEY=VALUE lines, at a path and at an abstract address")
    func datagrams() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString).sock").path
        defer { unlink(path) }
        for address in [path, "@fleetset-test-\(UUID().uuidString)"] {
            let receiver = try Receiver(address)
            let notifier = try #require(SystemdNotifier(address: address))
            #expect(notifier.send(.ready, .status("kiosk: revision 4\nsignage: starting")))
            #expect(receiver.receive() == "READY=1\nSTATUS=kiosk: revision 4 signage: starting")
            #expect(notifier.send(.watchdog))
            #expect(receiver.receive() == "WATCHDOG=1")
            #expect(notifier.send(.reloading, .stopping))
            #expect(receiver.receive() == "RELOADING=1\nSTOPPING=1")
        }
    }

    @Test("the watchdog is fed at half of WATCHDOG_USEC, and only by the process it names")
    func watchdogInterval() {
        // The variables as a dictionary: setenv while other tests start processes crashes them.
        func interval(_ variables: [String: String]) -> Duration? {
            SystemdNotifier.watchdogInterval(environment: { variables[$0] }, processID: 4242)
        }
        #expect(interval(["WATCHDOG_USEC": "30000000"]) == .seconds(15))
        #expect(interval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "4242"]) == .seconds(15))
        #expect(interval(["WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "1"]) == nil)
        #expect(interval(["WATCHDOG_USEC": "garbage"]) == nil)
        #expect(interval([:]) == nil)
    }

    @Test("no socket, or nobody listening: nothing breaks")
    func absent() {
        #expect(SystemdNotifier(address: "relative/path") == nil)
        let notifier = SystemdNotifier(address: "/nonexistent/notify.sock")
        #expect(notifier?.send(.ready) == false)
    }
}
