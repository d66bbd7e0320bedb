import FleetProtocol
import HTTPTypes

/// What an admin request names, which the caller's scope must cover: read by the HTTP layer
/// from the route's path and query.
public struct OperationTarget: Sendable, Hashable {
    /// The path's app.
    public var app: String?
    /// The path's device (on routes that name one).
    public var deviceID: String?
    /// The scope of values the request reads or writes.
    public var scope: Scope?

    public init(app: String? = nil, deviceID: String? = nil, scope: Scope? = nil) {
        self.app = app
        self.deviceID = deviceID
        self.scope = scope
    }
}

extension AdminOperation {
    /// Whether the route's `:id` names a device.
    public var targetsDevice: Bool {
        switch self {
        case .explainDevice, .getDevice, .updateDevice, .deleteDevice, .getDevicePolicyAsAdmin: true
        default: false
        }
    }

    /// Whether the route writes values at its `scope`.
    var writesValues: Bool { self == .patchValues || self == .setValueAtKeyPath || self == .removeValueAtKeyPath }
}

/// The one check of every admin request, before its route runs: the right the permission
/// table gives its operation, and what it names against the caller's scope.
extension AccountService {
    /// Checks that `caller` may call `operation` on `target`.
    ///
    /// - Throws: 403 `needs-<right>` when the role lacks the operation's right or the scope
    ///   does not cover the app or group named; 404 `unknown-device` for a device the scope
    ///   does not cover, exactly as for one that does not exist (a listing leaves it out).
    public func authorize(_ caller: Caller, _ operation: AdminOperation, _ target: OperationTarget) async throws {
        guard let right = operation.right else { return }
        try caller.require(right)
        if let app = target.app {
            if operation.reachesWholeApp || (operation.writesValues && target.scope == .app) {
                try caller.requireWholeApp(right, app: app)
            } else {
                try caller.require(right, app: app)
            }
        }
        guard !caller.scope.isEverything else { return }
        if case .group(let group)? = target.scope, !caller.scope.covers(group: group) {
            throw ServiceError(
                403, .needs(right), "\(caller.name) may use \(right.rawValue) only for \(caller.scope.summary), not for group \(group)")
        }
        var deviceIDs: [String] = []
        if operation.targetsDevice, let id = target.deviceID { deviceIDs.append(id) }
        if case .device(let id)? = target.scope { deviceIDs.append(id) }
        for id in deviceIDs {
            guard let device = try await device(id: id), caller.sees(device) else { throw ServiceError.unknownDevice(id) }
        }
    }

    /// Whether `caller`'s scope covers what `event` names (an app, a group, a device): what the
    /// console's live stream passes on, so that a scoped account hears nothing of the rest of the fleet.
    public func sees(_ caller: Caller, event: ServiceEvent) async -> Bool {
        guard !caller.scope.isEverything else { return true }
        let seesDevice = { (id: String) async in (try? await sees(caller, deviceID: id)) ?? false }
        switch event {
        case .statusReported(let app, let device, _): return caller.scope.covers(app: app) ? await seesDevice(device) : false
        case .settingsChanged(let app, let scope):
            guard caller.scope.covers(app: app) else { return false }
            switch scope {
            case .app, .defaults: return true
            case .group(let group): return caller.scope.covers(group: group)
            case .device(let id): return await seesDevice(id)
            }
        case .deviceChanged(let device): return await seesDevice(device)
        case .webhooksQueued: return false  // the manage-webhooks right is never scoped
        case .unknown: return true
        }
    }

    /// Whether `caller` sees the device with `id` (a listing's filter).
    public func sees(_ caller: Caller, deviceID id: String) async throws -> Bool {
        guard !caller.scope.isEverything else { return true }
        return try await device(id: id).map(caller.sees) ?? false
    }
}
