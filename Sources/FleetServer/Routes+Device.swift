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
    /// Enrollment and the routes a device calls with its own token.
    func defineDeviceRoutes(_ on: (HTTPRequest.Method, String, Access, @escaping Handler) -> Void) {
        on(.post, "v1/enroll", .anyone) { request, context in
            let client = client(request, context)
            try limits.admit(client: client)
            let body = try await jsonBody(request, limit: Self.enrollLimit)
            // The token is checked first: a valid one is never refused for others' guesses.
            do {
                return json(.created, try await service.gateway.enroll(ServiceError.decode(body, as: EnrollRequest.init(json:))).json)
            } catch let error as ServiceError where error.status == 401 {
                try limits.recordFailure(client: client, credential: body["enrollmentToken"]?.stringValue)
                throw error
            }
        }

        // Every device route answers an app the device was not given exactly as an app that
        // does not exist (requireDevice(_:app:)).
        on(.get, "v1/apps/:app/metadata", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            return withRotationRequest(try await metadataResponse(request, app: app), device)
        }

        on(.get, "v1/apps/:app/settings", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            try await recordStatusOnPoll(request, app: app, device: device)
            return try await settingsLongPoll(request, context, app: app, device: device) { answer, unchanged in
                guard let settings = answer.settings else { return unchanged }
                return withDeviceHints(settingsResponse(settings.document, body: settings.body), answer, request)
            }
        }

        // One value of the settings, at a key path (for devices that need only it): the same
        // revision ETag, If-None-Match and wait as the whole document.
        on(.get, "v1/apps/:app/settings/**", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            try await recordStatusOnPoll(request, app: app, device: device)
            let path = try keyPath(context)
            return try await settingsLongPoll(request, context, app: app, device: device) { answer, unchanged in
                guard let document = answer.document else { return unchanged }
                guard let value = JSONValue.object(document.values)[pointer: path] else {
                    throw ServiceError(404, .unknownKey, "revision \(document.revision) of \(app) has no value at \(path.keyPath)")
                }
                var response = json(.ok, value)
                response.headers[.eTag] = RevisionTag.etag(document.revision)
                response.headers[.cacheControl] = "no-store"
                return withDeviceHints(response, answer, request)
            }
        }

        on(.patch, "v1/apps/:app/settings", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            try limits.admit(deviceWrite: device.id)
            let body = try await jsonBody(request, limit: Self.bodyLimit, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of settings")
            let document = try await service.gateway.patchSettings(
                app: app, device: device, ifMatch: request.headers[.ifMatch], patch: patch)
            return settingsResponse(document)
        }

        // A device's own explanation: which scope set each of its values (secrets masked).
        on(.get, "v1/apps/:app/explain", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            return json(.ok, try await service.admin.explain(app: app, deviceID: device.id).json)
        }

        on(.post, "v1/apps/:app/status", .device) { request, context in
            let app = try app(context)
            let device = try context.device(app: app)
            let report = try ServiceError.decode(try await jsonBody(request, limit: Self.bodyLimit)) { json throws(DocumentError) in
                try StatusReport(json: json)
            }
            try await service.gateway.recordStatus(app: app, device: device, report)
            return Response(status: .accepted)
        }

        // What the server asks of the calling device's agent; its ETag is the policy's tag.
        on(.get, "v1/device/policy", .device) { request, context in
            let device = try context.device()
            let policy = try await service.gateway.devicePolicy(device)
            var response = json(.ok, policy.json)
            response.headers[.eTag] = "\"\(policy.tag)\""
            response.headers[.cacheControl] = "no-store"
            return response
        }

        // The calling device's facts: a merge patch of those that changed.
        on(.patch, "v1/device/info", .device) { request, context in
            let device = try context.device()
            try limits.admit(deviceWrite: device.id)
            let body = try await jsonBody(request, limit: DeviceInfo.maximumSize * 2, mediaType: "application/merge-patch+json")
            let patch = try ServiceError.object(body, what: "the merge patch of facts")
            return json(.ok, ["info": .object(try await service.gateway.patchDeviceInfo(device: device, patch: patch))])
        }

        // A new token for the calling device; the old one works until the new one is used.
        on(.post, "v1/device/token", .device) { request, context in
            let device = try context.device()
            try limits.admit(deviceWrite: device.id)
            return json(.created, try await service.gateway.rotateToken(device: device).json)
        }
    }
}
