import FleetProtocol
import NIOSSL
import PostgresNIO

/// Where the PostgreSQL database is and how to reach it, read from a
/// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?OPTIONS]` URL (or `postgresql://`).
///
/// Options, as libpq names them where it has them:
/// - `host=/run/postgresql`: a Unix socket folder instead of TCP (the URL's host is then empty:
///   `postgres://fleetset@/fleet?host=/run/postgresql`); the socket file is
///   `<folder>/.s.PGSQL.<port>`.
/// - `sslmode=disable` (the default), or `verify-full` / `require`: TLS, with the server's
///   certificate checked against `sslrootcert=PATH` (default: the system's trust store) and its
///   host name (so the URL must name the host, not an IP address). fleetset never makes a TLS
///   connection it does not verify, so `require` verifies too (libpq's `require` does not).
/// - `pool_size=N`: the most connections this instance opens (default 20).
///
/// The password may also come from the `PGPASSWORD` environment variable. It is never part of
/// ``redacted``, which is what logs show.
public struct PostgresLocation: Sendable, Hashable {
    public enum Endpoint: Sendable, Hashable {
        case tcp(host: String, port: Int)
        /// The socket file's path.
        case unixSocket(String)
    }

    public enum TLSMode: Sendable, Hashable {
        case disabled
        /// Verified against the certificates in the file, or the system's trust store when `nil`.
        case verified(rootCertificates: String?)
    }

    public var endpoint: Endpoint
    public var user: String
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// The most connections of this instance's pool.
    public var poolSize: Int

    public init(endpoint: Endpoint, user: String, password: String? = nil, database: String, tls: TLSMode = .disabled, poolSize: Int = 20) {
        self.endpoint = endpoint
        self.user = user
        self.password = password
        self.database = database
        self.tls = tls
        self.poolSize = poolSize
    }

    /// Whether `text` names a PostgreSQL database (rather than a SQLite file).
    public static func isPostgresURL(_ text: String) -> Bool {
        text.hasPrefix("postgres://") || text.hasPrefix("postgresql://")
    }

