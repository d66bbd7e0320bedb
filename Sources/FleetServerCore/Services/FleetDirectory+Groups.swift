import FleetJSON
import FleetProtocol
import HTTPTypes
import Logging

extension FleetDirectory {
    /// Every group: those devices are in by hand and those defined by a query (listed even
    /// with no member), with how many devices are in each. A caller limited in scope sees the
    /// groups its scope covers that hold a device it sees, and counts the devices it sees (a
    /// query may name another app's facts).
    public func groups(visibleTo caller: Caller? = nil) async throws -> GroupList {
        let definitions = try await store.groupDefinitions()
        var members: [String: Int] = [:]
        for device in try await store.devices() where caller.map({ $0.sees(device) }) ?? true {
            for group in device.groups { members[group, default: 0] += 1 }
        }
        let queries = Dictionary(uniqueKeysWithValues: definitions.map { ($0.name, $0.conditions) })
        let names = Set(members.keys).union(Self.isLimited(caller) ? [] : Array(queries.keys)).filter {
            caller?.scope.covers(group: $0) ?? true
        }
        return GroupList(
            groups: names.sorted(by: GroupMembership.byteOrder).map { name in
                GroupSummary(name: name, conditions: queries[name], members: members[name] ?? 0)
            })
    }

    /// One group with its query (when a query defines it) and its members' ids.
    ///
    /// - Throws: 404 `unknown-group` when no device is in it and no query defines it.
    public func group(name: String, visibleTo caller: Caller? = nil) async throws -> GroupDetail {
        let definition = try await store.groupDefinitions().first { $0.name == name }
        let members = try await store.devices().filter { $0.groups.contains(name) && (caller.map($0.isSeen(by:)) ?? true) }.map(\.id)
        guard (definition != nil && !Self.isLimited(caller)) || !members.isEmpty, caller?.scope.covers(group: name) ?? true else {
            throw Self.unknownGroup(name)
        }
        return GroupDetail(
            summary: GroupSummary(name: name, conditions: definition?.conditions, members: members.count), devices: members)
    }

    /// Defines group `name` by the query in `body` (`{"where": [...]}`), or replaces its
    /// query: every device whose facts meet it is in the group from now on, every other device
    /// out of it, and the long-polls of those that moved answer at once with what their groups
    /// give them now. Returns the group with its members.
    ///
    /// - Throws: 400 `bad-group` for a query that cannot be read (at its pointer), a name
    ///   devices hold by hand, or one definition too many.
    public func defineGroup(name: String, body: JSONValue) async throws -> GroupDetail {
        guard Scope.isValidName(name) else {
            throw ServiceError(400, .badGroup, "a group name has 1 to 128 characters and no control characters")
        }
        let definition: GroupDefinition
        do {
            definition = try GroupDefinition(name: name, json: body)
        } catch {
            throw ServiceError(400, .badGroup, "\(error.location.displayText): \(error.message)")
        }
        let change: GroupMembershipChange
        do {
            change = try await store.defineGroup(definition)
        } catch let refusal as GroupRefusal {
            throw ServiceError(409, .badGroup, refusal.description)
        }
        for device in change.changedDevices { await notifyDeviceChanged(device) }
        logger.notice(
            "group defined by a query",
            metadata: [
                "event": "group-defined", "group": "\(name)", "where": "\(definition.queryText)",
                "joined": "\(change.joined.count)", "left": "\(change.left.count)",
            ])
        return try await group(name: name)
    }

    /// Removes the query of group `name`: its members leave it.
    ///
    /// - Throws: 404 `unknown-group` when no query defines it.
    public func removeGroupDefinition(name: String) async throws {
        guard let change = try await store.removeGroupDefinition(name: name) else {
            throw ServiceError(404, .unknownGroup, "no query defines group \"\(name)\"")
        }
        for device in change.changedDevices { await notifyDeviceChanged(device) }
        logger.notice(
            "group query removed", metadata: ["event": "group-removed", "group": "\(name)", "left": "\(change.left.count)"])
    }

    /// Whether `caller` sees only part of the fleet: it is shown a group's query only with a
    /// member it sees.
    static func isLimited(_ caller: Caller?) -> Bool { caller.map { !$0.scope.isEverything } ?? false }

    static func unknownGroup(_ name: String) -> ServiceError {
        ServiceError(404, .unknownGroup, "no device is in group \"\(name)\" and no query defines it")
    }
}
