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
    /// The routes the admin calls with the admin token.
    func defineAdminRoutes(_ on: (HTTPRequest.Method, String, Access, @escaping Handler) -> Void) {
        on(.get, "v1/admin/devices", .admin) { request, context in
            let filters = try request.uri.queryParameters.getAll("where").map { text throws(ServiceError) in
                guard let filter = DeviceInfoFilter(String(text)) else {
                    throw ServiceError(400, .badParameter, "where must be FACT=VALUE or FACT!=VALUE, e.g. os.version=12")
                }
                return filter
            }
            return json(.ok, try await service.directory.allDevices(matching: filters).json)
        }

        on(.get, "v1/admin/devices/:id/policy", .admin) { request, context in
            return json(.ok, try await service.directory.devicePolicy(id: context.parameters.get("id") ?? "").json)
        }

        on(.get, "v1/admin/policies", .admin) { request, context in
            return json(.ok, try await service.directory.policyList().json)
        }

        on(.patch, "v1/admin/policies/:scope", .admin) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            guard let scope = PolicyScope(PercentEncoding.decoded(context.parameters.get("scope") ?? "") ?? "") else {
                throw ServiceError(400, .badParameter, "a policy scope is app:APP, group:NAME or device:ID")
            }
            let patch = try ServiceError.object(body, what: "the policy patch")
            return json(.ok, try await service.directory.patchPolicy(scope: scope, patch: patch).json)
        }

        on(.get, "v1/admin/devices/:id", .admin) { request, context in
            return json(.ok, try await service.directory.device(id: context.parameters.get("id") ?? "").json)
        }

        on(.patch, "v1/admin/devices/:id", .admin) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let update = try ServiceError.decode(body, as: DeviceUpdate.init(json:))
            return json(.ok, try await service.directory.updateDevice(id: context.parameters.get("id") ?? "", update).json)
        }

        on(.delete, "v1/admin/devices/:id", .admin) { request, context in
            try await service.directory.deleteDevice(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }

        on(.put, "v1/admin/apps/:app/metadata", .admin) { request, context in
            let app = try app(context)
            let force = try booleanParameter(request, "force")
            try requireMediaType(request, "application/json")
            let bytes = try await bodyBytes(request, limit: Self.metadataLimit)
            let message = try messageParameter(request)
            return json(
                .ok,
                try await service.admin.putMetadata(
                    app: app, document: bytes, force: force, actor: service.auth.adminActor, message: message
                ).json)
        }

        on(.get, "v1/admin/apps/:app/metadata", .admin) { request, context in
            return try await metadataResponse(request, app: try app(context))
        }

        on(.get, "v1/admin/apps/:app/values", .admin) { request, context in
            let app = try app(context)
            let values = try await service.admin.values(app: app, scope: Scope.named(request.uri.queryParameters.get("scope")))
            return json(.ok, values.json)
        }

        on(.patch, "v1/admin/apps/:app/values", .admin) { request, context in
            let app = try app(context)
            let scope = try Scope.named(request.uri.queryParameters.get("scope"))
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of settings")
            let message = try messageParameter(request)
            let force = try booleanParameter(request, "force")
            return json(
                .ok,
                try await service.admin.patchValues(
                    app: app, scope: scope, patch: patch, actor: service.auth.adminActor, message: message, force: force
                ).json)
        }

        // One value inside a setting at a scope, by key path: set (PUT, the value as the body)
        // or removed (DELETE); the service makes it a merge patch of the whole setting.
        for method in [HTTPRequest.Method.put, .delete] {
            on(method, "v1/admin/apps/:app/values/**", .admin) { request, context in
                let app = try app(context)
                // (Not a ternary: its `nil` would become JSON's null, which JSONValue takes as a literal.)
                var value: JSONValue?
                if method == .put { value = try await jsonBody(request, limit: Self.bodyLimit) }
                let scope = try Scope.named(request.uri.queryParameters.get("scope"))
                let values = try await service.admin.setValue(
                    app: app, scope: scope, keyPath: try keyPath(context).keyPath, to: value,
                    actor: service.auth.adminActor, message: try messageParameter(request), force: try booleanParameter(request, "force"))
                return json(.ok, values.json)
            }
        }

        on(.get, "v1/admin/apps/:app/history", .admin) { request, context in
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
            let history = try await service.admin.history(app: try app(context), scope: scope, before: before, limit: limit)
            return json(.ok, history.json)
        }

        on(.post, "v1/admin/apps/:app/revert", .admin) { request, context in
            let revert = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RevertRequest.init(json:))
            return json(.created, try await service.admin.revert(app: try app(context), revert, actor: service.auth.adminActor).json)
        }

        on(.post, "v1/admin/apps/:app/rollouts", .admin) { request, context in
            let rollout = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: RolloutRequest.init(json:))
            return json(
                .created, try await service.rollouts.startRollout(app: try app(context), rollout, actor: service.auth.adminActor).json)
        }

        on(.get, "v1/admin/apps/:app/rollout", .admin) { request, context in
            return json(.ok, try await service.rollouts.rolloutStatus(app: try app(context)).json)
        }

        on(.post, "v1/admin/apps/:app/rollout/resume", .admin) { request, context in
            return json(.ok, try await service.rollouts.resumeRollout(app: try app(context), actor: service.auth.adminActor).json)
        }

        on(.post, "v1/admin/apps/:app/rollout/abort", .admin) { request, context in
            return json(.ok, try await service.rollouts.abortRollout(app: try app(context), actor: service.auth.adminActor).json)
        }

        on(.get, "v1/admin/apps/:app/devices", .admin) { request, context in
            return json(.ok, try await service.admin.devices(app: try app(context)).json)
        }

        on(.get, "v1/admin/apps/:app/devices/:id/explain", .admin) { request, context in
            let id = context.parameters.get("id") ?? ""
            return json(.ok, try await service.admin.explain(app: try app(context), deviceID: id).json)
        }

        on(.post, "v1/admin/enrollment-tokens", .admin) { request, context in
            let token = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: EnrollmentTokenRequest.init(json:))
            return json(.created, try await service.directory.makeEnrollmentToken(token).json)
        }

        on(.get, "v1/admin/enrollment-tokens", .admin) { request, context in
            return json(.ok, try await service.directory.enrollmentTokens().json)
        }

        on(.delete, "v1/admin/enrollment-tokens/:id", .admin) { request, context in
            try await service.directory.revokeEnrollmentToken(id: context.parameters.get("id") ?? "")
            return Response(status: .noContent)
        }
    }
}
