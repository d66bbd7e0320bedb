import FleetIO
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
    public init(json: JSONValue) throws(WireError) {
        let reader = try MemberReader(json, allowed: ["deviceId", "deviceToken", "server", "enrolledAt"])
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

    /// The identity saved at `path`, `nil` when the device has not enrolled yet.
    ///
    /// - Throws: ``IdentityFileError`` when the file exists but cannot be used; the device must
    ///   not enroll again over it by accident.
    public static func load(_ path: String) throws(IdentityFileError) -> DeviceIdentity? {
        let bytes: [UInt8]
        do {
            guard let found = try FileSystem.readFileIfPresent(path, maximumSize: 1 << 16) else { return nil }
            bytes = found
        } catch {
            throw IdentityFileError(message: "\(error)")
        }
        do {
            return try DeviceIdentity(json: try JSONParser.parse(bytes))
        } catch {
            throw IdentityFileError(message: "\(path) is not a device identity (\(error)); remove it to enroll again")
        }
    }

    /// Saves the identity at `path`, mode 0600, durably.
    public func save(to path: String) throws(FileError) {
        try FileSystem.writeAtomically(Array((json.serialized(.pretty) + "\n").utf8), to: path, mode: 0o600)
    }
}

/// An identity file that exists but cannot be read or understood.
public struct IdentityFileError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
