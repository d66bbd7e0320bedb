import ArgumentParser
import FleetIO
import FleetStorePostgres

#if canImport(Glibc)
import Glibc
#endif

/// Where a PostgreSQL password may come from: never the command line (every user of the machine
/// reads it in `ps` and `/proc/PID/cmdline`), but `--database-password-file` (a file only the
/// server's user can read, e.g. a systemd credential) or `PGPASSWORD` (in the unit's
/// `EnvironmentFile`, `/etc/default/fleetset-server`, mode 0640; a process's environment is
/// readable by its own user and root only).
enum DatabasePassword {
    static let advice =
        "a password on the command line is visible to every user of this machine (ps, /proc/PID/cmdline): put it in a file only the server's user can read and pass --database-password-file FILE, or set PGPASSWORD in /etc/default/fleetset-server"

    /// Refuses a `postgres://USER:PASSWORD@…` given as `option`.
    static func refuseInURL(_ url: String, option: String) throws {
        guard PostgresLocation.isPostgresURL(url), let location = try? PostgresLocation(url: url), location.password != nil else { return }
        throw ValidationError("\(option): \(advice)")
    }

    /// The location `url` names, with the password from `file` (its first line) or `PGPASSWORD`.
    static func location(url: String, passwordFile file: String?) throws -> PostgresLocation {
        var location = try PostgresLocation(url: url, environmentPassword: getenv("PGPASSWORD").map { String(cString: $0) })
        if let file { location.password = try read(file) }
        return location
    }

    /// The first line of `file` (a password or a client secret, for `option`), which must be owned by root or the server's user, writable by
    /// no one else (``TrustedOwners``, checked on the open file) and readable by no one outside
    /// its group. Since only those owners can change its mode, checking that last bit apart is
    /// safe.
    static func read(_ file: String, option: String = "--database-password-file") throws -> String {
        let bytes: [UInt8]
        do {
            bytes = try FileSystem.readFile(file, maximumSize: 4096, trusting: .rootAndEffectiveUser())
        } catch {
            throw ValidationError("\(option): cannot use \(file): \(error)")
        }
        var status = stat()
        if stat(file, &status) == 0, status.st_mode & 0o004 != 0 {
            throw ValidationError(
                "\(option): \(file) has mode \(String(status.st_mode & 0o777, radix: 8)): every user may read it; chmod 0600 or 0640 it"
            )
        }
        let password = String(decoding: bytes.prefix { $0 != 0x0A && $0 != 0x0D }, as: UTF8.self)
        guard !password.isEmpty else { throw ValidationError("\(option): \(file) is empty; its first line is the secret") }
        return password
    }
}
