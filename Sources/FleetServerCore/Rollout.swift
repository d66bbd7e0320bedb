import FleetJSON
import FleetMetadata
import FleetProtocol

/// A staged change of one scope's values: which devices get it so far, and what the gate
/// decided. A value: the store keeps it, ``RolloutGate`` moves it on, and the serving path asks
/// it which devices are admitted.
///
/// While it is active the stored values stay what they were (what devices outside the admitted
/// waves keep getting); the admitted devices get the scope's values with ``patch`` merged in.
/// When it completes, the patch is written into the stored values; when it is aborted, nothing
/// is, and every device is back on the stored values.
public struct Rollout: Sendable, Hashable {
    public var id: String
    public var app: String
    /// ``Scope/app`` or a group.
    public var scope: Scope
    /// The staged merge patch.
    public var patch: JSONObject
    public var waves: [RolloutWave]
    /// See ``RolloutRequest/pauseOnErrorsBasisPoints``.
    public var pauseOnErrorsBasisPoints: Int
    public var waveWaitSeconds: Int64
    public var phase: RolloutPhase
    /// The index of the last wave admitted.
    public var currentWave: Int
    public var waveStartedAt: Int64
    public var startedAt: Int64
    public var endedAt: Int64?
    /// Why it paused or was aborted; empty while it runs.
    public var reason: String
    public var actor: String
    public var message: String
    /// Counts its writes: 1 when started (see ``AppWrite/rollout``).
    public var version: Int64
    /// Devices whose failure or silence an admin accepted by resuming: the gate no longer
    /// counts them.
    public var accepted: Set<String>
    /// For each `where:` wave (by index), the devices whose facts met its query when the
    /// rollout started.
    public var queryMembers: [Int: Set<String>]

    public init(
        id: String, app: String, scope: Scope, patch: JSONObject, waves: [RolloutWave], pauseOnErrorsBasisPoints: Int,
        waveWaitSeconds: Int64, phase: RolloutPhase = .running, currentWave: Int = 0, waveStartedAt: Int64, startedAt: Int64,
        endedAt: Int64? = nil, reason: String = "", actor: String, message: String = "", version: Int64 = 1, accepted: Set<String> = [],
        queryMembers: [Int: Set<String>] = [:]
    ) {
        self.queryMembers = queryMembers
        self.id = id
        self.app = app
        self.scope = scope
        self.patch = patch
        self.waves = waves
        self.pauseOnErrorsBasisPoints = pauseOnErrorsBasisPoints
        self.waveWaitSeconds = waveWaitSeconds
        self.phase = phase
        self.currentWave = currentWave
        self.waveStartedAt = waveStartedAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.reason = reason
        self.actor = actor
        self.message = message
        self.version = version
        self.accepted = accepted
    }

    // MARK: - Who gets what

    /// Whether the change reaches `device` at all (an app-scope change every device of the app,
    /// a group's the devices in it).
    public func reaches(_ device: Device) -> Bool {
        switch scope {
        case .group(let name): return device.groups.contains(name)
        default: return true
        }
    }

    /// Whether the change reaches devices in `groups`.
    public func reaches(groups: [String]) -> Bool {
        if case .group(let name) = scope { return groups.contains(name) }
        return true
    }

    /// The wave `device` is in (see ``RolloutWave/index(in:deviceID:groups:)``).
    public func wave(of device: Device) -> Int {
        RolloutWave.index(in: waves, deviceID: device.id, groups: device.groups) { queryMembers[$0]?.contains(device.id) == true }
    }

    /// Whether `device` gets the staged values now: the rollout is active, reaches it, and has
    /// admitted its wave.
    public func admits(_ device: Device) -> Bool {
        phase.isActive && reaches(device) && wave(of: device) <= currentWave
    }

    /// The layers a device sees with the staged patch merged into the rollout's scope.
    public func staged(_ layers: ValueLayers) -> ValueLayers {
        var staged = layers
        switch scope {
        case .app: staged.app = SettingsValues.merged(layers.app, patch)
        case .group(let name): staged.groups[name] = SettingsValues.merged(layers.groups[name] ?? [:], patch)
        case .defaults, .device: break
        }
        return staged
    }

    /// Every scope's values with the staged patch merged into the rollout's scope (what the
    /// admitted devices see, and what completion stores).
    public func staged(_ values: [Scope: JSONObject]) -> [Scope: JSONObject] {
        var staged = values
        staged[scope] = SettingsValues.merged(values[scope] ?? [:], patch)
        return staged
    }

    /// The layers `device` sees: staged when it is admitted.
    public func layers(_ layers: ValueLayers, for device: Device) -> ValueLayers {
        admits(device) ? staged(layers) : layers
    }

