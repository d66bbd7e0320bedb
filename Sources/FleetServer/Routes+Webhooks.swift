import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird

extension Routes {
    /// `/v1/admin/webhooks`: subscriptions, their messages, redelivery and secret rotation
    /// (the right manage-webhooks). A secret is in an answer once, never in a log or an audit entry.
    func defineWebhookRoutes(_ on: (AdminOperation, @escaping Handler) -> Void) {
        on(.listWebhooks) { _, _ in json(.ok, try await service.webhooks.list().json) }

        on(.createWebhook) { request, context in
            let subscription = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit), as: WebhookRequest.init(json:))
            context.auditNote?.add(["events": subscription.events.joined(separator: ","), "apps": subscription.apps.joined(separator: ",")])
            return Self.secretAnswer(.created, try await service.webhooks.create(subscription, actor: try context.account().name))
        }

        on(.getWebhook) { _, context in json(.ok, try await service.webhooks.show(id: Self.webhookID(context)).json) }

        on(.deleteWebhook) { _, context in
            try await service.webhooks.remove(id: Self.webhookID(context), actor: try context.account().name)
            return Response(status: .noContent)
        }

        on(.rotateWebhookSecret) { _, context in
            Self.secretAnswer(.ok, try await service.webhooks.rotateSecret(id: Self.webhookID(context), actor: try context.account().name))
        }

        on(.redeliverWebhook) { request, context in
            let body = try await jsonBody(request, limit: Self.bodyLimit)
            let redelivery = try ServiceError.decode(body, as: RedeliverRequest.init(json:))
            context.auditNote?.add(["message": redelivery.message ?? "every dead one"])
            return json(
                .ok, try await service.webhooks.redeliver(id: Self.webhookID(context), redelivery, actor: try context.account().name).json)
        }

        on(.pingWebhook) { _, context in
            json(.accepted, try await service.webhooks.ping(id: Self.webhookID(context), actor: try context.account().name).json)
        }
    }

    private static func webhookID(_ context: FleetRequestContext) -> String { context.parameters.get("webhookId") ?? "" }

    /// An answer holding a secret: never cached.
    private static func secretAnswer(_ status: HTTPResponse.Status, _ created: CreatedWebhook) -> Response {
        var response = json(status, created.json)
        response.headers[.cacheControl] = "no-store"
        return response
    }
}
