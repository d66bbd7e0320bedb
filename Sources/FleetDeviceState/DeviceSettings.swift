import FleetJSON
import FleetProtocol

/// The settings file apps read, `apps/<app>/settings.json`:
///
/// ```json
/// {"app": "kiosk", "schemaVersion": 3, "revision": 41, "syncedAt": "2026-11-23T10:00:00Z", "values": {…}}
/// ```
///
/// Only a document that passed validation against the metadata of `schemaVersion` is ever
/// written; `syncedAt` is when the agent received it from the server.
public struct DeviceSettings: Sendable, Hashable {
    public var app: String
    public var schemaVersion: Int64
    public var revision: Int64
    /// Seconds since the epoch.
    public var syncedAt: Int64
    public var values: JSONObject

    public init(app: String, schemaVersion: Int64, revision: Int64, syncedAt: Int64, values: JSONObject) {
        self.app = app
        self.schemaVersion = schemaVersion
        self.revision = revision
        self.syncedAt = syncedAt
        self.values = values
    }

    /// The file form of a document the server sent, received at `syncedAt`.
    public init(_ document: SettingsDocument, syncedAt: Int64) {
        self.init(
            app: document.app, schemaVersion: document.schemaVersion, revision: document.revision, syncedAt: syncedAt,
            values: document.values)
    }

    /// Reads the file form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "schemaVersion", "revision", "syncedAt", "values"])
        app = try reader.string("app", maximumLength: 64)
        schemaVersion = try reader.count("schemaVersion")
        revision = try reader.count("revision")
        syncedAt = try reader.timestamp("syncedAt")
        values = try reader.values("values")
    }

    /// The file form, pretty-printed (people read it too), members in a fixed order.
    public var json: JSONValue {
        [
            "app": .string(app), "schemaVersion": .number(.integer(schemaVersion)), "revision": .number(.integer(revision)),
            "syncedAt": .string(Timestamp.format(syncedAt)), "values": .object(values),
        ]
    }

    /// The bytes written to disk.
    public var fileBytes: [UInt8] { Array((json.serialized(.pretty) + "\n").utf8) }
}
