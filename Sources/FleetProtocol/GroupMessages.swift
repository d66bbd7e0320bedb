import FleetJSON

/// A dynamic group: its members are the devices whose facts match every condition of its
/// query, as they report them (`PUT /v1/admin/groups/{name}`, `fleetset admin groups define
/// rpi-12 --where machine.arch=aarch64 --where os.version=12`). The server keeps each device's
/// membership as its facts change; group values and agent policies reach members as they reach
/// any group's devices.
public struct GroupDefinition: Sendable, Hashable {
    /// The most groups that may be defined by a query.
    public static let maximumCount = 64
    /// The most conditions one query may hold.
    public static let maximumConditions = 16

    /// The group's name, as scopes name it (`group:NAME`).
    public var name: String
    /// The conditions a device's facts must all meet (at least one).
    public var conditions: [DeviceInfoFilter]

    /// Creates a definition.
    public init(name: String, conditions: [DeviceInfoFilter]) {
        self.name = name
        self.conditions = conditions
    }

    /// Whether a device with these facts is a member.
    public func admits(_ info: JSONObject) -> Bool { DeviceInfoFilter.all(conditions, match: info) }

    /// Reads the query of a definition (`{"where": ["os.version=12", …]}`), naming it `name`.
    /// Errors point at the condition.
    public init(name: String, json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["name", "where", "members"])
        let whereLocation = location.appending("where")
        guard case .array(let elements)? = reader.object["where"], (1...Self.maximumConditions).contains(elements.count) else {
            throw reader.missingOr("where", "must be an array of 1 to \(Self.maximumConditions) conditions")
        }
        var conditions: [DeviceInfoFilter] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let text) = element else {
                throw DocumentError(at: whereLocation.appending(index: index), "must be a string")
            }
            do {
                conditions.append(try DeviceInfoFilter(parsing: text))
            } catch {
                throw DocumentError(at: whereLocation.appending(index: index), error.description)
            }
        }
        self.init(name: name, conditions: conditions)
    }

    /// The stored and wire form of the query: `{"where": […]}`.
    public var queryJSON: JSONValue { ["where": .array(conditions.map { .string($0.description) })] }

    /// `machine.arch=aarch64 os.version=12`: the query on one line.
    public var queryText: String { conditions.map(\.description).joined(separator: " ") }
}

/// One group as `GET /v1/admin/groups` lists it: a group some device is in by hand (its
/// enrollment token, `admin devices set --group`), or a group defined by a query, with the
/// number of its members.
public struct GroupSummary: Sendable, Hashable {
    /// The group's name.
    public var name: String
    /// The query that makes a device a member; `nil` for a group of devices put in it by hand.
    public var conditions: [DeviceInfoFilter]?
    /// How many devices are in it now.
    public var members: Int

    /// Creates a summary.
    public init(name: String, conditions: [DeviceInfoFilter]?, members: Int) {
        self.name = name
        self.conditions = conditions
        self.members = members
    }

    /// Reads the wire form at `location`.
    public init(json: JSONValue, at location: JSONPointer = .root) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["name", "where", "members"])
        name = try reader.string("name", maximumLength: 128)
        members = Int(try reader.count("members"))
        conditions = reader.object["where"] == nil ? nil : try GroupDefinition(name: name, json: json, at: location).conditions
    }

    /// The wire form: `where` only for a group defined by a query.
    public var json: JSONValue {
        var object: JSONObject = ["name": .string(name), "members": .number(.integer(Int64(members)))]
        if let conditions { object["where"] = .array(conditions.map { .string($0.description) }) }
        return .object(object)
    }
}

/// `GET /v1/admin/groups`: every group, by name.
public struct GroupList: Sendable, Hashable {
    /// The groups, sorted by name.
    public var groups: [GroupSummary]

    /// Creates a list.
    public init(groups: [GroupSummary]) { self.groups = groups }

    /// Reads the wire form.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["groups"])
        groups = try reader.array("groups") { element, location throws(DocumentError) in try GroupSummary(json: element, at: location) }
    }

    /// The wire form.
    public var json: JSONValue { ["groups": .array(groups.map(\.json))] }
}

/// `GET /v1/admin/groups/{name}`: one group, its query and its members.
public struct GroupDetail: Sendable, Hashable {
    /// The group and its member count.
    public var summary: GroupSummary
    /// Its members' ids, sorted.
    public var devices: [String]

    /// Creates a detail.
    public init(summary: GroupSummary, devices: [String]) {
        self.summary = summary
        self.devices = devices
    }

    /// Reads the wire form.
    public init(json: JSONValue) throws(DocumentError) {
        guard case .object(var object) = json else { throw DocumentError(at: .root, "must be an object") }
        let listed = object["devices"]
        object["devices"] = nil
        guard case .array(let ids)? = listed else {
            throw DocumentError(at: JSONPointer.root.appending("devices"), "must be an array of device ids")
        }
        var devices: [String] = []
        for (index, id) in ids.enumerated() {
            guard case .string(let text) = id else {
                throw DocumentError(at: JSONPointer.root.appending("devices").appending(index: index), "must be a string")
            }
            devices.append(text)
        }
        self.init(summary: try GroupSummary(json: .object(object)), devices: devices)
    }

    /// The wire form: the summary's members and `devices`.
    public var json: JSONValue {
        guard case .object(var object) = summary.json else { return summary.json }
        object["devices"] = .array(devices.map(JSONValue.string))
        return .object(object)
    }
}
