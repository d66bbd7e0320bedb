import FleetJSON
import FleetProtocol

extension GroupDefinition {
    /// The stored form: the query as a document (`{"where": […]}`).
    public var storedText: String { queryJSON.serialized() }

    /// Reads a stored definition.
    ///
    /// - Throws: ``StoreCorruption`` when the document is not one.
    public init(name: String, storedText: String) throws {
        guard let json = try? JSONParser.parse(storedText), let read = try? GroupDefinition(name: name, json: json) else {
            throw StoreCorruption(what: "definition of group \(name)")
        }
        self = read
    }
}

/// Which groups a device is in: those it was given by hand (its enrollment token, `admin
/// devices set --group`), then every group defined by a query that its facts meet. A device's
/// stored groups are both (every reader — serving, policies, rollouts, scoped accounts — sees
/// one list); the names of groups defined by a query tell them apart.
public enum GroupMembership {
    /// The groups of a device whose stored groups are `groups` and whose facts are `info`,
    /// under `definitions`: the groups given by hand in their order, then the defined groups
    /// its facts meet, by name.
    public static func groups(_ groups: [String], info: JSONObject, definitions: [GroupDefinition]) -> [String] {
        fixed(groups, definitions: definitions) + definitions.filter { $0.admits(info) }.map(\.name).sorted(by: byteOrder)
    }

    /// The groups of `device` with the facts `info`: those of its apps' facts that it is still
    /// given count (as admins see them, ``DeviceInfo/visible(_:apps:)``).
    public static func groups(of device: Device, info: JSONObject, definitions: [GroupDefinition]) -> [String] {
        groups(device.groups, info: DeviceInfo.visible(info, apps: device.apps), definitions: definitions)
    }

    /// The groups of `groups` given by hand: those no query defines.
    public static func fixed(_ groups: [String], definitions: [GroupDefinition]) -> [String] {
        let defined = Set(definitions.map(\.name))
        return groups.filter { !defined.contains($0) }
    }

    static func byteOrder(_ first: String, _ second: String) -> Bool { first.utf8.lexicographicallyPrecedes(second.utf8) }
}

/// Why a group's query, or a group given by hand, was refused (nothing written).
public enum GroupRefusal: Error, Sendable, Hashable, CustomStringConvertible {
    /// ``GroupDefinition/maximumCount`` groups are defined by a query already.
    case tooMany
    /// Devices are in the group by hand: a query would take it over.
    case heldByHand(group: String, devices: Int)
    /// The group is defined by a query: its members follow their facts, not an admin's list.
    case definedByQuery(group: String)

    public var description: String {
        switch self {
        case .tooMany:
            "at most \(GroupDefinition.maximumCount) groups may be defined by a query; remove one first"
        case .heldByHand(let group, let devices):
            "\(devices) device\(devices == 1 ? " is" : "s are") in group \(group) by hand; take \(devices == 1 ? "it" : "them") out of it (admin devices set ID --group …) or define another group"
        case .definedByQuery(let group):
            "group \(group) is defined by a query: its members follow their facts (admin groups show \(group))"
        }
    }
}

/// The devices whose membership of one group changed.
public struct GroupMembershipChange: Sendable, Hashable {
    /// The devices that are in the group now and were not.
    public var joined: [String] = []
    /// The devices that were in the group and are not now.
    public var left: [String] = []
    /// Every device whose groups changed (each one's long-polls must check again).
    public var changedDevices: [String] = []

    public init() {}
}

/// A report of facts, as stored: the facts and, when the report moved the device into or out
/// of groups defined by a query, its groups before and after.
public struct FactsUpdate: Sendable, Hashable {
    /// The device's facts now.
    public var info: JSONObject
    /// The device's groups before and after, when they changed.
    public var groups: (before: [String], after: [String])?

    public init(info: JSONObject, groups: (before: [String], after: [String])? = nil) {
        self.info = info
        self.groups = groups
    }

    public static func == (left: FactsUpdate, right: FactsUpdate) -> Bool {
        left.info == right.info && left.groups?.before == right.groups?.before && left.groups?.after == right.groups?.after
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(info)
        hasher.combine(groups?.before)
        hasher.combine(groups?.after)
    }
}

extension SettingsStore {
    /// Every group defined by a query, by name.
    public func groupDefinitions() async throws -> [GroupDefinition] {
        try await write { try await $0.groupDefinitions() }
    }

    /// Defines group `definition.name` by its query, or replaces its query, and moves every
    /// device in or out of it by its facts now, in one transaction (every device read locked
    /// first, so that a report of facts on any instance applies before or after, never beside).
    ///
    /// - Throws: ``GroupRefusal`` (nothing written) when devices are in the group by hand, or
    ///   when a new definition would pass ``GroupDefinition/maximumCount``.
    public func defineGroup(_ definition: GroupDefinition) async throws -> GroupMembershipChange {
        try await write { transaction in
            let devices = try await transaction.lockedDevices()
            var definitions = try await transaction.groupDefinitions()
            if let index = definitions.firstIndex(where: { $0.name == definition.name }) {
                definitions[index] = definition
            } else {
                guard definitions.count < GroupDefinition.maximumCount else { throw GroupRefusal.tooMany }
                let byHand = devices.count { $0.groups.contains(definition.name) }
                guard byHand == 0 else { throw GroupRefusal.heldByHand(group: definition.name, devices: byHand) }
                definitions.append(definition)
            }
            try await transaction.setGroupDefinition(definition)
            let facts = try await transaction.allDeviceInfo()
            return try await Self.regroup(devices, watching: definition.name, transaction) { device in
                GroupMembership.groups(of: device, info: facts[device.id]?.info ?? [:], definitions: definitions)
            }
        }
    }

    /// Removes the query of group `name`: its members leave it (their values and policies at
    /// `group:NAME` stay stored, reaching no one until devices are in the group again).
    /// Returns the change, or `nil` when no query defines the group.
    public func removeGroupDefinition(name: String) async throws -> GroupMembershipChange? {
        try await write { transaction in
            let devices = try await transaction.lockedDevices()
            guard try await transaction.removeGroupDefinition(name: name) else { return nil }
            return try await Self.regroup(devices, watching: name, transaction) { device in device.groups.filter { $0 != name } }
        }
    }

    /// Writes the groups `regrouped` gives each of `devices` where they changed, and tells
    /// every instance of each device changed.
    private static func regroup(
        _ devices: [Device], watching group: String, _ transaction: any StoreTransaction, _ regrouped: (Device) -> [String]
    ) async throws -> GroupMembershipChange {
        var change = GroupMembershipChange()
        for var device in devices {
            let groups = regrouped(device)
            guard groups != device.groups else { continue }
            let was = device.groups.contains(group)
            let isNow = groups.contains(group)
            if isNow && !was { change.joined.append(device.id) }
            if was && !isNow { change.left.append(device.id) }
            change.changedDevices.append(device.id)
            device.groups = groups
            try await transaction.updateDevice(device)
            try await transaction.announce(.device(device.id))
        }
        return change
    }
}
