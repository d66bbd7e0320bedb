/// Where a value is set. Effective settings layer them: metadata defaults, then the app scope,
/// then each group the device belongs to, then the device itself (where values a device wrote
/// back live).
public enum Scope: Sendable, Hashable, CustomStringConvertible {
    /// The metadata's `default`.
    case defaults
    /// Every device running the app.
    case app
    /// Devices in the named group.
    case group(String)
    /// One device.
    case device(String)

    /// Parses the admin API's `scope` parameter: `app`, `group:NAME` or `device:ID`.
    /// Names are 1–128 characters without control characters.
    public init?(parameter: String) {
        if parameter == "app" {
            self = .app
            return
        }
        for (prefix, make) in [("group:", Scope.group), ("device:", Scope.device)] where parameter.hasPrefix(prefix) {
            let name = String(parameter.dropFirst(prefix.count))
            guard Self.isValidName(name) else { return nil }
            self = make(name)
            return
        }
        return nil
    }

    /// Whether `name` can name a group or device.
    public static func isValidName(_ name: String) -> Bool {
        (1...128).contains(name.unicodeScalars.count) && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// `defaults`, `app`, `group:lobby`, `device:d-42`.
    public var description: String {
        switch self {
        case .defaults: "defaults"
        case .app: "app"
        case .group(let name): "group:" + name
        case .device(let id): "device:" + id
        }
    }
}
