import Crypto
import FleetServerCore
import PosixThreads

/// The console's sign-in sessions and their CSRF tokens, as values: no HTTP, time passed in.
///
/// An admin signs in with the admin token and gets a session: a random id and an expiry,
/// signed with HMAC-SHA256 under a key derived from the admin token. The signature lets every
/// server instance on the same database (they share the admin token) accept the session
/// without a session table, and a new admin token ends every session at once. Each session has
/// its own CSRF token, the HMAC of its id under the same key, which every form carries.
///
/// Signing out revokes the session id on this instance until it would have expired (see
/// docs/admins/console.md, "Known gaps": with several instances, a copied cookie stays valid on
/// the others until then).
public final class ConsoleSessions: Sendable {
    /// One signed-in admin.
    public struct Session: Sendable, Hashable {
        /// The session's random id.
        public let id: String
        /// When it ends, in seconds since the epoch.
        public let expiresAt: Int64

        public init(id: String, expiresAt: Int64) {
            self.id = id
            self.expiresAt = expiresAt
        }
    }

    /// How long a session lasts: 8 hours, a working day.
    public static let defaultLifetime: Int64 = 8 * 3600

    private let key: SymmetricKey
    private let lifetime: Int64
    private let makeID: @Sendable () -> String
    /// Signed-out session ids, with when each would have expired.
    private let revoked = Locked<[String: Int64]>([:])

    /// - Parameters:
    ///   - keyMaterial: the secret the signing key is derived from (the admin token's hash).
    ///   - makeID: a new random session id (injected in tests).
    public init(
        keyMaterial: [UInt8], lifetime: Int64 = ConsoleSessions.defaultLifetime,
        makeID: @escaping @Sendable () -> String = { Credentials.identifier(prefix: "cs-") }
    ) {
        key = SymmetricKey(
            data: Array(
                HMAC<SHA256>.authenticationCode(for: Array("fleetset console sessions v1".utf8), using: SymmetricKey(data: keyMaterial))))
        self.lifetime = lifetime
        self.makeID = makeID
    }

    /// A new session starting at `now`, and the cookie value that carries it.
    public func start(now: Int64) -> (session: Session, cookie: String) {
        let session = Session(id: makeID(), expiresAt: now + lifetime)
        return (session, "\(session.id).\(session.expiresAt).\(signature("session|\(session.id)|\(session.expiresAt)"))")
    }

    /// The session a cookie value carries, if its signature holds, it has not expired and it
    /// was not signed out.
    public func session(cookie: String, now: Int64) -> Session? {
        let parts = cookie.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let expiresAt = Int64(parts[1]), parts[0].utf8.count <= 64 else { return nil }
        let id = String(parts[0])
        guard Credentials.constantTimeEquals(String(parts[2]), signature("session|\(id)|\(expiresAt)")), now < expiresAt else { return nil }
        guard revoked.withLock({ $0[id] == nil }) else { return nil }
        return Session(id: id, expiresAt: expiresAt)
    }

    /// Ends a session: its cookie is refused from now on.
    public func end(_ session: Session, now: Int64) {
        revoked.withLock { revoked in
            revoked = revoked.filter { $0.value > now }
            revoked[session.id] = session.expiresAt
        }
    }

    /// The CSRF token of a session: every form of the console carries it.
    public func csrfToken(for session: Session) -> String {
        signature("csrf|\(session.id)")
    }

    /// Whether `token` is the session's CSRF token.
    public func isValidCSRFToken(_ token: String?, for session: Session) -> Bool {
        guard let token else { return false }
        return Credentials.constantTimeEquals(token, csrfToken(for: session))
    }

    private func signature(_ text: String) -> String {
        Credentials.base64URL(Array(HMAC<SHA256>.authenticationCode(for: Array(text.utf8), using: key)))
    }
}
