import ChildProcess
import FleetIO
import Foundation
import PosixThreads

/// HAProxy (Debian's) on 127.0.0.1 in front of several `fleetset-server` instances, as a fleet
/// that outgrows one server runs them: devices connect to the balancer, which sends each new
/// connection to the instance holding the fewest (`leastconn`: long-polls hold connections),
/// checks each instance's `/healthz` every second, and stops sending to one that fails three
/// checks or whose connections fail (`observe layer4`: a killed instance is taken out at once).
/// A request that cannot reach its instance is sent to another (`redispatch`). A check may take
/// 5 s: an instance busy with a fan-out on a saturated machine answers late but is not down
/// (with 0.5 s, both instances were taken out during a 5,000-device change here).
///
/// Its timeouts let a long-poll (at most 300 s) wait in silence.
public final class Balancer: Sendable {
    private let executable: String
    private let directory: String
    private let backends: [String]
    private let faults: ProxyFaults?
    private let running = Locked<Process?>(nil)
    private let boundPort = Locked(0)

    /// `http://127.0.0.1:<port>`.
    public var url: String { "http://127.0.0.1:\(boundPort.withLock { $0 })" }
    /// The configuration written for HAProxy.
    public var configurationPath: String { directory + "/haproxy.cfg" }

    /// - Parameters:
    ///   - executable: HAProxy (`/usr/sbin/haproxy`).
    ///   - directory: where its configuration and log go.
    ///   - backends: the instances, as `HOST:PORT`.
    ///   - faults: how it misbehaves, if it should (see ``ProxyFaults``).
    public init(executable: String = "/usr/sbin/haproxy", directory: String, backends: [String], faults: ProxyFaults? = nil) {
        self.executable = executable
        self.directory = directory
        self.backends = backends
        self.faults = faults
    }

    /// The configuration for a balancer on `port` holding up to `connections` device connections.
    public static func configuration(port: Int, backends: [String], connections: Int, faults: ProxyFaults? = nil) -> String {
        let servers = backends.enumerated().map { "    server instance-\($0.offset + 1) \($0.element) check" }.joined(separator: "\n")
        let misbehaviour = faults.map { "\n" + $0.rules } ?? ""
        return """
            global
                maxconn \(connections)
            defaults
                mode http
                option http-keep-alive
                option forwardfor
                option redispatch
                retries 2
                timeout connect 2s
                timeout client 330s
                timeout server 330s
                timeout http-keep-alive 330s
                timeout http-request 30s
            frontend fleet
                bind 127.0.0.1:\(port)\(misbehaviour)
                default_backend instances
            backend instances
                balance leastconn
                option httpchk GET /healthz
                timeout check 5s
                default-server inter 1s fall 3 rise 2 observe layer4 error-limit 10 on-error mark-down
            \(servers)

            """
    }

    /// Starts HAProxy on a free port and returns once it accepts connections.
    ///
    /// - Parameter connections: the most client connections it holds (each takes two
    ///   descriptors, one per side, and HAProxy refuses to start when the open-file limit cannot
    ///   hold them all).
    public func start(connections: Int = 8_000, timeout: Duration = .seconds(30)) async throws {
        let port = try Self.freePort()
        try FileSystem.writeAtomically(
            Array(Self.configuration(port: port, backends: backends, connections: connections, faults: faults).utf8), to: configurationPath)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["-db", "-f", configurationPath]
        let logPath = directory + "/haproxy.log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw LaunchedServer.StartFailed(description: "cannot run \(executable): \(error)")
        }
        running.withLock { $0 = process }
        boundPort.withLock { $0 = port }
        let deadline = ContinuousClock.now + timeout
        while ContinuousClock.now < deadline {
            if Self.accepts(port: port) { return }
            guard process.isRunning else {
                let log = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
                throw LaunchedServer.StartFailed(description: "HAProxy exited at start; its log:\n\(log)")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LaunchedServer.StartFailed(description: "HAProxy did not listen within \(timeout)")
    }

    /// Stops HAProxy.
    public func stop() {
        guard let process = running.withLock({ $0 }) else { return }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        while process.isRunning { usleep(1000) }
        running.withLock { $0 = nil }
    }

    /// A port nothing listens on now (bound and released).
    static func freePort() throws -> Int {
        guard let port = ChildProcess.freeLocalPort() else {
            throw LaunchedServer.StartFailed(description: "no free port for the balancer")
        }
        return port
    }

    /// Whether something accepts connections on 127.0.0.1:`port`.
    static func accepts(port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }
}

/// How a proxy between the devices and their server misbehaves, each on a share of the
/// devices' requests (`/v1/apps/…`; enrollment and admin requests pass): as proxies and
/// middleboxes in the field do, and as the agent's rules must survive.
public struct ProxyFaults: Sendable, Equatable {
    /// The percentage of settings requests whose `If-None-Match` the proxy drops: the server
    /// then answers `200` with the revision the device holds (a cache or proxy ignoring
    /// conditional requests). The agent counts such a revision as unchanged and waits the poll
    /// timer (`event=repeated`).
    public var ignoreConditional: Int
    /// The percentage of requests the proxy answers `403` with an HTML page of its own, not
    /// fleetset's error body. The agent takes it as transient (it is not the server's refusal)
    /// and backs off.
    public var refuse: Int

    public init(ignoreConditional: Int = 20, refuse: Int = 10) {
        self.ignoreConditional = ignoreConditional
        self.refuse = refuse
    }

    /// HAProxy's frontend rules: one random draw per request decides which fault, if any.
    var rules: String {
        """
            http-request set-var(txn.fault) rand(100)
            acl device_request path_beg /v1/apps/
            acl settings_request path_end /settings
            acl refused var(txn.fault) -m int lt \(refuse)
            acl unconditional var(txn.fault) -m int lt \(refuse + ignoreConditional)
            http-request return status 403 content-type text/html string "<html><body><h1>403 Forbidden</h1>Request forbidden by administrative rules.</body></html>" if device_request refused
            http-request del-header If-None-Match if device_request settings_request !refused unconditional
        """
    }
}
