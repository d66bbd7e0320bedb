import FleetProtocol
import HTTPTypes

/// Every operation of the admin API with the one right it needs: the permission table. The
/// HTTP layer defines each admin route by its operation (so a route without a rule cannot be
/// written), ``AccessControl`` checks the right and what the request names against the
/// caller's role and scope before the route runs, and the tests walk every operation × every
/// role × in and out of scope from this table and from the OpenAPI document (whose operations
/// carry `x-fleetset-right` and `x-fleetset-roles`).
///
/// Cases are named by the OpenAPI document's `operationId`.
public enum AdminOperation: String, Sendable, Hashable, CaseIterable {
    case getMetrics
    case getCaller
    case putMetadata, getAdminMetadata
    case getValues, patchValues, setValueAtKeyPath, removeValueAtKeyPath
    case getHistory, revert, applyValues, listApps, getScopes
    case startRollout, getRollout, resumeRollout, abortRollout
    case listDevices, explainDevice
    case createEnrollmentToken, listEnrollmentTokens, revokeEnrollmentToken
    case listAllDevices, getDevice, updateDevice, deleteDevice, getDevicePolicyAsAdmin
    case listGroups, getGroup, defineGroup, removeGroupDefinition
    case listPolicies, patchPolicy
    case listAccounts, createAccount, getAccount, updateAccount, deleteAccount, setPassword, resetTwoFactor
    case changeOwnPassword, startTwoFactor, confirmTwoFactor
    case listAPITokens, createAPIToken, revokeAPIToken
    case listAudit
    case listWebhooks, createWebhook, getWebhook, deleteWebhook, rotateWebhookSecret, redeliverWebhook, pingWebhook

    /// The HTTP method and the route's path pattern (`:app`, `:id`, `:name`, `:scope`, `:tokenId`; `**`
    /// for a key path).
    public var route: (method: HTTPRequest.Method, path: String) {
        switch self {
        case .getMetrics: (.get, "metrics")
        case .getCaller: (.get, "v1/admin/whoami")
        case .putMetadata: (.put, "v1/admin/apps/:app/metadata")
        case .getAdminMetadata: (.get, "v1/admin/apps/:app/metadata")
        case .getValues: (.get, "v1/admin/apps/:app/values")
        case .patchValues: (.patch, "v1/admin/apps/:app/values")
        case .setValueAtKeyPath: (.put, "v1/admin/apps/:app/values/**")
        case .removeValueAtKeyPath: (.delete, "v1/admin/apps/:app/values/**")
        case .getHistory: (.get, "v1/admin/apps/:app/history")
        case .revert: (.post, "v1/admin/apps/:app/revert")
        case .applyValues: (.post, "v1/admin/apps/:app/apply")
        case .listApps: (.get, "v1/admin/apps")
        case .getScopes: (.get, "v1/admin/apps/:app/scopes")
        case .startRollout: (.post, "v1/admin/apps/:app/rollouts")
        case .getRollout: (.get, "v1/admin/apps/:app/rollout")
        case .resumeRollout: (.post, "v1/admin/apps/:app/rollout/resume")
        case .abortRollout: (.post, "v1/admin/apps/:app/rollout/abort")
        case .listDevices: (.get, "v1/admin/apps/:app/devices")
        case .explainDevice: (.get, "v1/admin/apps/:app/devices/:id/explain")
        case .createEnrollmentToken: (.post, "v1/admin/enrollment-tokens")
        case .listEnrollmentTokens: (.get, "v1/admin/enrollment-tokens")
        case .revokeEnrollmentToken: (.delete, "v1/admin/enrollment-tokens/:id")
        case .listAllDevices: (.get, "v1/admin/devices")
        case .getDevice: (.get, "v1/admin/devices/:id")
        case .updateDevice: (.patch, "v1/admin/devices/:id")
        case .deleteDevice: (.delete, "v1/admin/devices/:id")
        case .getDevicePolicyAsAdmin: (.get, "v1/admin/devices/:id/policy")
        case .listGroups: (.get, "v1/admin/groups")
        case .getGroup: (.get, "v1/admin/groups/:name")
        case .defineGroup: (.put, "v1/admin/groups/:name")
        case .removeGroupDefinition: (.delete, "v1/admin/groups/:name")
        case .listPolicies: (.get, "v1/admin/policies")
        case .patchPolicy: (.patch, "v1/admin/policies/:scope")
        case .listAccounts: (.get, "v1/admin/accounts")
        case .createAccount: (.post, "v1/admin/accounts")
        case .getAccount: (.get, "v1/admin/accounts/:name")
        case .updateAccount: (.patch, "v1/admin/accounts/:name")
        case .deleteAccount: (.delete, "v1/admin/accounts/:name")
        case .setPassword: (.put, "v1/admin/accounts/:name/password")
        case .resetTwoFactor: (.delete, "v1/admin/accounts/:name/two-factor")
        case .changeOwnPassword: (.put, "v1/admin/whoami/password")
        case .startTwoFactor: (.post, "v1/admin/whoami/two-factor")
        case .confirmTwoFactor: (.post, "v1/admin/whoami/two-factor/confirm")
        case .listAPITokens: (.get, "v1/admin/tokens")
        case .createAPIToken: (.post, "v1/admin/tokens")
        case .revokeAPIToken: (.delete, "v1/admin/tokens/:tokenId")
        case .listAudit: (.get, "v1/admin/audit")
        case .listWebhooks: (.get, "v1/admin/webhooks")
        case .createWebhook: (.post, "v1/admin/webhooks")
        case .getWebhook: (.get, "v1/admin/webhooks/:webhookId")
        case .deleteWebhook: (.delete, "v1/admin/webhooks/:webhookId")
        case .rotateWebhookSecret: (.post, "v1/admin/webhooks/:webhookId/rotate-secret")
        case .redeliverWebhook: (.post, "v1/admin/webhooks/:webhookId/redeliver")
        case .pingWebhook: (.post, "v1/admin/webhooks/:webhookId/ping")
        }
    }

