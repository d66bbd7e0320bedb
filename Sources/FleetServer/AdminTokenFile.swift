import FleetIO
import FleetProtocol
import FleetServerCore

#if canImport(Glibc)
import Glibc
#endif

/// The file that holds the admin token: read at start, or created with a fresh token.
///
/// Like ssh with a private key, the server refuses a token file that others can read. The
/// token itself is never logged; the path is.
public enum AdminTokenFile {
    /// Why the token file cannot be used.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    /// Tokens shorter than this are accepted but logged as weak: failed sign-ins and API calls
    /// slow an address down and answer 429, but a right guess always gets in (a valid credential
    /// is never refused for others' failures), so the token's length is what stops guessing.
    /// Generated tokens have 47 characters (`fsa_` and 32 random bytes).
    public static let recommendedLength = 32

    /// The hash of the admin token in `path`, creating the file (mode 0600, a fresh `fsa_`
    /// token) when it does not exist. Returns whether it was created, and whether the token is
    /// shorter than ``recommendedLength``.
    public static func loadOrCreate(_ path: String) throws -> (tokenHash: String, created: Bool, weak: Bool) {
        var info = stat()
        if stat(path, &info) != 0 {
            guard errno == ENOENT else { throw FileError(path: path, operation: "stat", code: errno) }
            let token = Credentials.generate(.admin)
            try FileSystem.writeAtomically(Array((token + "\n").utf8), to: path, mode: 0o600)
            return (Credentials.hash(token), true, false)
        }
        guard info.st_mode & 0o077 == 0 else {
            throw Problem(
                description:
                    "the admin token file \(path) can be read by others (mode \(String(info.st_mode & 0o777, radix: 8))); run chmod 600 \(path)"
            )
        }
        let token = try FileSystem.readToken(path)
        guard token.utf8.count >= 16, !token.contains(" ") else {
            throw Problem(description: "the admin token file \(path) must hold a token of at least 16 characters on its first line")
        }
        return (Credentials.hash(token), false, token.utf8.count < recommendedLength)
    }
}
