import Curl
import FleetJSON
import FleetProtocol
import FleetSSO
import FleetServerCore
import HTTPTypes

/// How the server signs people in through the organization's OpenID Provider: the provider's
/// client (discovery, keys, the code exchange, the CLI's tokens checked), the mapping of its
/// groups to roles, where the provider sends browsers back, and whether names and passwords
/// still sign in.
public struct SingleSignOn: Sendable {
    public let client: OpenIDClient
    public let mapping: RoleMapping
    /// The console's callback as registered at the provider: `https://HOST/console/sso/callback`.
    public let redirectURI: String
    /// Whether a name and password still sign in (the console's form, `POST /v1/admin/sign-in`).
    /// The admin token file always does: it is how the server's owner gets in when the provider is down.
    public let passwordSignIn: Bool
    /// How the provider is named on the sign-in page.
    public let providerName: String

    public init(client: OpenIDClient, mapping: RoleMapping, redirectURI: String, passwordSignIn: Bool = true, providerName: String) {
        self.client = client
        self.mapping = mapping
        self.redirectURI = redirectURI
        self.passwordSignIn = passwordSignIn
        self.providerName = providerName
    }

    /// The refusal of a name and password where they are turned off.
    static func passwordsOff(_ sso: SingleSignOn) -> ServiceError {
        ServiceError(
            403, .passwordSignInOff,
            "Names and passwords do not sign in on this server: sign in with \(sso.providerName) (fleetset admin login --sso), or with the admin token file"
        )
    }

    /// What the accounts need of a person the provider vouched for, and what its groups grant.
    func identityAndGrant(_ person: SignedInPerson) -> (SingleSignOnIdentity, SingleSignOnGrant?) {
        (
            SingleSignOnIdentity(
                issuer: person.issuer, subject: person.subject, preferredUsername: person.preferredUsername, email: person.email,
                displayName: person.name),
            mapping.grant(groups: person.groups).map { SingleSignOnGrant(role: $0.role, scope: $0.scope) }
        )
    }

    /// What an audit entry says of a sign-in: the issuer, the subject and the role mapped.
    static func auditDetail(_ person: SignedInPerson?, account: StoredAccount?, reason: String? = nil) -> String {
        var parts: [String] = []
        if let person { parts += ["issuer=\(person.issuer)", "subject=\(person.subject)"] }
        if let account {
            parts.append("role=\(account.account.role.rawValue)")
            if !account.account.scope.isEverything { parts.append("scope=\(account.account.scope.json.serialized())") }
        }
        if let reason { parts.append("reason=\(reason)") }
        return parts.joined(separator: " ")
    }
}

/// The provider asked with libcurl, as every request fleetset makes.
public final class CurlProviderTransport: ProviderTransport {
    private let http: HTTPClient

    /// - Parameter allowPlainHTTP: for a provider on this machine (`http://127.0.0.1`), which
    ///   ``ProviderMetadata/isAcceptable(_:)`` allows; TLS is verified otherwise, always.
    public init(allowPlainHTTP: Bool) throws {
        http = try HTTPClient(
            configuration: HTTPClient.Configuration(
                allowInsecureHTTP: allowPlainHTTP, limits: TransferLimits(timeout: .seconds(15)), maxRedirects: 0,
                userAgent: "fleetset-server"))
    }

    public func get(_ url: String, bearer: String?) async throws -> ProviderAnswer {
        var headers: HTTPClient.Headers = ["Accept": "application/json"]
        if let bearer { headers["Authorization"] = "Bearer \(bearer)" }
        let answer = try await http.execute(HTTPClient.Request(method: .get, url: url, headers: headers))
        return ProviderAnswer(status: answer.status, body: answer.body)
    }

    public func postForm(_ url: String, form: [(String, String)], client: ClientCredentials?) async throws -> ProviderAnswer {
        var headers: HTTPClient.Headers = ["Accept": "application/json", "Content-Type": "application/x-www-form-urlencoded"]
        if let client { headers["Authorization"] = client.basicAuthorization }
        let body = PercentEncoding.form(form)
        let answer = try await http.execute(HTTPClient.Request(method: .post, url: url, headers: headers, body: Array(body.utf8)))
        return ProviderAnswer(status: answer.status, body: answer.body)
    }
}
