import FleetStorePostgres
import Testing

@Suite("PostgreSQL URLs")
struct PostgresLocationTests {
    @Test("TCP and Unix-socket URLs, TLS modes and the pool size are read; the password never shows")
    func parsing() throws {
        let tcp = try PostgresLocation(url: "postgres://fleet:s%40cret@db.example:6432/fleetset?sslmode=verify-full&pool_size=40")
        #expect(tcp.endpoint == .tcp(host: "db.example", port: 6432))
        #expect(tcp.user == "fleet" && tcp.password == "s@cret" && tcp.database == "fleetset" && tcp.poolSize == 40)
        #expect(tcp.tls == .verified(rootCertificates: nil))
        #expect(tcp.redacted == "postgres://fleet@db.example:6432/fleetset?sslmode=verify-full" && !tcp.redacted.contains("cret"))
        let socket = try PostgresLocation(url: "postgresql://fleet@/fleetset?host=/run/postgresql", environmentPassword: "from-env")
        #expect(socket.endpoint == .unixSocket("/run/postgresql/.s.PGSQL.5432") && socket.password == "from-env" && socket.tls == .disabled)
        #expect(try PostgresLocation(url: "postgres://fleet@[::1]/x").endpoint == .tcp(host: "::1", port: 5432))
        #expect(try PostgresLocation(url: "postgres://fleet@:5433/x?host=/tmp/pg").endpoint == .unixSocket("/tmp/pg/.s.PGSQL.5433"))
    }

    @Test(
        "a URL fleetset cannot use is refused with what is wrong",
        arguments: [
            ("postgres://db/fleet", "names no user"),
            ("postgres://fleet@db", "names no database"),
            ("postgres://fleet@db:99999/x", "port must be a number"),
            ("postgres://fleet@db/x?sslmode=prefer", "sslmode=prefer is not supported"),
            ("postgres://fleet@db/x?pool_size=1", "pool_size must be"),
            ("postgres://fleet@db/x?connect_timeout=3", "option connect_timeout is not one fleetset knows"),
            ("postgres://fleet@/x?host=relative", "absolute path"),
            ("mysql://fleet@db/x", "must start with postgres://"),
            ("postgres://fleet@10.0.0.5/x?sslmode=verify-full", "needs the database's host name"),
        ])
    func refusals(url: String, message: String) {
        #expect(throws: PostgresLocationError.self) { try PostgresLocation(url: url) }
        do {
            _ = try PostgresLocation(url: url)
        } catch {
            #expect(error.description.contains(message), "\(url): \(error)")
        }
    }
}
