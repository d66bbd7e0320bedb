import FleetJSON
import FleetProtocol

/// `identity.json`: who this device is to the server, saved at enrollment (mode 0600; the token
/// is a secret and is never logged).
///
/// ```json
/// {"deviceId": "d-…", "deviceToken": "fsd_…", "server": "https://fleet.example.com", "enrolledAt": "2026-11-23T10:00:00Z"}
/// ```
public struct DeviceIdentity: Sendable, Hashable {
    public var deviceId: String
    public var deviceToken: String
    /// The server that enrolled the device.
    public var server: String
    /// Seconds since the epoch.
    public var enrolledAt: Int64

    public init(deviceId: String, deviceToken: String, server: String, enrolledAt: Int64) {
        self.deviceId = deviceId
        self.deviceToken = deviceToken
        self.server = server
        self.enrolledAt = enrolledAt
    }

    /// Reads the file form.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["deviceId", "deviceToken", "server", "enrolledAt"])
        deviceId = try reader.string("deviceId", maximumLength: 128)
        deviceToken = try reader.string("deviceToken", maximumLength: 512)
        server = try reader.string("server", maximumLength: 2048)
        enrolledAt = try reader.timestamp("enrolledAt")
    }

    /// The file form.
    public var json: JSONValue {
        [
            "deviceId": .string(deviceId), "deviceToken": .string(deviceToken), "server": .string(server),
            "enrolledAt": .string(Timestamp.format(enrolledAt)),
        ]
    }

    /// Whether this identity was made by `server` (trailing slashes aside): the device token is
    /// never sent anywhere else.
    public func belongs(to server: String) -> Bool {
        func trimmed(_ url: String) -> Substring {
            var url = Substring(url)
            while url.hasSuffix("/") { url = url.dropLast() }
            return url
        }
        return trimmed(self.server) == trimmed(server)
    }
}
