import ArgumentParser
import FleetIO
import FleetProtocol
import FleetSSO
import FleetServer

/// `serve`'s single sign-on options: the organization's OpenID Provider, the console's client
/// (its secret from a file, never the command line), the CLI's, and the groups that map to roles.
struct SingleSignOnOptions: ParsableArguments {
    @Option(help: "The OpenID Provider's issuer URL (https; http only on 127.0.0.1): turns on single sign-on.")
    var oidcIssuer: String?

    @Option(help: "The console's client id at the provider (a confidential client, authorization code flow).")
    var oidcClientId: String?

    @Option(help: "A file whose first line is the console client's secret (readable by the server's user only).")
    var oidcClientSecretFile: String?

    @Option(help: "The console's callback as registered at the provider: https://HOST/console/sso/callback.")
    var oidcRedirectUri: String?

    @Option(help: "The CLI's client id at the provider (a public client with the device grant), for fleetset admin login --sso.")
    var oidcCliClientId: String?

    @Option(
        help: ArgumentHelp(
            "A group that grants a role: GROUP=ROLE, GROUP=editor:apps=APP,APP, GROUP=operator:groups=GROUP (repeatable; the highest role wins).",
            valueName: "RULE"))
    var oidcRole: [String] = []

    @Option(help: "A file of role rules, one per line as --oidc-role takes them (a line starting with # is a comment).")
    var oidcRoleFile: String?

    @Option(help: "The claim that lists a person's groups.")
    var oidcGroupsClaim: String = "groups"

    @Option(help: "When the provider joins groups into one string, what separates them (LemonLDAP::NG: \"; \").")
    var oidcGroupsSeparator: String?

    @Option(help: "Seconds between readings of the provider's keys for a token that names a key not seen yet (1 to 3600).")
    var oidcKeysRefreshInterval: Int64 = 60

    @Option(help: "The provider's name on the console's sign-in button.")
    var oidcProviderName: String = "single sign-on"

    @Flag(
        inversion: .prefixedNo,
        help:
            "Let names and passwords sign in (the console's form, fleetset admin login); --no-password-sign-in leaves single sign-on and the admin token file."
    )
    var passwordSignIn = true

    func validate() throws {
        guard let oidcIssuer else {
            let given = [oidcClientId, oidcClientSecretFile, oidcRedirectUri, oidcCliClientId, oidcRoleFile].contains { $0 != nil }
            if given || !oidcRole.isEmpty { throw ValidationError("the --oidc-… options need --oidc-issuer") }
            if !passwordSignIn {
                throw ValidationError("--no-password-sign-in needs single sign-on (--oidc-issuer): else only the admin token signs in")
            }
            return
        }
        guard ProviderMetadata.isAcceptable(oidcIssuer) else {
            throw ValidationError("--oidc-issuer must be an https URL (http only on 127.0.0.1 or localhost)")
        }
        guard oidcClientId != nil, oidcClientSecretFile != nil, let oidcRedirectUri else {
            throw ValidationError("--oidc-issuer needs --oidc-client-id, --oidc-client-secret-file and --oidc-redirect-uri")
        }
        guard ProviderMetadata.isAcceptable(oidcRedirectUri), oidcRedirectUri.hasSuffix("/console/sso/callback") else {
            throw ValidationError("--oidc-redirect-uri must be https://HOST/console/sso/callback (http only on 127.0.0.1 or localhost)")
        }
        guard (1...3600).contains(oidcKeysRefreshInterval) else {
            throw ValidationError("--oidc-keys-refresh-interval is 1 to 3600 seconds")
        }
        _ = try mapping()
    }

    /// The role rules of `--oidc-role` and `--oidc-role-file`.
    func mapping() throws -> RoleMapping {
        var rules = oidcRole
        if let oidcRoleFile {
            let bytes: [UInt8]
            do {
                bytes = try FileSystem.readFile(oidcRoleFile, maximumSize: 1 << 20, trusting: .rootAndEffectiveUser())
            } catch {
                throw ValidationError("--oidc-role-file: cannot use \(oidcRoleFile): \(error)")
            }
            // RoleMapping skips blank lines and comments (lines starting with #).
            rules += String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline).map(String.init)
        }
        guard !rules.isEmpty else { throw ValidationError("--oidc-issuer needs at least one --oidc-role (or --oidc-role-file)") }
        do {
            return try RoleMapping(parsing: rules)
        } catch {
            throw ValidationError("--oidc-role: \(error)")
        }
    }

    /// The configuration, the secret read; `nil` without `--oidc-issuer`.
    func singleSignOn() throws -> SingleSignOn? {
        guard let oidcIssuer, let oidcClientId, let oidcClientSecretFile, let oidcRedirectUri else { return nil }
        let secret = try DatabasePassword.read(oidcClientSecretFile, option: "--oidc-client-secret-file")
        let client = OpenIDClient(
            OpenIDClient.Configuration(
                issuer: oidcIssuer, console: ClientCredentials(id: oidcClientId, secret: secret), cliClientID: oidcCliClientId,
                groupsClaim: oidcGroupsClaim, groupsSeparator: oidcGroupsSeparator, keysRefreshInterval: oidcKeysRefreshInterval),
            transport: try CurlProviderTransport(allowPlainHTTP: oidcIssuer.hasPrefix("http://")))
        return SingleSignOn(
            client: client, mapping: try mapping(), redirectURI: oidcRedirectUri, passwordSignIn: passwordSignIn,
            providerName: oidcProviderName)
    }
}
