import FleetConsole
import FleetProtocol
import FleetSSO
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging

/// The console's single sign-on: the OpenID Connect authorization code flow with PKCE, `state`
/// and `nonce` (OpenID Connect Core §3.1).
///
/// `GET /console/sso/start` keeps a new ``LoginAttempt`` in the store under its state's hash
/// (so that the callback may reach any instance, once) and sets the state in a cookie of this
/// browser; `GET /console/sso/callback` takes the attempt (deleted in the same write: a state
/// replayed is unknown), requires the browser's cookie to carry the same state (a sign-in
/// started in another browser, a login CSRF, is refused), exchanges the code, checks the ID
/// token, maps the groups to a role, and starts a console session. Every refusal is audited.
extension ConsoleRoutes {
    /// The cookie that ties a sign-in at the provider to the browser that started it.
    static let stateCookieName = "fleetset_sso_state"

    /// The sign-in page as this server offers it.
    func signInPage(error: String? = nil) -> HTML {
        ConsolePages.signIn(
            error: error,
            choices: ConsolePages.SignInChoices(
                singleSignOn: singleSignOn?.providerName, passwords: singleSignOn?.passwordSignIn ?? true))
    }

    func defineSingleSignOn(_ on: (HTTPRequest.Method, String, @escaping Handler) -> Void) {
        guard let singleSignOn else { return }
        on(.get, "console/sso/start") { request, context in try await startSingleSignOn(request, context, singleSignOn) }
        on(.get, "console/sso/callback") { request, context in try await finishSingleSignOn(request, context, singleSignOn) }
    }

    /// The key a login attempt is kept under: its state's hash (the store never holds a state
    /// that could finish a sign-in).
    static func attemptKey(state: String) -> String {
        "sso-attempt:" + Credentials.hash(state)
    }

    private func startSingleSignOn(_ request: Request, _ context: FleetRequestContext, _ sso: SingleSignOn) async throws -> Response {
        let client = limits.client(of: request, context)
        do throws(any Error) {
            // Each start writes a row and may ask the provider: an address past its failed
            // sign-ins waits, as for a password.
            try limits.admit(client: client)
            try limits.admitSignIn(client: client)
            let time = service.now
            let attempt = LoginAttempt.start(now: time, returnTo: request.uri.queryParameters.get("return").map({ String($0) }))
            let url: String
            do throws(OpenIDClient.Failure) {
                url = try await sso.client.authorizationURL(for: attempt, redirectURI: sso.redirectURI, now: time)
            } catch {
                logger.error(
                    "single sign-on cannot start", metadata: ["event": "sso-sign-in", "outcome": "provider", "reason": "\(error)"])
                throw ServiceError(502, .internalError, "The identity provider cannot be reached now: \(error.reason)")
            }
            _ = try await service.context.store.addOneTimeValue(
                key: Self.attemptKey(state: attempt.state), value: attempt.storedText, expiresAt: time + LoginAttempt.lifetime, now: time)
            var response = redirect(url)
            response.headers[.setCookie] = stateCookie(attempt.state, maxAge: Int(LoginAttempt.lifetime), request: request)
            return response
        } catch let error as ServiceError {
            return page(signInPage(error: error.message), status: error.status)
        }
    }

