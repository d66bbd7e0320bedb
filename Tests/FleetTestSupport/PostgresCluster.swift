import ChildProcess
import Foundation
import PosixThreads

/// A throw-away PostgreSQL cluster for the tests: Debian's PostgreSQL (`scripts/install-deps`
/// installs it), `initdb` in a fresh temporary folder, listening on a Unix socket in that
/// folder and, for the TLS tests, with TLS on 127.0.0.1 (a free port; a self-signed
/// certificate for `localhost` made with openssl), started once per test process and removed
/// when the process exits.
///
/// PostgreSQL refuses to run as root, so under root (CI) the cluster runs as `nobody`
/// (`setpriv`). Each test gets a database of its own (``makeDatabase()``). The cluster skips
/// fsync: it is thrown away, and the tests measure no durability of PostgreSQL's own.
///
/// If the process dies without exiting (killed), the folder and server stay behind; the next
/// test process that starts a cluster stops and removes them.
public final class PostgresCluster: Sendable {
    /// The folder of the cluster: its data, its socket and its log.
    public let folder: String
    /// The folder holding the socket (`host=` of a URL).
    public var socketFolder: String { folder }
    /// The TCP port (TLS or not), which also names the socket file.
    public let port: Int
    /// The server's certificate (self-signed, for `localhost`): the trust root of a TLS URL.
    public var certificate: String { folder + "/server.crt" }
    /// A certificate that did not sign the server's: a TLS URL trusting it must be refused.
    public var otherCertificate: String { folder + "/other.crt" }
    /// The superuser, who owns the test databases.
    public let user = "fleetset"
    private let binaries: String
    private let counter = Locked(0)

    private static let started = Locked<Task<PostgresCluster, any Error>?>(nil)

    /// The process's cluster, started on first use (on a thread of its own: `initdb` blocks).
    ///
    /// - Throws: ``ProcessFailed`` when PostgreSQL is not installed or does not start, with its log.
    public static func shared() async throws -> PostgresCluster {
        let task = started.withLock { task in
            if let task { return task }
            let made = Task { try await PostgresCluster.start() }
            task = made
            return made
        }
        return try await task.value
    }

    private init(folder: String, binaries: String, port: Int) {
        self.folder = folder
        self.binaries = binaries
        self.port = port
    }

    private static func start() async throws -> PostgresCluster {
        guard let binaries = Self.findBinaries() else {
            throw ProcessFailed(log: "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run scripts/install-deps")
        }
        await removeAbandonedClusters()
        let template = FileManager.default.temporaryDirectory.appendingPathComponent("fleetset-pg-XXXXXX").path
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { throw ProcessFailed(log: "cannot make a folder for the PostgreSQL cluster") }
        let folder = String(cString: made)
        try String(getpid()).write(toFile: folder + "/owner.pid", atomically: true, encoding: .utf8)
        if getuid() == 0 {
            chown(folder, 65534, 65534)
            chmod(folder, 0o700)
        }
        let cluster = PostgresCluster(folder: folder, binaries: binaries, port: try TestTools.freePort())
        let user = cluster.user
        let port = cluster.port
        try await cluster.run(
            binaries + "/initdb",
            ["-D", folder + "/data", "-U", user, "--auth=trust", "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions"])
        for name in ["server", "other"] {
            try await cluster.run(
                "/usr/bin/openssl",
                [
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "\(folder)/\(name).key", "-out", "\(folder)/\(name).crt",
                    "-days", "2", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                ])
            chmod("\(folder)/\(name).key", 0o600)
        }
        try await cluster.run(
            binaries + "/pg_ctl",
            [
                "-D", folder + "/data", "-l", folder + "/server.log", "-w", "-t", "60", "-o",
                "-k \(folder) -p \(port) -c listen_addresses=127.0.0.1 -c ssl=on -c ssl_cert_file=\(folder)/server.crt "
                    + "-c ssl_key_file=\(folder)/server.key -c fsync=off -c synchronous_commit=off -c full_page_writes=off "
                    + "-c max_connections=400",
                "start",
            ])
        stopAtExit.withLock { $0 = (folder, binaries + "/pg_ctl") }
        atexit {
            guard let (folder, pgctl) = PostgresCluster.stopAtExit.withLock({ $0 }) else { return }
            PostgresCluster.stopBlocking(folder: folder, pgctl: pgctl)
        }
        return cluster
    }

