import FleetIO

#if canImport(Glibc)
import Glibc
#endif

extension ChildProcess {
    /// A TCP port nothing listens on now on 127.0.0.1 (bound and released), for a child server
    /// that must be told its port before it starts; `nil` when none could be bound.
    ///
    /// - Parameter belowEphemeralRange: a port below the kernel's ephemeral range
    ///   (`ip_local_port_range`), which no server bound to port 0 meanwhile can be given: for a
    ///   port that must stay free for a while (a receiver started later, a port that must refuse).
    public static func freeLocalPort(belowEphemeralRange: Bool = false) -> Int? {
        guard belowEphemeralRange else { return bindLocalPort(0) }
        let range = (try? FileSystem.readFile("/proc/sys/net/ipv4/ip_local_port_range")) ?? []
        let firstNumber = range.prefix { $0 >= 0x30 && $0 <= 0x39 }
        let lowestEphemeral = Int(String(decoding: firstNumber, as: UTF8.self)) ?? 32768
        guard lowestEphemeral > 2048 else { return bindLocalPort(0) }
        for candidate in (1024..<lowestEphemeral).shuffled().prefix(64) {
            if let port = bindLocalPort(candidate) { return port }
        }
        return nil
    }

    /// Binds `port` (0: any) on 127.0.0.1 and releases it; the port, or `nil`.
    private static func bindLocalPort(_ port: Int) -> Int? {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length) == 0 && getsockname(descriptor, $0, &length) == 0
            }
        }
        return bound ? Int(UInt16(bigEndian: address.sin_port)) : nil
    }
}
