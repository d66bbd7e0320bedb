import ExtrasBase64
import FleetJSON
import FleetProtocol
import JWTKit

/// The claims of an OpenID Connect ID token that fleetset reads, from a token whose signature
/// was checked.
public struct IDTokenClaims: Sendable, Hashable {
    public var issuer: String
    public var subject: String
    public var audience: [String]
    public var expires: Int64
    public var issuedAt: Int64
    public var nonce: String?
    public var authorizedParty: String?
    /// The claim the configuration names (default `groups`), as strings.
    public var groups: [String]
    public var preferredUsername: String?
    public var name: String?
    public var email: String?

    /// The times a token may carry (seconds since 1970, before the year 30000): arithmetic on
    /// them never overflows.
    static let times: ClosedRange<Int64> = 0...(1 << 40)

    /// Reads the claims of a token's payload (its JSON, already verified).
    ///
    /// - Throws: ``IDTokenCheck/Refused`` naming a claim that is missing or of the wrong type.
    init(payload: JSONValue, groupsClaim: String, groupsSeparator: String? = nil) throws(IDTokenCheck.Refused) {
        guard case .object(let object) = payload else { throw IDTokenCheck.Refused(reason: "the token's payload is not an object") }
        func string(_ name: String) -> String? { if case .string(let value)? = object[name] { value } else { nil } }
        func seconds(_ name: String) throws(IDTokenCheck.Refused) -> Int64 {
            guard case .number(let number)? = object[name],
                let value = number.int64Value ?? Int64(exactly: number.doubleValue.rounded(.down)),
                Self.times.contains(value)
            else { throw IDTokenCheck.Refused(reason: "the token has no \(name), or one out of range") }
            return value
        }
        guard let issuer = string("iss"), let subject = string("sub"), !subject.isEmpty else {
            throw IDTokenCheck.Refused(reason: "the token has no iss or no sub")
        }
        self.issuer = issuer
        self.subject = subject
        switch object["aud"] {
        case .string(let one)?: audience = [one]
        case .array(let many)?:
            audience = many.compactMap { if case .string(let value) = $0 { value } else { nil } }
            guard audience.count == many.count, !audience.isEmpty else {
                throw IDTokenCheck.Refused(reason: "the token's aud is not a list of strings")
            }
        default: throw IDTokenCheck.Refused(reason: "the token has no aud")
        }
        expires = try seconds("exp")
        issuedAt = try seconds("iat")
        nonce = string("nonce")
        authorizedParty = string("azp")
        groups = Self.groups(in: payload, claim: groupsClaim, separator: groupsSeparator)
        preferredUsername = string("preferred_username")
        name = string("name")
        email = string("email")
    }
}

extension IDTokenClaims {
    /// The groups `claim` of a token's payload or a userinfo answer lists: a list of strings,
    /// or one string (split only where the configuration says the provider joins several into
    /// one, LemonLDAP::NG's "; ": else a group named "x; fleet-admins" would grant fleet-admins).
    public static func groups(in payload: JSONValue, claim: String, separator: String?) -> [String] {
        guard case .object(let object) = payload else { return [] }
        switch object[claim] {
        case .array(let many)?: return many.compactMap { if case .string(let value) = $0 { value } else { nil } }
        case .string(let one)?:
            return separator.map { separator in
                one.split(separator: separator).map { String($0[...].trimmingSpaces()) }.filter { !$0.isEmpty }
            } ?? [one]
        default: return []
        }
    }
}

/// What the key collection checks: the signature alone (the claims are read afterwards from
/// the verified payload, by ``IDTokenClaims``).
struct SignatureOnly: JWTPayload {
    init(from decoder: any Decoder) throws {}
    func encode(to encoder: any Encoder) throws {}
    func verify(using algorithm: some JWTAlgorithm) async throws {}
}

/// A provider's signing keys, from its JWKS: the key collection that checks signatures, and
/// the key ids it holds (JWTKit falls back to its default key for an id it does not know; a
/// token naming a key the provider does not publish is refused here first, which is also
/// how a rotation at the provider is noticed: the keys are read again).
public struct ProviderKeys: Sendable {
    public let collection: JWTKeyCollection
    /// Each usable key's algorithm, by `kid`.
    public let algorithms: [String: String]
    /// The `kid` of every usable key.
    public var ids: Set<String> { Set(algorithms.keys) }

    /// The algorithms fleetset takes: RS256 (RSA keys) and ES256 (P-256 keys), what every
    /// provider offers. Each key is pinned to one, whatever a token's header says.
    static let accepted: [String: String] = ["RSA": "RS256", "EC": "ES256"]

