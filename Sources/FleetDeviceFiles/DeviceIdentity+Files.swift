import FleetDeviceState
import FleetIO
import FleetJSON
import FleetProtocol

extension DeviceIdentity {
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

/// `enrollment-request.json`: `{"requestId": "…", "server": "…"}`, made once before the first
/// enrollment request and removed once `identity.json` is saved.
public struct EnrollmentRequestFile: Sendable, Hashable {
    public var requestId: String
    /// The server it was sent to: a request id is never sent to another one.
    public var server: String

    public init(requestId: String, server: String) {
        self.requestId = requestId
        self.server = server
    }

    /// The request under way at `path`, or a new one for `server` saved there (mode 0600,
    /// durably) before it is first sent. An unreadable file, or one made for another server,
    /// is replaced.
    public static func loadOrMake(_ path: String, server: String, random: () -> UInt64) throws(FileError) -> EnrollmentRequestFile {
        if let bytes = try? FileSystem.readFileIfPresent(path, maximumSize: 4096), let json = try? JSONParser.parse(bytes),
            let reader = try? ObjectReader(json, allowed: ["requestId", "server"]),
            let id = try? reader.string("requestId", maximumLength: 64),
            let saved = try? reader.string("server", maximumLength: 2048), saved == server, EnrollRequest.isValidRequestID(id)
        {
            return EnrollmentRequestFile(requestId: id, server: saved)
        }
        let id =
            "er-"
            + (0..<2).map { _ in
                let hex = String(random(), radix: 16)
                return String(repeating: "0", count: 16 - hex.count) + hex
            }.joined(separator: "-")
        let request = EnrollmentRequestFile(requestId: id, server: server)
        let json: JSONValue = ["requestId": .string(request.requestId), "server": .string(server)]
        try FileSystem.writeAtomically(Array((json.serialized() + "\n").utf8), to: path, mode: 0o600)
        return request
    }
}