    /// The rollout without `keys` (a forced write took them over): aborted when nothing is left.
    public func without(keys: [String], at time: Int64) -> Rollout {
        var changed = self
        for key in keys { changed.patch[key] = nil }
        guard changed.patch.isEmpty else {
            changed.version += 1
            return changed
        }
        changed.end(.aborted, at: time, reason: "a forced write took over every setting it staged")
        return changed
    }

    /// The top-level settings the rollout changes.
    public var keys: Set<String> { Set(patch.keys) }

    // MARK: - Stored form

    /// The JSON the stores keep (the patch unmasked: it is what devices will get).
    public var storedJSON: JSONValue {
        [
            "id": .string(id), "app": .string(app), "scope": .string(scope.description), "patch": .object(patch),
            "waves": .array(waves.map { .string($0.description) }), "pauseOnErrors": .number(.integer(Int64(pauseOnErrorsBasisPoints))),
            "waveWait": .number(.integer(waveWaitSeconds)), "phase": .string(phase.rawValue),
            "currentWave": .number(.integer(Int64(currentWave))), "waveStartedAt": .number(.integer(waveStartedAt)),
            "startedAt": .number(.integer(startedAt)), "endedAt": endedAt.map { .number(.integer($0)) } ?? .null,
            "reason": .string(reason), "actor": .string(actor), "message": .string(message), "version": .number(.integer(version)),
            "accepted": .array(accepted.sorted().map(JSONValue.string)),
            "queryMembers": .object(
                queryMembers.reduce(into: JSONObject()) { object, wave in
                    object["\(wave.key)"] = .array(wave.value.sorted().map(JSONValue.string))
                }),
        ]
    }

    /// The devices each `where:` wave of `waves` takes, of `devices` with their `facts`: those
    /// whose facts meet its query (one an earlier wave takes stays in that one).
    public static func queryMembers(waves: [RolloutWave], devices: [Device], facts: [String: JSONObject]) -> [Int: Set<String>] {
        var members: [Int: Set<String>] = [:]
        for (index, wave) in waves.enumerated() {
            guard case .query(let filters) = wave else { continue }
            members[index] = Set(devices.filter { DeviceInfoFilter.all(filters, match: facts[$0.id] ?? [:]) }.map(\.id))
        }
        return members
    }

    /// Reads ``storedJSON`` back.
    ///
    /// - Throws: ``StoreCorruption`` when `text` is not a rollout fleetset stored.
    public init(storedText text: String) throws {
        let what = "rollout"
        guard case .object(let object)? = try? JSONParser.parse(text) else { throw StoreCorruption(what: what) }
        func string(_ key: String) throws -> String {
            guard case .string(let value)? = object[key] else { throw StoreCorruption(what: what) }
            return value
        }
        func integer(_ key: String) throws -> Int64 {
            guard case .number(let number)? = object[key], let value = number.int64Value else { throw StoreCorruption(what: what) }
            return value
        }
        guard let scope = Scope(parameter: try string("scope")), case .object(let patch)? = object["patch"],
            case .array(let waveTexts)? = object["waves"], let phase = RolloutPhase(rawValue: try string("phase"))
        else { throw StoreCorruption(what: what) }
        func ids(_ value: JSONValue?) throws -> Set<String> {
            guard case .array(let ids)? = value else { return [] }
            return Set(
                try ids.map { id in
                    guard case .string(let text) = id else { throw StoreCorruption(what: what) }
                    return text
                })
        }
        let accepted = try ids(object["accepted"])
        var queryMembers: [Int: Set<String>] = [:]
        if case .object(let byWave)? = object["queryMembers"] {
            for (index, members) in byWave {
                guard let wave = Int(index) else { throw StoreCorruption(what: what) }
                queryMembers[wave] = try ids(members)
            }
        }
        let waves = try waveTexts.map { text -> RolloutWave in
            guard case .string(let wave) = text, let parsed = RolloutWave(wave) else { throw StoreCorruption(what: what) }
            return parsed
        }
        self.init(
            id: try string("id"), app: try string("app"), scope: scope, patch: patch, waves: waves,
            pauseOnErrorsBasisPoints: Int(try integer("pauseOnErrors")), waveWaitSeconds: try integer("waveWait"), phase: phase,
            currentWave: Int(try integer("currentWave")), waveStartedAt: try integer("waveStartedAt"), startedAt: try integer("startedAt"),
            endedAt: object["endedAt"] == .null ? nil : try integer("endedAt"), reason: try string("reason"), actor: try string("actor"),
            message: try string("message"), version: try integer("version"), accepted: accepted, queryMembers: queryMembers)
    }
}