    /// Reads a JWKS document, keeping the keys meant for signatures (`use` absent or `sig`)
    /// of an accepted type; others (encryption keys, other curves) are skipped, not fatal.
    ///
    /// - Throws: ``IDTokenCheck/Refused`` when it is not a JWKS, a signing key has no `kid`
    ///   (a token could not say which it is), or no key is usable.
    public init(jwks text: String) async throws(IDTokenCheck.Refused) {
        guard case .object(let object)? = try? JSONParser.parse(Array(text.utf8)), case .array(let keys)? = object["keys"] else {
            throw IDTokenCheck.Refused(reason: "the provider's JWKS is not a JSON object with keys")
        }
        let collection = JWTKeyCollection()
        var algorithms: [String: String] = [:]
        for key in keys {
            guard case .object(var members) = key else { continue }
            if case .string(let use)? = members["use"], use != "sig" { continue }
            guard case .string(let type)? = members["kty"], let algorithm = Self.accepted[type] else { continue }
            if type == "EC", members["crv"] != .string("P-256") { continue }
            if let stated = members["alg"], stated != .string(algorithm) { continue }
            guard case .string(let id)? = members["kid"], !id.isEmpty else {
                throw IDTokenCheck.Refused(reason: "the provider's JWKS has a signing key without a kid")
            }
            members["alg"] = .string(algorithm)
            do {
                try await collection.add(jwk: try JWK(json: JSONValue.object(members).serialized()))
            } catch {
                continue
            }
            algorithms[id] = algorithm
        }
        guard !algorithms.isEmpty else { throw IDTokenCheck.Refused(reason: "the provider's JWKS has no RS256 or ES256 signing key") }
        // Never a fallback: a token is checked with the key its kid names, or not at all.
        _ = await collection.clearDefault()
        self.collection = collection
        self.algorithms = algorithms
    }
}

/// Checks an ID token as OpenID Connect Core §3.1.3.7 asks: the signature against the
/// provider's keys (from its JWKS), then `iss`, `aud` (and `azp`), `exp`, `iat` and `nonce`.
public struct IDTokenCheck: Sendable {
    /// Why a token was refused: what a log line and an audit entry say (never the token).
    public struct Refused: Error, Sendable, Hashable, CustomStringConvertible {
        public let reason: String
        public var description: String { reason }
    }

    /// Clock skew allowed between the provider and this server.
    public static let skew: Int64 = 60
    /// An ID token issued longer ago than this is refused (it was meant for a sign-in now).
    public static let maximumAge: Int64 = 10 * 60

    public let issuer: String
    public let clientID: String
    public let groupsClaim: String
    /// When the provider joins several groups into one string (LemonLDAP::NG: `"; "`), that separator.
    public let groupsSeparator: String?

    public init(issuer: String, clientID: String, groupsClaim: String = "groups", groupsSeparator: String? = nil) {
        self.issuer = issuer
        self.clientID = clientID
        self.groupsClaim = groupsClaim
        self.groupsSeparator = groupsSeparator
    }

    /// The token's claims, when its signature is one of `keys`' and its claims hold at `now`
    /// for a sign-in that sent `nonce` (`nil`: the device grant's, which has none).
    ///
    /// - Throws: ``Refused`` saying which check failed.
    public func claims(of token: String, keys: ProviderKeys, nonce: String?, now: Int64) async throws(Refused) -> IDTokenClaims {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, case .object(let header)? = Self.json(parts[0]), let payload = Self.json(parts[1]) else {
            throw Refused(reason: "the token is not three base64url parts with a JSON header and payload")
        }
        guard case .string(let kid)? = header["kid"], let algorithm = keys.algorithms[kid] else {
            throw Refused(reason: "the token is signed with a key the provider does not publish (kid unknown)")
        }
        guard header["alg"] == .string(algorithm) else {
            throw Refused(reason: "the token's alg is not \(algorithm), the algorithm of its key")
        }
        guard header["crit"] == nil else { throw Refused(reason: "the token has critical header parameters fleetset does not know") }
        do {
            _ = try await keys.collection.verify(token, as: SignatureOnly.self)
        } catch {
            throw Refused(reason: "the token's signature does not verify against the provider's keys")
        }
        let claims = try IDTokenClaims(payload: payload, groupsClaim: groupsClaim, groupsSeparator: groupsSeparator)
        guard claims.issuer == issuer else { throw Refused(reason: "the token was issued by \(claims.issuer), not \(issuer)") }
        guard claims.audience.contains(clientID) else {
            throw Refused(reason: "the token is meant for \(claims.audience.joined(separator: ", ")), not this server (\(clientID))")
        }
        // OpenID Connect Core §3.1.3.7, 4 and 5: with several audiences azp must be there; when
        // there, it must be this server.
        if claims.authorizedParty.map({ $0 != clientID }) ?? (claims.audience.count > 1) {
            throw Refused(reason: "the token was issued to another party (azp), not this server")
        }
        guard now < claims.expires + Self.skew else { throw Refused(reason: "the token expired") }
        guard claims.issuedAt <= now + Self.skew, now - claims.issuedAt <= Self.maximumAge else {
            throw Refused(reason: "the token was not issued just now")
        }
        if let nonce {
            guard claims.nonce == nonce else {
                throw Refused(reason: "the token's nonce is not the one this sign-in sent")
            }
        }
        return claims
    }

    /// The `kid` a token's header names, when it has one.
    public static func keyID(of token: String) -> String? {
        guard let header = token.split(separator: ".", omittingEmptySubsequences: false).first,
            case .object(let object)? = json(header), case .string(let kid)? = object["kid"]
        else { return nil }
        return kid
    }

    private static func json(_ part: Substring) -> JSONValue? {
        guard let bytes = try? Base64.decode(string: String(part), options: [.base64UrlAlphabet, .omitPaddingCharacter]) else {
            return nil
        }
        return try? JSONParser.parse(bytes)
    }
}