    private static let stopAtExit = Locked<(String, String)?>(nil)

    /// Makes an empty database of its own for one test; returns its `postgres://` URL.
    public func makeDatabase() async throws -> String {
        let name = "test_\(getpid())_\(counter.withLock { $0 += 1; return $0 })"
        try await run(binaries + "/createdb", ["-h", folder, "-p", "\(port)", "-U", user, name])
        return url(database: name)
    }

    /// The URL of `database` in this cluster, over its Unix socket.
    public func url(database: String) -> String {
        "postgres://\(user)@:\(port)/\(database)?host=\(folder)"
    }

    /// The name of the database a URL of ``url(database:)`` names.
    public static func databaseName(_ url: String) -> String {
        // postgres://USER@:PORT/NAME?host=/FOLDER
        let parts = url.split(separator: "/")
        return parts.count > 2 ? String(parts[2].split(separator: "?").first ?? "") : ""
    }

    /// Runs `psql` with `sql` on `database`; its output.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        try await run(binaries + "/psql", ["-h", folder, "-p", "\(port)", "-U", user, "-d", database, "-XAtq", "-c", sql])
    }

    /// Runs a PostgreSQL program, as `nobody` under root, in the cluster's folder; its output.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) async throws -> String {
        try await Self.run(program, arguments, in: folder)
    }

    private static let calls = Locked(0)

    /// Runs `program` in `folder` (as `nobody` under root: the cluster's folder is one it may
    /// enter, which the test process's own working directory, under a private home, need not
    /// be); its standard output alone. Standard error goes to a file of its own in `folder`,
    /// shown only when the program fails, so that no warning is ever taken for an answer.
    @discardableResult
    private static func run(_ program: String, _ arguments: [String], in folder: String) async throws -> String {
        let command = getuid() == 0 ? ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--", program] : [program]
        let errorFile = "\(folder)/stderr-\(calls.withLock { $0 += 1; return $0 }).log"
        defer { unlink(errorFile) }
        let result = try await ChildProcess.run(
            command + arguments, environment: ["PATH=/usr/bin:/bin", "LC_ALL=C"], timeout: .seconds(120), outputLimit: 1 << 20,
            directory: folder, errorOutput: .appending(to: errorFile))
        guard result.succeeded else {
            let errors = (try? String(contentsOfFile: errorFile, encoding: .utf8)) ?? ""
            throw ProcessFailed(
                log: "\(program) \(arguments.joined(separator: " ")) failed (\(result.termination)):\n\(result.output)\(errors)")
        }
        return result.output
    }

    /// Stops the cluster in `folder` at once and removes the folder, from an `atexit` handler
    /// (no concurrency left to run on): `pg_ctl stop -m immediate` through `system(3)`.
    private static func stopBlocking(folder: String, pgctl: String) {
        let asNobody = getuid() == 0 ? "/usr/bin/setpriv --reuid=65534 --regid=65534 --clear-groups -- " : ""
        _ = system(
            "cd '\(folder)' && \(asNobody)\(pgctl) -D '\(folder)/data' -m immediate -w stop >/dev/null 2>&1; cd /; rm -rf '\(folder)'")
    }

    /// Stops and removes the clusters of test processes that are gone.
    private static func removeAbandonedClusters() async {
        let temporary = FileManager.default.temporaryDirectory.path
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: temporary) else { return }
        for name in names where name.hasPrefix("fleetset-pg-") {
            let folder = temporary + "/" + name
            guard let owner = (try? String(contentsOfFile: folder + "/owner.pid", encoding: .utf8)).flatMap({ Int32($0) }),
                kill(owner, 0) != 0, errno == ESRCH
            else { continue }
            if let pgctl = findBinaries().map({ $0 + "/pg_ctl" }) {
                _ = try? await run(pgctl, ["-D", folder + "/data", "-m", "immediate", "-w", "stop"], in: folder)
            }
            try? FileManager.default.removeItem(atPath: folder)
        }
    }

    /// The newest PostgreSQL's programs (`FLEETSET_POSTGRES_BIN` names another folder).
    private static func findBinaries() -> String? {
        if let folder = ProcessInfo.processInfo.environment["FLEETSET_POSTGRES_BIN"] { return folder }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }
    }
}
