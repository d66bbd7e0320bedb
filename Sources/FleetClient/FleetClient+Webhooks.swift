import Curl
import FleetJSON
import FleetProtocol

/// The webhook routes (`/v1/admin/webhooks`, the right manage-webhooks).
extension FleetClient {
    /// Every subscription, oldest first.
    public func webhooks() async throws -> WebhookList {
        try decode(try await send(.get, "/v1/admin/webhooks", expect: [200]), WebhookList.init(json:))
    }

    /// A new subscription: the answer holds its secret, once.
    public func createWebhook(_ request: WebhookRequest) async throws -> CreatedWebhook {
        try decode(try await send(.post, "/v1/admin/webhooks", json: request.json, expect: [201]), CreatedWebhook.init(json:))
    }

    /// A subscription and its latest messages.
    public func webhook(id: String) async throws -> WebhookDetail {
        try decode(try await send(.get, "/v1/admin/webhooks/\(Self.percentEncoded(id))", expect: [200]), WebhookDetail.init(json:))
    }

    /// A new secret for the subscription, shown once; the old one signs too for a day.
    public func rotateWebhookSecret(id: String) async throws -> CreatedWebhook {
        try decode(
            try await send(.post, "/v1/admin/webhooks/\(Self.percentEncoded(id))/rotate-secret", expect: [200]), CreatedWebhook.init(json:))
    }

    /// Sends one message again (`message`), or every dead one.
    public func redeliverWebhook(id: String, message: String?) async throws -> RedeliveryResult {
        try decode(
            try await send(
                .post, "/v1/admin/webhooks/\(Self.percentEncoded(id))/redeliver", json: RedeliverRequest(message: message).json,
                expect: [200]),
            RedeliveryResult.init(json:))
    }

    /// Sends the subscription a `webhook.ping` message.
    public func pingWebhook(id: String) async throws -> RedeliveryResult {
        try decode(try await send(.post, "/v1/admin/webhooks/\(Self.percentEncoded(id))/ping", expect: [202]), RedeliveryResult.init(json:))
    }

    /// Removes the subscription and its messages.
    public func deleteWebhook(id: String) async throws {
        _ = try await send(.delete, "/v1/admin/webhooks/\(Self.percentEncoded(id))", expect: [204])
    }
}
