import FleetTestSupport
import Foundation
import Testing

/// Item 10 of issue 34: run as root, the device-side commands use only a configuration that
/// root or the agent's user controls, since `explain` and `edit` send the device's token to
/// the server it names. The "server" is a bare listening socket: a connection made to it
/// stays in its backlog whether or not it is accepted, so an empty backlog proves no request
/// was sent; with a trusted file, the same setup does receive the token.
@Suite("fleetset as root refuses a configuration it cannot trust")
struct ConfigTrustTests {
    static let token = "fsd_config-trust-test-token"

    /// A TCP socket listening on 127.0.0.1, never answering on its own.
    final class Listener {
        let descriptor: Int32
        let port: UInt16

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    bind(descriptor, socketAddress, length) == 0 && listen(descriptor, 16) == 0
                        && getsockname(descriptor, socketAddress, &length) == 0
                }
            }
            guard descriptor >= 0, bound, fcntl(descriptor, F_SETFL, O_NONBLOCK) == 0 else {
                throw ProcessFailed(log: "cannot listen on 127.0.0.1: errno \(errno)")
            }
            port = UInt16(bigEndian: address.sin_port)
        }

        deinit { close(descriptor) }

        /// A connection already made, without waiting; `nil` when there is none.
        func pendingConnection() -> Int32? {
            let connection = accept(descriptor, nil, nil)
            return connection >= 0 ? connection : nil
        }

        /// Waits up to `timeout` for a connection, reads its request head and answers 503.
        func answerOneRequest(timeout: Duration) async throws -> String {
            let deadline = ContinuousClock.now + timeout
            while ContinuousClock.now < deadline {
                if let connection = pendingConnection() {
                    defer { close(connection) }
                    _ = fcntl(connection, F_SETFL, 0)
                    var request: [UInt8] = []
                    var buffer = [UInt8](repeating: 0, count: 4096)
                    while !String(decoding: request, as: UTF8.self).contains("\r\n\r\n") {
                        let count = read(connection, &buffer, buffer.count)
                        guard count > 0 else { break }
                        request += buffer[..<count]
                    }
                    let answer = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    _ = answer.withCString { write(connection, $0, strlen($0)) }
                    return String(decoding: request, as: UTF8.self)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw ProcessFailed(log: "no request reached the listener")
        }
    }

    /// A device whose configuration points at `listener`, with an identity holding ``token``.
    static func device(serving listener: Listener) throws -> (directory: URL, configuration: String) {
        let directory = try CLIRunner.temporaryDirectory()
        let server = "http://127.0.0.1:\(listener.port)"
        let state = directory.appendingPathComponent("state")
        try FileManager.default.createDirectory(at: state, withIntermediateDirectories: true)
        try CLIRunner.write(
            #"{"deviceId": "d-trust", "deviceToken": "\#(token)", "server": "\#(server)", "enrolledAt": "2026-11-23T10:00:00Z"}"#,
            to: state.appendingPathComponent("identity.json"))
        let configuration = directory.appendingPathComponent("fleetsetd.json")
        try CLIRunner.write(
            #"{"server": "\#(server)", "allowInsecureHTTP": true, "stateDirectory": "\#(state.path)", "#
                + #""inboxDirectory": "\#(directory.appendingPathComponent("inbox").path)", "apps": [{"id": "kiosk"}]}"#,
            to: configuration)
        #expect(chmod(directory.path, 0o755) == 0 && chmod(configuration.path, 0o644) == 0)
        return (directory, configuration.path)
    }

    static let why =
        "and writable by no one else: the file names the server that gets this device's token and the directories root reads and writes"

    @Test(
        "a configuration owned by nobody, or writable by its group, is refused by explain, edit and the other device commands; nothing reaches its server"
    )
    func untrustedConfigurationRefused() async throws {
        try #require(getuid() == 0, "the rule applies to root; these tests run as root")
        let listener = try Listener()
        let (directory, configuration) = try Self.device(serving: listener)
        defer { try? FileManager.default.removeItem(at: directory) }

        #expect(chown(configuration, 65534, 65534) == 0)
        for command in [["explain"], ["edit"], ["status"], ["get", "greeting"], ["sync"]] {
            let run = try await CLIRunner.run(command + ["--config", configuration])
            #expect(run.status == 2, "\(command): \(run)")
            #expect(run.standardError.contains("fleetset: refusing \(configuration): it is owned by "), "\(run.standardError)")
            #expect(run.standardError.contains("uid 65534, mode 0644)"), "\(run.standardError)")
            #expect(run.standardError.contains(Self.why), "\(run.standardError)")
        }
        #expect(chown(configuration, 0, 0) == 0 && chmod(configuration, 0o664) == 0)
        let groupWritable = try await CLIRunner.run(["explain", "--config", configuration])
        #expect(groupWritable.status == 2)
        #expect(
            groupWritable.standardError.contains("fleetset: refusing \(configuration): it is writable by group root (gid 0) (mode 0664)"),
            "\(groupWritable.standardError)")

        // Nothing connected, let alone sent the token.
        let connection = listener.pendingConnection()
        if let connection { close(connection) }
        #expect(connection == nil, "a command connected to the server of an untrusted configuration")
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("inbox").path), "sync wrote a request")
    }

    @Test("a root-owned 0644 configuration is used: explain sends the device's token to its server")
    func trustedConfigurationUsed() async throws {
        let listener = try Listener()
        let (directory, configuration) = try Self.device(serving: listener)
        defer { try? FileManager.default.removeItem(at: directory) }
        async let explain = CLIRunner.run(["explain", "--config", configuration])
        let request = try await listener.answerOneRequest(timeout: .seconds(30))
        #expect(request.contains(Self.token), "\(request)")
        let run = try await explain
        #expect(run.status != 0 && !run.standardError.contains("refusing"), "\(run)")
    }

    @Test("run by another user than root, the rule does not apply: a file of that user's is used")
    func notRoot() async throws {
        try #require(getuid() == 0 && FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), "needs root and setpriv")
        let listener = try Listener()
        let (directory, configuration) = try Self.device(serving: listener)
        defer { try? FileManager.default.removeItem(at: directory) }
        #expect(chown(configuration, 65534, 65534) == 0)
        let program = try CLIRunner.copyForOtherUsers(CLIRunner.binary)
        let run = try await CLIRunner.run(
            ["--reuid=65534", "--regid=65534", "--clear-groups", "--", program, "status", "--config", configuration],
            executable: "/usr/bin/setpriv")
        #expect(!run.standardError.contains("refusing"), "\(run)")
        #expect(run.standardOutput.contains("kiosk"), "\(run)")
    }
}
