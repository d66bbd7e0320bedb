import Crypto
import FleetJSON
import FleetProtocol
import HTTPTypes
import PosixThreads
import _CryptoExtras

/// A password as the server keeps it: scrypt's output with its salt and parameters, in one
/// text (`scrypt$N=131072,r=8,p=1$<salt>$<key>`, base64url), never the password.
///
/// **Parameters: N = 2^17, r = 8, p = 1** (128 MiB and about 0.4 s per hash on this project's
/// machine, release build): OWASP's recommended minimum for scrypt. scrypt is memory-hard, so a
/// guess costs an attacker with GPUs about what it costs the server; the server bounds what
/// sign-ins can cost it by hashing at most two at a time (``PasswordHasher``) and by the
/// failure limits of sign-in. Parameters are kept with each hash, so raising them later
/// changes what a password set from then on costs, and old hashes still verify.
public struct PasswordHash: Sendable, Hashable {
    /// scrypt's cost parameters.
    public struct Parameters: Sendable, Hashable {
        public var rounds: Int
        public var blockSize: Int
        public var parallelism: Int

        /// What new hashes use: N = 2^17, r = 8, p = 1.
        public static let current = Parameters(rounds: 1 << 17, blockSize: 8, parallelism: 1)

        public init(rounds: Int, blockSize: Int, parallelism: Int) {
            self.rounds = rounds
            self.blockSize = blockSize
            self.parallelism = parallelism
        }

        /// N = 2^`cost`, r = 8, p = 1 (`fleetset-server serve --password-cost`).
        public init(cost: Int) { self.init(rounds: 1 << cost, blockSize: 8, parallelism: 1) }

        /// Whether a hash with these takes at most 1 GiB (128·N·r bytes) and 4 lanes: what the
        /// server is willing to compute (cost 20 is the most `serve` makes).
        public var isAffordable: Bool { 128 * rounds * blockSize <= 1 << 30 && parallelism <= 4 }
    }

    /// The stored text.
    public let text: String

    /// Reads a stored text; `nil` when it is not one this server writes.
    public init?(text: String) {
        guard Self.parts(text) != nil else { return nil }
        self.text = text
    }

    private init(parameters: Parameters, salt: [UInt8], key: [UInt8]) {
        text =
            "scrypt$N=\(parameters.rounds),r=\(parameters.blockSize),p=\(parameters.parallelism)$"
            + Credentials.base64URL(salt) + "$" + Credentials.base64URL(key)
    }

    /// The parameters this hash was made with.
    public var parameters: Parameters? { Self.parts(text)?.parameters }

    /// Hashes `password` with a fresh 16-byte salt (slow: call it through ``PasswordHasher``).
    public static func make(_ password: String, parameters: Parameters = .current) throws -> PasswordHash {
        var generator = SystemRandomNumberGenerator()
        let salt = (0..<16).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return PasswordHash(parameters: parameters, salt: salt, key: try derive(password, salt: salt, parameters: parameters))
    }

    /// Whether `password` is the one hashed, compared in constant time (slow: call it through
    /// ``PasswordHasher``). A hash whose parameters would take more than 1 GiB or a parallelism
    /// above 4 (not one this server makes) verifies nothing rather than exhaust the server.
    public func verifies(_ password: String) -> Bool {
        guard let parts = Self.parts(text), parts.parameters.isAffordable,
            let key = try? Self.derive(password, salt: parts.salt, parameters: parts.parameters)
        else { return false }
        return Credentials.constantTimeEquals(Credentials.base64URL(key), Credentials.base64URL(parts.key))
    }

    private static func derive(_ password: String, salt: [UInt8], parameters: Parameters) throws -> [UInt8] {
        let key = try KDF.Scrypt.deriveKey(
            from: Array(password.utf8), salt: salt, outputByteCount: 32, rounds: parameters.rounds, blockSize: parameters.blockSize,
            parallelism: parameters.parallelism)
        return key.withUnsafeBytes { Array($0) }
    }

    private static func parts(_ text: String) -> (parameters: Parameters, salt: [UInt8], key: [UInt8])? {
        let fields = text.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0] == "scrypt" else { return nil }
        var values: [String: Int] = [:]
        for pair in fields[1].split(separator: ",") {
            let item = pair.split(separator: "=")
            guard item.count == 2, let value = Int(item[1]), value > 0 else { return nil }
            values[String(item[0])] = value
        }
        guard let rounds = values["N"], rounds.nonzeroBitCount == 1, rounds <= 1 << 30, let blockSize = values["r"], blockSize <= 1024,
            let parallelism = values["p"], parallelism <= 1024, let salt = try? Base64URL.decoded(fields[2]),
            let key = try? Base64URL.decoded(fields[3]),
            salt.count >= 16, key.count == 32
        else { return nil }
        return (Parameters(rounds: rounds, blockSize: blockSize, parallelism: parallelism), salt, key)
    }

    /// What a password must be: 12 to 256 characters. Length is what makes a password hard to
    /// guess; no other composition rule is imposed (NIST SP 800-63B).
    public static func check(_ password: String) throws(ServiceError) {
        guard (12...256).contains(password.unicodeScalars.count) else {
            throw ServiceError(400, .weakPassword, "a password has 12 to 256 characters")
        }
    }
}

/// Runs the slow password hashes off the concurrency pool, at most two at a time (each takes
/// 128 MiB), with at most ``maximumWaiting`` more waiting: a burst of sign-ins waits its turn,
/// and beyond that is told to come back (503), instead of exhausting the server's memory or
/// holding everyone's sign-in behind a flood.
public final class PasswordHasher: Sendable {
    private let permits: Locked<(free: Int, waiting: [CheckedContinuation<Bool, Never>])>
    /// How many may wait for a permit.
    public let maximumWaiting: Int

    public init(concurrent: Int = 2, maximumWaiting: Int = 32) {
        permits = Locked((concurrent, []))
        self.maximumWaiting = maximumWaiting
    }

    /// How many wait for a permit now.
    public var waitingCount: Int { permits.withLock { $0.waiting.count } }

    /// `work` on a thread of its own, when a permit is free.
    ///
    /// - Throws: 503 `overloaded` when ``maximumWaiting`` wait already.
    public func run<T: Sendable>(_ work: @escaping @Sendable () -> T) async throws(ServiceError) -> T {
        let maximumWaiting = maximumWaiting
        // True once a permit is this call's: at once, or when a finished call hands its permit on.
        let admitted = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answer = permits.withLock { state -> Bool? in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                guard state.waiting.count < maximumWaiting else { return false }
                state.waiting.append(continuation)
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
        guard admitted else {
            throw ServiceError(503, .overloaded, "too many password checks are waiting; retry in a few seconds", retryAfterSeconds: 5)
        }
        defer {
            let next = permits.withLock { state -> CheckedContinuation<Bool, Never>? in
                guard !state.waiting.isEmpty else {
                    state.free += 1
                    return nil
                }
                return state.waiting.removeFirst()
            }
            next?.resume(returning: true)
        }
        return await withCheckedContinuation { (continuation: CheckedContinuation<T, Never>) in
            let pending = Locked<CheckedContinuation<T, Never>?>(continuation)
            let claim = { @Sendable () -> CheckedContinuation<T, Never>? in
                pending.withLock { waiting in
                    defer { waiting = nil }
                    return waiting
                }
            }
            let started = DetachedThread.start(named: "fleetset-kdf") { claim()?.resume(returning: work()) }
            // No thread (the system is out of them): do the work here rather than never.
            if started != 0 { claim()?.resume(returning: work()) }
        }
    }
}
