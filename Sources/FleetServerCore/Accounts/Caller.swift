import FleetProtocol
import HTTPTypes

/// Someone calling the admin API or the console: an account, and the credential the request
/// carried. What it may do is its role's rights within its scope (``AccessControl``).
public struct Caller: Sendable, Hashable {
    /// Which credential a request carried.
    public enum Credential: Sendable, Hashable, CustomStringConvertible {
        /// The server's admin token file: the bootstrap owner's.
        case adminTokenFile
        /// An API token (its id).
        case apiToken(id: String)
        /// A console session (its id).
        case consoleSession(id: String)
        /// A name and password (and second factor) just now: sign-in itself.
        case password
        /// A sign-in through the organization's OpenID Provider just now.
        case singleSignOn

        /// `admin token file`, `token at-…`, `session cs-…`: what the audit trail records.
        public var description: String {
            switch self {
            case .adminTokenFile: "admin token file"
            case .apiToken(let id): "token \(id)"
            case .consoleSession(let id): "session \(id)"
            case .password: "password"
            case .singleSignOn: "single sign-on"
            }
        }
    }

    public var account: Account
    public var credential: Credential

    public init(account: Account, credential: Credential) {
        self.account = account
        self.credential = credential
    }

    /// The account's name: who the history and the audit trail say did it.
    public var name: String { account.name }
    public var role: Role { account.role }
    public var scope: AccountScope { account.scope }

    /// Whether the role has `right`.
    public func has(_ right: AdminRight) -> Bool { role.rights.contains(right) }

    /// Checks that the role has `right`.
    ///
    /// - Throws: 403 `needs-<right>`.
    public func require(_ right: AdminRight) throws(ServiceError) {
        guard has(right) else {
            throw ServiceError(
                403, .needs(right), "this needs the right \(right.rawValue), which the role \(role.rawValue) of \(name) does not have")
        }
    }

    /// Checks that the role has `right` and the scope covers `app`.
    ///
    /// - Throws: 403 `needs-<right>`, saying which.
    public func require(_ right: AdminRight, app: String) throws(ServiceError) {
        try require(right)
        guard scope.covers(app: app) else {
            throw ServiceError(403, .needs(right), "\(name) may use \(right.rawValue) only for \(scope.summary), not for app \(app)")
        }
    }

    /// Checks what reaches every device of `app` (its metadata, its app-scope values, its
    /// rollouts): the scope must cover the app and name no groups.
    ///
    /// - Throws: 403 `needs-<right>`.
    public func requireWholeApp(_ right: AdminRight, app: String) throws(ServiceError) {
        try require(right, app: app)
        guard scope.groups.isEmpty else {
            throw ServiceError(
                403, .needs(right),
                "\(name) is limited to groups \(scope.groups.joined(separator: ", ")); this reaches every device of app \(app)")
        }
    }

    /// Whether the caller sees `device`: one of its apps (and groups) is in the scope.
    public func sees(_ device: Device) -> Bool { scope.covers(deviceApps: device.apps, groups: device.groups) }

    /// Whether the caller sees the device record.
    public func sees(_ device: DeviceRecord) -> Bool { scope.covers(deviceApps: device.apps, groups: device.groups) }

    /// Whether the caller sees what is stored at a policy scope.
    public func sees(_ scope: PolicyScope, devices: [String: Device]) -> Bool {
        switch scope {
        case .app(let app): self.scope.covers(app: app)
        case .group(let group): self.scope.covers(group: group)
        case .device(let id): devices[id].map(sees) ?? false
        }
    }
}

extension Device {
    /// Whether `caller`'s scope covers the device.
    func isSeen(by caller: Caller) -> Bool { caller.sees(self) }
}