    /// The right the operation needs; `nil` for what any account may do to itself: ``getCaller``,
    /// ``changeOwnPassword``, ``startTwoFactor``, ``confirmTwoFactor``.
    ///
    /// Some operations need more than this for some requests, checked by their service:
    /// ``updateDevice`` needs ``AdminRight/manageDevices`` to change apps or groups, and the
    /// token operations need ``AdminRight/manageAccounts`` for another account's tokens.
    public var right: AdminRight? {
        switch self {
        case .getCaller, .changeOwnPassword, .startTwoFactor, .confirmTwoFactor: nil
        case .getMetrics: .readMetrics
        case .getAdminMetadata, .getValues, .getRollout, .listDevices, .explainDevice, .listAllDevices, .getDevice,
            .getDevicePolicyAsAdmin, .listPolicies, .listGroups, .getGroup, .listApps, .getScopes:
            .read
        case .getHistory: .readHistory
        case .listAudit: .readAudit
        case .putMetadata: .writeMetadata
        case .patchValues, .setValueAtKeyPath, .removeValueAtKeyPath, .revert, .applyValues: .writeValues
        case .startRollout: .startRollouts
        case .resumeRollout, .abortRollout: .steerRollouts
        case .updateDevice: .operateDevices
        case .deleteDevice, .defineGroup, .removeGroupDefinition: .manageDevices
        case .createEnrollmentToken, .listEnrollmentTokens, .revokeEnrollmentToken: .manageEnrollment
        case .patchPolicy: .writePolicies
        case .listAccounts, .createAccount, .getAccount, .updateAccount, .deleteAccount, .setPassword, .resetTwoFactor: .manageAccounts
        case .listAPITokens, .createAPIToken, .revokeAPIToken: .ownTokens
        case .listWebhooks, .createWebhook, .getWebhook, .deleteWebhook, .rotateWebhookSecret, .redeliverWebhook, .pingWebhook:
            .manageWebhooks
        }
    }

    /// The roles that have the operation's right (every role for ``getCaller``).
    public var roles: [Role] { Role.allCases.filter { role in right.map { role.rights.contains($0) } ?? true } }

    /// Whether the operation changes something (every method but GET): these are written to
    /// the audit trail whatever their outcome; reads only when refused.
    public var isWrite: Bool { route.method != .get }

    /// Whether the operation reaches every device of its app (metadata, rollouts and their
    /// status, which lists every admitted device, reverts): an account limited to groups may not do it.
    public var reachesWholeApp: Bool {
        switch self {
        case .putMetadata, .startRollout, .getRollout, .resumeRollout, .abortRollout, .revert: true
        default: false
        }
    }
}
