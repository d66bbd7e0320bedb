import FleetProtocol
import FleetSSO
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging

/// The CLI's single sign-on (`fleetset admin login --sso`): the device grant (RFC 8628) between
/// the CLI and the provider, then the provider's tokens exchanged here for a personal API token.
extension Routes {
    func defineSingleSignOn(_ on: (HTTPRequest.Method, String, Access, @escaping Handler) -> Void) {
        on(.get, "v1/admin/sso", .anyone) { request, context in
            // It may ask the provider: an address past its failed sign-ins waits.
            _ = try admitSignIn(request, context)
            guard let singleSignOn, let clientID = singleSignOn.client.configuration.cliClientID else {
                throw ServiceError(404, .notFound, "this server has no single sign-on for the CLI; sign in with fleetset admin login")
            }
            let metadata: ProviderMetadata
            do throws(OpenIDClient.Failure) {
                metadata = try await singleSignOn.client.providerMetadata(now: service.now)
            } catch {
                throw ServiceError(502, .internalError, "the identity provider cannot be reached: \(error.reason)")
            }
            guard let device = metadata.deviceAuthorizationEndpoint else {
                throw ServiceError(
                    404, .notFound,
                    "the identity provider offers no device grant: make a personal token in the console (Account page) and use fleetset admin login --token-file"
                )
            }
            return json(
                .ok,
                SingleSignOnInfo(
                    issuer: metadata.issuer, clientID: clientID, deviceAuthorizationEndpoint: device, tokenEndpoint: metadata.tokenEndpoint
                ).json)
        }
        on(.post, "v1/admin/sign-in/sso", .anyone) { request, context in try await signInWithSingleSignOn(request, context) }
    }

    /// `POST /v1/admin/sign-in/sso`: within the address's limits as a password sign-in is; the
    /// provider's token checked (``OpenIDClient/person(idToken:accessToken:now:)``) and taken
    /// once (kept as its hash until it would expire anyway); the person's account found or
    /// made, its role from its groups; a personal API token answered. Every answer but a 429
    /// is audited.
    func signInWithSingleSignOn(_ request: Request, _ context: FleetRequestContext) async throws -> Response {
        let client = try admitSignIn(request, context)
        guard let singleSignOn else { throw ServiceError(404, .notFound, "this server has no single sign-on") }
        let sent = try ServiceError.decode(try await jsonBody(request, limit: Self.ssoSignInLimit), as: SingleSignOnSignIn.init(json:))
        var person: SignedInPerson?
        var actor = "-"
        let audit = { (status: Int, outcome: String, detail: String) in
            await service.audit.recordAfterTheFact(
                AuditDraft(
                    actor: actor, credential: Caller.Credential.singleSignOn.description, address: limits.address(of: request, context),
                    action: "sso.sign-in", target: "token-name=\(sent.tokenName)", status: status, outcome: outcome, detail: detail))
        }
        do {
            let time = service.now
            let signedIn: SignedInPerson
            do throws(OpenIDClient.Failure) {
                signedIn = try await singleSignOn.client.person(idToken: sent.idToken, accessToken: sent.accessToken, now: time)
            } catch {
                throw ServiceError(401, .unauthenticated, "the identity provider's token was refused: \(error.reason)")
            }
            person = signedIn
            // The same token twice is refused (one that leaked from a log or a proxy is good for
            // nothing here), for as long as the token itself is good.
            let taken = Credentials.hash(sent.idToken ?? sent.accessToken ?? "")
            let remembered = max(signedIn.tokenExpires, time + IDTokenCheck.maximumAge) + IDTokenCheck.skew
            guard
                try await service.context.store.addOneTimeValue(key: "sso-token:" + taken, value: "used", expiresAt: remembered, now: time)
            else { throw ServiceError(401, .unauthenticated, "this token from the identity provider was used already; sign in again") }
            let (identity, grant) = singleSignOn.identityAndGrant(signedIn)
            let stored = try await service.accounts.signIn(identity, grant: grant)
            actor = stored.name
            // A person removed at the provider keeps what they signed in with until it expires:
            // at most the 30 days of a login's default.
            let response = try await tokenAnswer(
                APITokenRequest(name: sent.tokenName, expiresIn: min(sent.expiresIn, SignInRequest.defaultLifetime)),
                for: Caller(account: stored.account, credential: .singleSignOn))
            await audit(201, "ok", SingleSignOn.auditDetail(signedIn, account: stored))
            return response
        } catch {
            let refusal = error as? ServiceError ?? ServiceError(500, .internalError, "the sign-in could not be finished; try again")
            if refusal.status == .internalServerError {
                logger.error("single sign-on failed", metadata: ["event": "sso-sign-in", "error": "\(error)"])
            }
            if refusal.status != .tooManyRequests {
                await audit(
                    Int(refusal.status.code), refusal.code.rawValue, SingleSignOn.auditDetail(person, account: nil, reason: refusal.message)
                )
            }
            if refusal.status == .unauthorized { try limits.recordFailure(client: client, credential: nil) }
            throw refusal
        }
    }

    /// The largest sign-in body read: two tokens of up to 16 KiB.
    static let ssoSignInLimit = 40 << 10
}