    private func finishSingleSignOn(_ request: Request, _ context: FleetRequestContext, _ sso: SingleSignOn) async throws -> Response {
        let client = limits.client(of: request, context)
        let address = limits.address(of: request, context)
        var person: SignedInPerson?
        do throws(any Error) {
            try limits.admit(client: client)
            try limits.admitSignIn(client: client)
            let (attempt, signedIn) = try await checkCallback(request, sso)
            person = signedIn
            let (identity, grant) = sso.identityAndGrant(signedIn)
            let stored = try await service.accounts.signIn(identity, grant: grant)
            let session = try await service.accounts.startSingleSignOnConsoleSession(stored, address: address)
            logger.notice(
                "console sign-in",
                metadata: [
                    "event": "console-sign-in", "outcome": "signed-in", "session": "\(session.id)", "account": "\(session.account)",
                    "via": "sso",
                ])
            await audit(
                "sso.sign-in", status: 200, outcome: "ok", address: address, actor: stored.name,
                credential: Caller.Credential.consoleSession(id: session.id).description,
                detail: SingleSignOn.auditDetail(signedIn, account: stored))
            var response = page(ConsolePages.signedIn(continueTo: attempt.returnTo))
            response.headers[values: .setCookie] = [
                cookie(session.cookie, maxAge: Int(ConsoleSession.lifetime), request: request),
                stateCookie("", maxAge: 0, request: request),
            ]
            return response
        } catch {
            let refusal: ServiceError
            if let error = error as? ServiceError {
                refusal = error
            } else {
                // A store that failed: said to the person plainly, the error logged (and audited as a 500).
                logger.error("single sign-on failed", metadata: ["event": "sso-sign-in", "outcome": "internal", "error": "\(error)"])
                refusal = ServiceError(500, .internalError, "The sign-in could not be finished; try again.")
            }
            var response = await refused(
                refusal, action: "sso.sign-in", actor: "-", credential: Caller.Credential.singleSignOn.description, failing: nil,
                client: client, address: address, detail: SingleSignOn.auditDetail(person, account: nil, reason: refusal.message)
            ) { _, message in signInPage(error: message) }
            response.headers[.setCookie] = stateCookie("", maxAge: 0, request: request)
            return response
        }
    }

    /// The callback's checks, in order: its attempt taken from the store (a state is good for
    /// one try, whatever follows), the state cookie of the browser that started it, the
    /// provider's answer, the code exchanged and the ID token checked. Returns the attempt and
    /// the person.
    ///
    /// - Throws: 401 `unauthenticated` saying which check failed.
    private func checkCallback(_ request: Request, _ sso: SingleSignOn) async throws -> (LoginAttempt, SignedInPerson) {
        let parameters = request.uri.queryParameters
        guard let state = parameters.get("state").map({ String($0) }), !state.isEmpty else {
            throw ServiceError(401, .unauthenticated, "The identity provider sent no state back; sign in again.")
        }
        let time = service.now
        let kept = try await service.context.store.takeOneTimeValue(key: Self.attemptKey(state: state), now: time)
        guard let kept, let attempt = LoginAttempt(storedText: kept), attempt.isCurrent(now: time) else {
            throw ServiceError(401, .unauthenticated, "This sign-in is unknown, was used already, or took too long; sign in again.")
        }
        guard cookies(named: Self.stateCookieName, in: request).contains(state) else {
            throw ServiceError(
                401, .unauthenticated,
                "This sign-in was started in another browser, or another sign-in was started since; sign in again here.")
        }
        if let error = parameters.get("error") {
            let description = parameters.get("error_description").map { ": " + $0.printablePrefix(200) } ?? ""
            throw ServiceError(
                401, .unauthenticated, "The identity provider refused the sign-in (\(error.printablePrefix(64))\(description)).")
        }
        guard let code = parameters.get("code").map({ String($0) }), !code.isEmpty else {
            throw ServiceError(401, .unauthenticated, "The identity provider sent no code back; sign in again.")
        }
        do throws(OpenIDClient.Failure) {
            return (attempt, try await sso.client.finish(code: code, attempt: attempt, redirectURI: sso.redirectURI, now: time))
        } catch {
            throw ServiceError(401, .unauthenticated, "The identity provider's answer was refused: \(error.reason)")
        }
    }

    /// The state cookie: `SameSite=Lax`, because the provider's redirect back is a navigation
    /// from another site (a `Strict` cookie would not come with it), and only for `/console/sso`.
    private func stateCookie(_ value: String, maxAge: Int, request: Request) -> String {
        cookie(Self.stateCookieName, value, path: "/console/sso", sameSite: "Lax", maxAge: maxAge, request: request)
    }
}
