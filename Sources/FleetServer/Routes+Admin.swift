import FleetJSON
import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle

extension Routes {
    /// The routes accounts call, each by its operation in the permission table (``AdminOperation``):
    /// the ``Authentication`` middleware checks the operation's right and what the request
    /// names against the caller's role and scope before the route runs.
    func defineAdminRoutes(_ on: (AdminOperation, @escaping Handler) -> Void) {
        on(.listAllDevices) { request, context in
            let filters = try request.uri.queryParameters.getAll("where").map { text throws(ServiceError) in
                do {
                    return try DeviceInfoFilter(parsing: String(text))
                } catch {
                    throw ServiceError(400, .badParameter, "where: \(error)")
                }
            }
            return json(.ok, try await service.directory.allDevices(matching: filters, visibleTo: try context.account()).json)
        }

        on(.listGroups) { _, context in
            return json(.ok, try await service.directory.groups(visibleTo: try context.account()).json)
        }

        on(.getGroup) { _, context in
            let name = PercentEncoding.decoded(context.parameters.get("name") ?? "") ?? ""
            return json(.ok, try await service.directory.group(name: name, visibleTo: try context.account()).json)
        }

        on(.defineGroup) { request, context in
            let name = PercentEncoding.decoded(context.parameters.get("name") ?? "") ?? ""
            let body = try await jsonBody(request, limit: Self.bodyLimit)
            context.auditNote?.add(["group": name])
            return json(.ok, try await service.directory.defineGroup(name: name, body: body).json)
        }

        on(.removeGroupDefinition) { _, context in
            let name = PercentEncoding.decoded(context.parameters.get("name") ?? "") ?? ""
            context.auditNote?.add(["group": name])
            try await service.directory.removeGroupDefinition(name: name)
            return Response(status: .noContent)
        }

        on(.getDevicePolicyAsAdmin) { request, context in
            return json(.ok, try await service.directory.devicePolicy(id: context.parameters.get("id") ?? "").json)
        }

        on(.listPolicies) { request, context in
            return json(.ok, try await service.directory.policyList(visibleTo: try context.account()).json)
        }

        on(.patchPolicy) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            guard let scope = PolicyScope(PercentEncoding.decoded(context.parameters.get("scope") ?? "") ?? "") else {
                throw ServiceError(400, .badParameter, "a policy scope is app:APP, group:NAME or device:ID")
            }
            let patch = try ServiceError.object(body, what: "the policy patch")
            context.auditNote?.add(["keys": patch.keys.sorted().joined(separator: ",")])
            return json(.ok, try await service.directory.patchPolicy(scope: scope, patch: patch).json)
        }

        on(.getDevice) { request, context in
            return json(.ok, try await service.directory.device(id: context.parameters.get("id") ?? "").json)
        }

