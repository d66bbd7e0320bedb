import Curl
import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The configuration of a client that trusts the test CA, with optional changes.
func testConfiguration(_ servers: TestServers, _ adjust: (inout HTTPClient.Configuration) -> Void = { _ in }) -> HTTPClient.Configuration {
    var configuration = HTTPClient.Configuration(tls: .init(caFile: servers.pki.caFile))
    adjust(&configuration)
    return configuration
}

/// Runs `body` with a client that trusts the test CA; the client is shut down afterwards.
func withTestClient<Result>(
    _ adjust: (inout HTTPClient.Configuration) -> Void = { _ in },
    _ body: (HTTPClient, TestServers) async throws -> Result
) async throws -> Result {
    let servers = try await TestServers.shared
    return try await withHTTPClient(configuration: testConfiguration(servers, adjust)) { client in
        try await body(client, servers)
    }
}

/// A TCP socket on 127.0.0.1 that listens but never accepts: the kernel completes the TCP
/// handshake, and then nothing ever answers — a server stuck before TLS.
final class SilentListener {
    let port: Int
    private let descriptor: Int32

    init() throws {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw POSIXError(.EBADF) }
        port = try Self.bindToLoopback(descriptor)
        guard listen(descriptor, 16) == 0 else { throw POSIXError(.EADDRINUSE) }
    }

    deinit { close(descriptor) }

    /// A port on 127.0.0.1 where, a moment ago, nothing listened.
    ///
    /// The port is below the kernel's ephemeral range (`ip_local_port_range`), where no server of
    /// the other tests, each bound to port 0, can be given it meanwhile.
    static func closedPort() throws -> Int {
        let text = (try? String(contentsOfFile: "/proc/sys/net/ipv4/ip_local_port_range", encoding: .utf8)) ?? ""
        let lowestEphemeral = text.split(whereSeparator: \.isWhitespace).first.flatMap { Int($0) } ?? 32768
        let candidates = lowestEphemeral > 2048 ? Array((1024..<lowestEphemeral).shuffled().prefix(64)) : [0]
        for candidate in candidates {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(descriptor) }
            if let port = try? bindToLoopback(descriptor, port: candidate) { return port }
        }
        throw POSIXError(.EADDRINUSE)
    }

    private static func bindToLoopback(_ descriptor: Int32, port: Int = 0) throws -> Int {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
