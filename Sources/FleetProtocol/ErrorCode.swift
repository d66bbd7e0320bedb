/// The machine-readable code of a refusal: the `error` member of protocol v1's error body
/// (`{"error": "stale-revision", "message": "…"}`), used by the server that sends it and by
/// every client that acts on it (the agent's failure classification, the CLI, the console, the
/// simulator). Compare with the static members, never with text.
///
/// A code this build does not know (from a newer server) is kept as it was sent.
public struct ErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
    /// The code as the wire carries it (`stale-revision`).
    public let rawValue: String

    /// The code the wire carries as `rawValue`.
    public init(rawValue: String) { self.rawValue = rawValue }

    private init(_ rawValue: String) { self.rawValue = rawValue }

    /// The code as the wire carries it.
    public var description: String { rawValue }

    /// Every code protocol v1's routes send, as the OpenAPI document lists them.
    public static let all: [ErrorCode] =
        [
            .adminOnly, .appMismatch, .badKeyPath, .badParameter, .badPrecondition, .badRequest, .concurrentWrite, .deviceDisabled,
            .deviceOnly, .ifMatchRequired, .internalError, .invalidEnrollmentToken, .invalidMetadata, .invalidValues, .methodNotAllowed,
            .noRollout,
            .notFound, .notWritable, .nothingToRevert, .overloaded, .rateLimited, .rolloutInProgress, .rolloutNotPaused, .shuttingDown,
            .staleRevision, .tooLarge, .tooManyFacts, .unauthenticated, .unknownApp, .unknownDevice, .unknownEnrollmentToken, .unknownKey,
            .unsupportedMediaType, .unsupportedMetadata, .valuesInvalid, .versionNotIncreased, .accountExists, .lastOwner, .unknownAccount,
            .unknownAPIToken, .weakPassword, .twoFactorRequired, .passwordSignInOff, .unknownWebhook, .badWebhook,
            .badGroup, .unknownGroup, .badStatusHeader,
        ] + AdminRight.allCases.map(ErrorCode.needs)

    /// `needs-<right>`, 403: the caller's role does not have the right (`needs-write-values`),
    /// or its scope does not cover what the request names (the message says which).
    public static func needs(_ right: AdminRight) -> ErrorCode { ErrorCode("needs-" + right.rawValue) }

    /// The right a `needs-<right>` code names, or `nil` for any other code.
    public var missingRight: AdminRight? {
        rawValue.hasPrefix("needs-") ? AdminRight(rawValue: String(rawValue.dropFirst("needs-".count))) : nil
    }

    /// `weak-password`, 400: a password shorter than 12 or longer than 256 characters.
    public static let weakPassword = ErrorCode("weak-password")
    /// `two-factor-required`, 401: the account signs in with a code from its authenticator too.
    public static let twoFactorRequired = ErrorCode("two-factor-required")
    /// `password-sign-in-off`, 403: the server signs people in through its identity provider
    /// only (`serve --no-password-sign-in`); the admin token file still signs in.
    public static let passwordSignInOff = ErrorCode("password-sign-in-off")
    /// `account-exists`, 409: an account with the name exists.
    public static let accountExists = ErrorCode("account-exists")
    /// `last-owner`, 409: the change would leave no enabled owner.
    public static let lastOwner = ErrorCode("last-owner")
    /// `unknown-account`, 404: no such account.
    public static let unknownAccount = ErrorCode("unknown-account")
    /// `unknown-token`, 404: no such API token (of the caller's, for one who manages only its own).
    public static let unknownAPIToken = ErrorCode("unknown-token")

    /// `unknown-webhook`, 404: no such webhook subscription (or message of it).
    public static let unknownWebhook = ErrorCode("unknown-webhook")
    /// `bad-webhook`, 400: a subscription's URL the server may not call, or an event type it does
    /// not know (the message says which and why).
    public static let badWebhook = ErrorCode("bad-webhook")

    /// `bad-group`: 400 for a group query that cannot be read; 409 for a group defined by a
    /// query given to a device or a token by hand, a group devices hold by hand given a query,
    /// or one definition past ``GroupDefinition/maximumCount``. The message says which.
    public static let badGroup = ErrorCode("bad-group")
    /// `unknown-group`, 404: no group has this name.
    public static let unknownGroup = ErrorCode("unknown-group")

    /// The codes only the admin console's pages use (HTML for browsers, not protocol v1).
    public static let console: [ErrorCode] = [.changedSinceDrawn, .crossOrigin, .csrf, .noSession, .notConfirmed]

    /// `admin-only`, 403: a device token on an admin route.
    public static let adminOnly = ErrorCode("admin-only")
    /// `app-mismatch`, 400: a metadata document for another app than its path names.
    public static let appMismatch = ErrorCode("app-mismatch")
    /// `bad-key-path`, 400: a key path that is malformed or does not fit the value.
    public static let badKeyPath = ErrorCode("bad-key-path")
    /// `bad-parameter`, 400: a query or path parameter the route cannot take.
    public static let badParameter = ErrorCode("bad-parameter")
    /// `bad-precondition`, 400: an `If-Match` that is not one strong revision tag.
    public static let badPrecondition = ErrorCode("bad-precondition")
    /// `bad-status-header`, 400: a settings request's `Fleetset-Status` that cannot be read
    /// (too long, not base64url, not JSON, not a status report; the message says which). An
    /// agent sends that report with `POST …/status` instead.
    public static let badStatusHeader = ErrorCode("bad-status-header")
    /// `bad-request`, 400: a body that is not what the route takes (the message names the member).
    public static let badRequest = ErrorCode("bad-request")
    /// `changed-since-drawn`, 409: the console form was drawn from values that changed since.
    public static let changedSinceDrawn = ErrorCode("changed-since-drawn")
    /// `concurrent-write`, 409: other writes kept changing what this one was checked against.
    public static let concurrentWrite = ErrorCode("concurrent-write")
    /// `cross-origin`, 403: a console form posted from another origin.
    public static let crossOrigin = ErrorCode("cross-origin")
    /// `csrf`, 403: a console form without the session's CSRF token.
    public static let csrf = ErrorCode("csrf")
    /// `device-disabled`, 401: the device is disabled.
    public static let deviceDisabled = ErrorCode("device-disabled")
    /// `device-only`, 403: the admin token on a device route.
    public static let deviceOnly = ErrorCode("device-only")
    /// `if-match-required`, 428: a device write without `If-Match`.
    public static let ifMatchRequired = ErrorCode("if-match-required")
    /// `internal`, 500: the server failed; its log says why.
    public static let internalError = ErrorCode("internal")
    /// `invalid-enrollment-token`, 401: the enrollment token is unknown, expired or used up.
    public static let invalidEnrollmentToken = ErrorCode("invalid-enrollment-token")
    /// `invalid-metadata`, 422: a metadata document with problems (each in `details`).
    public static let invalidMetadata = ErrorCode("invalid-metadata")
    /// `invalid-values`, 422: the change makes settings invalid (each problem in `details`).
    public static let invalidValues = ErrorCode("invalid-values")
    /// `method-not-allowed`, 405: a known path with another method (`Allow` lists them).
    public static let methodNotAllowed = ErrorCode("method-not-allowed")
    /// `no-rollout`, 404: the app has no (active) rollout.
    public static let noRollout = ErrorCode("no-rollout")
    /// `no-session`, 403: a console request without a valid session.
    public static let noSession = ErrorCode("no-session")
    /// `not-confirmed`, 400: a console action that needs its confirmation box ticked.
    public static let notConfirmed = ErrorCode("not-confirmed")
    /// `not-found`, 404: no such route.
    public static let notFound = ErrorCode("not-found")
    /// `not-writable`, 403: a device write of a setting that is not `x-writable`.
    public static let notWritable = ErrorCode("not-writable")
    /// `nothing-to-revert`, 409: a revert that would change nothing.
    public static let nothingToRevert = ErrorCode("nothing-to-revert")
    /// `overloaded`, 503: the server holds as many long-polls as it may.
    public static let overloaded = ErrorCode("overloaded")
    /// `rate-limited`, 429: more requests than the server allows; `Retry-After` says when to go on.
    public static let rateLimited = ErrorCode("rate-limited")
    /// `rollout-in-progress`, 409: a write of settings an active rollout stages.
    public static let rolloutInProgress = ErrorCode("rollout-in-progress")
    /// `rollout-not-paused`, 409: resuming a rollout that is not paused.
    public static let rolloutNotPaused = ErrorCode("rollout-not-paused")
    /// `shutting-down`, 503: the server is shutting down.
    public static let shuttingDown = ErrorCode("shutting-down")
    /// `stale-revision`, 409: a device write based on a revision that is no longer current.
    public static let staleRevision = ErrorCode("stale-revision")
    /// `too-large`, 413: a body over the route's limit.
    public static let tooLarge = ErrorCode("too-large")
    /// `too-many-facts`, 413: the device's facts would pass their caps.
    public static let tooManyFacts = ErrorCode("too-many-facts")
    /// `unauthenticated`, 401: no token, or one the server does not know.
    public static let unauthenticated = ErrorCode("unauthenticated")
    /// `unknown-app`, 404: no metadata is stored for the app.
    public static let unknownApp = ErrorCode("unknown-app")
    /// `unknown-device`, 404: no such device is enrolled.
    public static let unknownDevice = ErrorCode("unknown-device")
    /// `unknown-enrollment-token`, 404: no such enrollment token.
    public static let unknownEnrollmentToken = ErrorCode("unknown-enrollment-token")
    /// `unknown-key`, 404: nothing is at the key path.
    public static let unknownKey = ErrorCode("unknown-key")
    /// `unsupported-media-type`, 415: a body of another media type than the route takes.
    public static let unsupportedMediaType = ErrorCode("unsupported-media-type")
    /// `unsupported-metadata`, 422: metadata using schema features fleetset does not support.
    public static let unsupportedMetadata = ErrorCode("unsupported-metadata")
    /// `values-invalid`, 409: a metadata upload that would make stored values invalid (each in `details`).
    public static let valuesInvalid = ErrorCode("values-invalid")
    /// `version-not-increased`, 409: a metadata upload whose version is not greater than the stored one.
    public static let versionNotIncreased = ErrorCode("version-not-increased")
}
