import FleetJSON
import FleetProtocol
import FleetServerCore
import Logging
import PostgresNIO

/// One change notification as sent on ``PostgresStore/changeChannel``: a JSON object naming
/// the instance that made the change and what changed, e.g.
/// `{"from":"9f2c…","app":"kiosk","scope":"group:lobby"}` or `{"from":"9f2c…","device":"d-1"}`
/// (at most a few hundred bytes: app ids, group names and device ids are short).
struct ChangeMessage: Sendable, Hashable {
    let from: String
    let change: StoreChange

    var payload: String {
        var object: JSONObject = ["from": .string(from)]
        switch change {
        case .values(let app, let scope):
            object["app"] = .string(app)
            object["scope"] = .string(scope.description)
        case .device(let id):
            object["device"] = .string(id)
        case .policy(let scope):
            object["policy"] = .string(scope.description)
        case .unknown:
            object["unknown"] = .bool(true)
        }
        return JSONValue.object(object).serialized()
    }

    init(from: String, change: StoreChange) {
        self.from = from
        self.change = change
    }

    /// Reads a payload; `nil` for one fleetset did not send.
    init?(payload: String) {
        guard case .object(let object)? = try? JSONParser.parse(payload), case .string(let from)? = object["from"] else { return nil }
        self.from = from
        if case .string(let app)? = object["app"], case .string(let scopeText)? = object["scope"] {
            guard let scope = scopeText == "defaults" ? .defaults : Scope(parameter: scopeText) else { return nil }
            change = .values(app: app, scope: scope)
        } else if case .string(let device)? = object["device"] {
            change = .device(device)
        } else if case .string(let scopeText)? = object["policy"] {
            guard let scope = PolicyScope(scopeText) else { return nil }
            change = .policy(scope)
        } else if case .bool(true)? = object["unknown"] {
            change = .unknown
        } else {
            return nil
        }
    }
}

extension PostgresStore {
    /// Hears the changes the other instances on this database make, and hands each to `handle`,
    /// until the calling task is cancelled. Its own changes it skips.
    ///
    /// It listens on a connection of its own. When that connection is lost it connects again
    /// (waiting 0.1 s, doubling to 5 s), and since changes may have been missed meanwhile, each
    /// time it listens again it first hands `handle` ``StoreChange/unknown``.
    ///
    /// - Parameter onListening: called each time it listens (again).
    public func followChanges(
        onListening: @escaping @Sendable () -> Void = {}, _ handle: @escaping @Sendable (StoreChange) async -> Void
    ) async {
        var delay = Duration.milliseconds(100)
        var connectionID = 0
        while !Task.isCancelled {
            do {
                connectionID += 1
                let connection = try await PostgresConnection.connect(
                    configuration: try location.connectionConfiguration(), id: connectionID, logger: logger)
                defer { Task { try? await connection.close() } }
                try await connection.listen(on: Self.changeChannel) { notifications in
                    delay = .milliseconds(100)
                    await handle(.unknown)
                    onListening()
                    for try await notification in notifications {
                        guard let message = ChangeMessage(payload: notification.payload) else {
                            logger.warning(
                                "change notification not understood",
                                metadata: ["event": "change-feed", "payload": "\(notification.payload)"])
                            continue
                        }
                        guard message.from != instanceID else { continue }
                        await handle(message.change)
                    }
                }
            } catch {
                guard !Task.isCancelled else { return }
                logger.warning(
                    "change feed lost; connecting again", metadata: ["event": "change-feed", "error": "\(error)", "retry_in": "\(delay)"])
            }
            try? await Task.sleep(for: delay)
            delay = min(delay * 2, .seconds(5))
        }
    }
}