    /// Reads a `postgres://` URL.
    ///
    /// - Parameter environmentPassword: `PGPASSWORD`, used when the URL has no password.
    /// - Throws: ``PostgresLocationError`` saying what is wrong with it.
    public init(url: String, environmentPassword: String? = nil) throws(PostgresLocationError) {
        guard Self.isPostgresURL(url) else {
            throw PostgresLocationError("the database URL must start with postgres:// or postgresql://")
        }
        var rest = url.hasPrefix("postgres://") ? url.dropFirst("postgres://".count) : url.dropFirst("postgresql://".count)
        var options: [String: String] = [:]
        if let question = rest.firstIndex(of: "?") {
            for pair in rest[rest.index(after: question)...].split(separator: "&") {
                let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard parts.count == 2, let name = PercentEncoding.decoded(parts[0]), let value = PercentEncoding.decoded(parts[1]) else {
                    throw PostgresLocationError("the database URL's option \"\(pair)\" is not NAME=VALUE")
                }
                options[name] = value
            }
            rest = rest[..<question]
        }
        guard let slash = rest.firstIndex(of: "/") else { throw PostgresLocationError("the database URL names no database (…/DATABASE)") }
        guard let database = PercentEncoding.decoded(rest[rest.index(after: slash)...]), !database.isEmpty else {
            throw PostgresLocationError("the database URL names no database (…/DATABASE)")
        }
        var authority = rest[..<slash]
        var user = ""
        var password: String?
        if let at = authority.lastIndex(of: "@") {
            let credentials = authority[..<at]
            authority = authority[authority.index(after: at)...]
            if let colon = credentials.firstIndex(of: ":") {
                user = PercentEncoding.decoded(credentials[..<colon]) ?? ""
                password = PercentEncoding.decoded(credentials[credentials.index(after: colon)...])
            } else {
                user = PercentEncoding.decoded(credentials) ?? ""
            }
        }
        guard !user.isEmpty else { throw PostgresLocationError("the database URL names no user (postgres://USER@HOST/DATABASE)") }
        var host = String(authority)
        var port = 5432
        if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
            guard let number = Int(authority[authority.index(after: colon)...]), (1...65535).contains(number) else {
                throw PostgresLocationError("the database URL's port must be a number from 1 to 65535")
            }
            port = number
            host = String(authority[..<colon])
        }
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let endpoint: Endpoint
        if let socketFolder = options.removeValue(forKey: "host") {
            guard host.isEmpty, socketFolder.hasPrefix("/") else {
                throw PostgresLocationError("host=PATH names a Unix socket folder (an absolute path) and needs an empty host in the URL")
            }
            endpoint = .unixSocket(socketFolder + "/.s.PGSQL.\(port)")
        } else {
            guard !host.isEmpty else { throw PostgresLocationError("the database URL names no host (or host=/SOCKET/FOLDER)") }
            endpoint = .tcp(host: host, port: port)
        }
        let tls: TLSMode
        switch options.removeValue(forKey: "sslmode") ?? "disable" {
        case "disable": tls = .disabled
        case "require", "verify-full": tls = .verified(rootCertificates: options.removeValue(forKey: "sslrootcert"))
        case let other:
            throw PostgresLocationError(
                "sslmode=\(other) is not supported: use disable, or verify-full (TLS with the certificate checked; require means the same here)"
            )
        }
        var poolSize = 20
        if let text = options.removeValue(forKey: "pool_size") {
            guard let number = Int(text), (2...1000).contains(number) else {
                throw PostgresLocationError("pool_size must be a number of connections from 2 to 1000")
            }
            poolSize = number
        }
        if let unknown = options.keys.sorted().first {
            throw PostgresLocationError(
                "the database URL's option \(unknown) is not one fleetset knows (host, sslmode, sslrootcert, pool_size)")
        }
        if case .unixSocket = endpoint, case .verified = tls {
            throw PostgresLocationError("sslmode applies to TCP connections, not to a Unix socket")
        }
        if case .tcp(let host, _) = endpoint, case .verified = tls, Self.isIPAddress(host) {
            throw PostgresLocationError(
                "sslmode=verify-full needs the database's host name (the name its certificate is checked against), not the IP address \(host)"
            )
        }
        self.init(
            endpoint: endpoint, user: user, password: password ?? environmentPassword, database: database, tls: tls, poolSize: poolSize)
    }

    /// The URL without its password, for logs.
    public var redacted: String {
        switch endpoint {
        case .tcp(let host, let port):
            let shownHost = host.contains(":") ? "[\(host)]" : host
            return "postgres://\(user)@\(shownHost):\(port)/\(database)\(tlsSuffix)"
        case .unixSocket(let path):
            return "postgres://\(user)@/\(database)?host=\(path)"
        }
    }

    private var tlsSuffix: String {
        switch tls {
        case .disabled: ""
        case .verified: "?sslmode=verify-full"
        }
    }

    /// Whether the database is reached over TCP to a host other than the loopback interface
    /// without TLS (what `serve` warns about).
    public var isPlainOverNetwork: Bool {
        guard case .tcp(let host, _) = endpoint, tls == .disabled else { return false }
        return !["localhost", "127.0.0.1", "::1"].contains(host) && !host.hasPrefix("127.")
    }

    /// postgres-nio's configuration of the pool.
    func clientConfiguration(applicationName: String = "fleetset-server") throws -> PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: try clientTLS())
        case .unixSocket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.maximumConnections = poolSize
        configuration.options.minimumConnections = 0
        configuration.options.additionalStartupParameters = [("application_name", applicationName)]
        return configuration
    }

    /// postgres-nio's configuration of one connection (the one that listens for changes).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        switch endpoint {
        case .tcp(let host, let port):
            let tls: PostgresConnection.Configuration.TLS
            switch self.tls {
            case .disabled: tls = .disable
            case .verified: tls = .require(try NIOSSLContext(configuration: tlsConfiguration()))
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        case .unixSocket(let path):
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
        }
        configuration.options.additionalStartupParameters = [("application_name", "fleetset-server changes")]
        return configuration
    }

    private func clientTLS() throws -> PostgresClient.Configuration.TLS {
        switch tls {
        case .disabled: .disable
        case .verified: .require(try tlsConfiguration())
        }
    }

    private func tlsConfiguration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.certificateVerification = .fullVerification
        if case .verified(let roots?) = tls { configuration.trustRoots = .file(roots) }
        return configuration
    }

    /// Whether `host` is an IPv4 or IPv6 address rather than a name.
    private static func isIPAddress(_ host: String) -> Bool {
        host.contains(":")
            || host.split(separator: ".", omittingEmptySubsequences: false).count == 4 && host.allSatisfy { $0.isNumber || $0 == "." }
    }

}

/// A database URL fleetset cannot use; the message says what is wrong.
public struct PostgresLocationError: Error, Sendable, CustomStringConvertible {
    public let description: String

    init(_ description: String) { self.description = description }
}