        on(.updateDevice) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let update = try ServiceError.decode(body, as: DeviceUpdate.init(json:))
            context.auditNote?.add(Self.deviceChange(update))
            // Disabling, enabling and token rotations are an operator's; apps and groups are not.
            if update.apps != nil || update.groups != nil { try context.account().require(.manageDevices) }
            return json(.ok, try await service.directory.updateDevice(id: context.parameters.get("id") ?? "", update).json)
        }

        on(.deleteDevice) { request, context in
            try await service.directory.deleteDevice(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }

        on(.putMetadata) { request, context in
            let app = try app(context)
            let force = try booleanParameter(request, "force")
            try requireMediaType(request, "application/json")
            let bytes = try await bodyBytes(request, limit: Self.metadataLimit)
            let message = try messageParameter(request)
            return json(
                .ok,
                try await service.admin.putMetadata(
                    app: app, document: bytes, force: force, actor: try context.account().name, message: message
                ).json)
        }

        on(.getAdminMetadata) { request, context in
            return try await metadataResponse(request, app: try app(context))
        }

        on(.getValues) { request, context in
            let app = try app(context)
            let values = try await service.admin.values(app: app, scope: Scope.named(request.uri.queryParameters.get("scope")))
            return json(.ok, values.json)
        }

        on(.patchValues) { request, context in
            let app = try app(context)
            let scope = try Scope.named(request.uri.queryParameters.get("scope"))
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of settings")
            let message = try messageParameter(request)
            let force = try booleanParameter(request, "force")
            return json(
                .ok,
                try await service.admin.patchValues(
                    app: app, scope: scope, patch: patch, actor: try context.account().name, message: message, force: force
                ).json)
        }

        // One value inside a setting at a scope, by key path: set (PUT, the value as the body)
        // or removed (DELETE); the service makes it a merge patch of the whole setting.
        for operation in [AdminOperation.setValueAtKeyPath, .removeValueAtKeyPath] {
            on(operation) { request, context in
                let app = try app(context)
                // (Not a ternary: its `nil` would become JSON's null, which JSONValue takes as a literal.)
                var value: JSONValue?
                if operation == .setValueAtKeyPath { value = try await jsonBody(request, limit: Self.bodyLimit) }
                let scope = try Scope.named(request.uri.queryParameters.get("scope"))
                let values = try await service.admin.setValue(
                    app: app, scope: scope, keyPath: try keyPath(context).keyPath, to: value,
                    actor: try context.account().name, message: try messageParameter(request), force: try booleanParameter(request, "force")
                )
                return json(.ok, values.json)
            }
        }

        on(.getHistory) { request, context in
            let limit = try request.uri.queryParameters.get("limit").map { text throws(ServiceError) in
                guard let limit = Int(text) else { throw ServiceError(400, .badParameter, "limit must be a positive number of entries") }
                return limit
            }
            let before = try request.uri.queryParameters.get("before").map { text throws(ServiceError) in
                guard let before = Int64(text) else {
                    throw ServiceError(400, .badParameter, "before must be a history entry's number (the oldest one shown)")
                }
                return before
            }
            let scope = try request.uri.queryParameters.get("scope").map { text throws(ServiceError) in try Scope.named(String(text)) }
            let history = try await service.admin.history(
                app: try app(context), scope: scope, before: before, limit: limit, visibleTo: try context.account())
            return json(.ok, history.json)
        }

        on(.revert) { request, context in
            let revert = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RevertRequest.init(json:))
            context.auditNote?.add(["to": "\(revert.to)", "reverted": revert.scope ?? "every-scope"])
            context.auditNote?.reason(revert.message)
            return json(.created, try await service.admin.revert(app: try app(context), revert, actor: try context.account().name).json)
        }

        on(.listApps) { _, context in
            return json(.ok, try await service.admin.apps(visibleTo: try context.account()).json)
        }

        on(.getScopes) { _, context in
            return json(.ok, try await service.admin.scopes(app: try app(context), visibleTo: try context.account()).json)
        }

        // Several scopes' whole values as one change (`fleetset admin apply`); each scope is
        // authorized as a write of values at it is, a rollout as starting one.
        on(.applyValues) { request, context in
            let app = try app(context)
            let apply = try ServiceError.decode(try await jsonBody(request, limit: Self.metadataLimit), as: ApplyRequest.init(json:))
            let dryRun = try booleanParameter(request, "dryRun")
            let caller = try context.account()
            for part in apply.scopes {
                try await service.accounts.authorize(caller, .patchValues, OperationTarget(app: app, scope: try Scope.named(part.scope)))
            }
            if apply.rollout != nil { try await service.accounts.authorize(caller, .startRollout, OperationTarget(app: app)) }
            context.auditNote?.add(["scopes": apply.scopes.map(\.scope).joined(separator: ","), "dry-run": "\(dryRun)"])
            context.auditNote?.reason(apply.message)
            return json(.ok, try await service.admin.apply(app: app, apply, actor: caller.name, dryRun: dryRun).json)
        }

        on(.startRollout) { request, context in
            let rollout = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RolloutRequest.init(json:))
            context.auditNote?.add([
                "staged": rollout.scope, "keys": rollout.patch.keys.sorted().joined(separator: ","), "waves": "\(rollout.waves.count)",
            ])
            context.auditNote?.reason(rollout.message)
            return json(
                .created, try await service.rollouts.startRollout(app: try app(context), rollout, actor: try context.account().name).json)
        }

        on(.getRollout) { request, context in
            return json(.ok, try await service.rollouts.rolloutStatus(app: try app(context)).json)
        }

        on(.resumeRollout) { request, context in
            return json(.ok, try await service.rollouts.resumeRollout(app: try app(context), actor: try context.account().name).json)
        }

        on(.abortRollout) { request, context in
            return json(.ok, try await service.rollouts.abortRollout(app: try app(context), actor: try context.account().name).json)
        }

        on(.listDevices) { request, context in
            // A status's detail only when asked for: CLIs of 0.7.0 read each status strictly.
            let withDetails = try booleanParameter(request, "detail")
            return json(
                .ok, try await service.admin.devices(app: try app(context), visibleTo: try context.account(), withDetails: withDetails).json
            )
        }

        on(.explainDevice) { request, context in
            let id = context.parameters.get("id") ?? ""
            return json(.ok, try await service.admin.explain(app: try app(context), deviceID: id).json)
        }

        on(.createEnrollmentToken) { request, context in
            let token = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: EnrollmentTokenRequest.init(json:))
            context.auditNote?.add(["apps": token.apps.joined(separator: ","), "groups": token.groups.joined(separator: ",")])
            return json(.created, try await service.directory.makeEnrollmentToken(token).json)
        }

        on(.listEnrollmentTokens) { request, context in
            return json(.ok, try await service.directory.enrollmentTokens().json)
        }

        on(.revokeEnrollmentToken) { request, context in
            try await service.directory.revokeEnrollmentToken(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }

        defineAccountRoutes(on)
        defineWebhookRoutes(on)
    }

    /// Accounts, API tokens, the caller itself and the audit trail.
    func defineAccountRoutes(_ on: (AdminOperation, @escaping Handler) -> Void) {
        on(.getCaller) { _, context in
            return json(.ok, service.accounts.describe(try context.account()).json)
        }

        on(.listAccounts) { _, _ in
            return json(.ok, try await service.accounts.accounts().json)
        }

        on(.createAccount) { request, context in
            let account = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: AccountRequest.init(json:))
            context.auditNote?.add(Self.accountChange(account))
            return json(.created, try await service.accounts.createAccount(account).json)
        }

        on(.getAccount) { _, context in
            return json(.ok, try await service.accounts.account(name: context.parameters.get("name") ?? "").json)
        }

        on(.updateAccount) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let change = try ServiceError.decode(body, as: AccountRequest.init(json:))
            context.auditNote?.add(Self.accountChange(change))
            return json(.ok, try await service.accounts.updateAccount(name: context.parameters.get("name") ?? "", change).json)
        }

        on(.deleteAccount) { _, context in
            try await service.accounts.removeAccount(name: context.parameters.get("name") ?? "")
            return Response(status: .noContent)
        }

        on(.setPassword) { request, context in
            let change = try ServiceError.decode(try await jsonBody(request, limit: Self.signInLimit), as: PasswordChange.init(json:))
            try await service.accounts.setPassword(name: context.parameters.get("name") ?? "", to: change.password)
            return Response(status: .noContent)
        }

        on(.resetTwoFactor) { _, context in
            try await service.accounts.resetTwoFactor(name: context.parameters.get("name") ?? "")
            return Response(status: .noContent)
        }

        on(.changeOwnPassword) { request, context in
            let change = try ServiceError.decode(try await jsonBody(request, limit: Self.signInLimit), as: PasswordChange.init(json:))
            try await service.accounts.changeOwnPassword(change, by: try context.account())
            return Response(status: .noContent)
        }

        on(.startTwoFactor) { _, context in
            var response = json(.created, try await service.accounts.startTwoFactor(by: try context.account()).json)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        on(.confirmTwoFactor) { request, context in
            let code = try ServiceError.decode(try await jsonBody(request, limit: Self.signInLimit), as: TwoFactorCode.init(json:))
            var response = json(.ok, try await service.accounts.confirmTwoFactor(code: code.code, by: try context.account()).json)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        on(.listAPITokens) { request, context in
            let account = try limitedParameter(request, "account", length: 64)
            return json(.ok, try await service.accounts.tokens(account: account, by: try context.account()).json)
        }

        on(.createAPIToken) { request, context in
            let token = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: APITokenRequest.init(json:))
            let caller = try context.account()
            context.auditNote?.add(["for": token.account ?? caller.name, "token-name": token.name, "expires-in": "\(token.expiresIn)s"])
            var response = json(.created, try await service.accounts.createToken(token, by: caller).json)
            response.headers[.cacheControl] = "no-store"
            return response
        }

        on(.revokeAPIToken) { _, context in
            return json(
                .ok, try await service.accounts.revokeToken(id: context.parameters.get("tokenId") ?? "", by: try context.account()).json)
        }

        on(.listAudit) { request, _ in
            let parameters = request.uri.queryParameters
            let since = try parameters.get("since").map { text throws(ServiceError) in
                guard let time = Timestamp.parse(String(text)) else {
                    throw ServiceError(400, .badParameter, "since must be an RFC 3339 UTC time like 2026-11-22T10:00:00Z")
                }
                return time
            }
            let number = { (name: String, text: String?) throws(ServiceError) -> Int64? in
                guard let text else { return nil }
                guard let value = Int64(text), value >= 0 else { throw ServiceError(400, .badParameter, "\(name) must be a whole number") }
                return value
            }
            let limit = try number("limit", parameters.get("limit")) ?? 1000
            guard (1...1000).contains(limit) else { throw ServiceError(400, .badParameter, "limit must be from 1 to 1000") }
            let query = AuditQuery(
                after: try number("after", parameters.get("after")) ?? 0, since: since,
                actor: try limitedParameter(request, "who", length: 64),
                action: try limitedParameter(request, "action", length: 128), limit: Int(limit))
            return json(.ok, try await service.audit.entries(query).json)
        }
    }

    /// The query parameter `name`, at most `length` characters.
    func limitedParameter(_ request: Request, _ name: String, length: Int) throws(ServiceError) -> String? {
        guard let value = request.uri.queryParameters.get(name) else { return nil }
        guard value.unicodeScalars.count <= length else {
            throw ServiceError(400, .badParameter, "\(name) must be at most \(length) characters")
        }
        return value
    }

    /// What an account request sets, for its audit entry.
    static func accountChange(_ request: AccountRequest) -> KeyValuePairs<String, String> {
        [
            "account": request.name ?? "-", "role": request.role?.rawValue ?? "-",
            "scope": request.scope.map { $0.summary.replacing(" ", with: "_") } ?? "-",
            "disabled": request.disabled.map { "\($0)" } ?? "-",
        ]
    }

    /// What a device update changes, for its audit entry.
    static func deviceChange(_ update: DeviceUpdate) -> KeyValuePairs<String, String> {
        [
            "apps": update.apps?.joined(separator: ",") ?? "-", "groups": update.groups?.joined(separator: ",") ?? "-",
            "disabled": update.disabled.map { "\($0)" } ?? "-", "rotate-token": update.rotateToken.map { "\($0)" } ?? "-",
        ]
    }
}
