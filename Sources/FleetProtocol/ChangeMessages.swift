import FleetJSON

/// One step of a staged rollout: a share of the devices the change reaches, by a stable hash of
/// their ids (`5%`, `0.5%`, `100%`), the devices of a named group (`group:canary`), or the
/// devices whose facts meet a query when the rollout starts (`where:os.version=12`, conditions
/// separated by `;`).
///
/// Shares are cumulative: in `5%,25%,100%` the second wave takes the devices whose hash falls
/// below 25% and are not in the first. A device belongs to the first wave that takes it.
public enum RolloutWave: Sendable, Hashable, CustomStringConvertible {
    /// Devices whose hash bucket (0 to 9,999) is below `basisPoints` (100 = 1%).
    case share(basisPoints: Int)
    /// The devices in this group.
    case group(String)
    /// The devices whose facts met every condition when the rollout started (the server keeps
    /// their ids with the rollout, as hawkBit fixes a rollout's groups when it is created: the
    /// wave a device is in does not change under an admin's eyes while it runs).
    case query([DeviceInfoFilter])

    /// Every device the change reaches.
    public static let everyone = RolloutWave.share(basisPoints: 10_000)
    /// The longest `where:` wave, in characters.
    public static let maximumQueryLength = 1024

    /// Reads `5%`, `0.25%`, `100%` or `group:NAME`; `nil` for anything else (a share above
    /// 100% or with more than two decimals, an empty group name).
    public init?(_ text: String) {
        if text.hasPrefix("where:") {
            guard text.unicodeScalars.count <= Self.maximumQueryLength else { return nil }
            let conditions = text.dropFirst("where:".count).split(separator: ";", omittingEmptySubsequences: false)
            guard (1...GroupDefinition.maximumConditions).contains(conditions.count) else { return nil }
            var filters: [DeviceInfoFilter] = []
            for condition in conditions {
                guard let filter = DeviceInfoFilter(String(condition)) else { return nil }
                filters.append(filter)
            }
            self = .query(filters)
            return
        }
        if text.hasPrefix("group:") {
            let name = String(text.dropFirst("group:".count))
            guard (1...128).contains(name.unicodeScalars.count),
                !name.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F })
            else { return nil }
            self = .group(name)
            return
        }
        guard text.hasSuffix("%") else { return nil }
        let number = text.dropLast()
        let parts = number.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = Int(parts[0]), whole >= 0, parts[0].allSatisfy(\.isASCII) else { return nil }
        var hundredths = whole * 100
        if parts.count == 2 {
            let fraction = parts[1]
            guard (1...2).contains(fraction.count), fraction.allSatisfy({ $0.isASCII && $0.isNumber }), let digits = Int(fraction) else {
                return nil
            }
            hundredths += fraction.count == 1 ? digits * 10 : digits
        }
        guard (1...10_000).contains(hundredths) else { return nil }
        self = .share(basisPoints: hundredths)
    }

    /// `5%`, `0.25%`, `group:NAME` or `where:CONDITION;…`.
    public var description: String {
        switch self {
        case .group(let name): return "group:\(name)"
        case .query(let filters): return "where:" + filters.map(\.description).joined(separator: ";")
        case .share(let basisPoints): return Self.percentText(basisPoints: basisPoints)
        }
    }

    /// A share in basis points as a percentage: `0%`, `2%`, `2.5%`, `0.25%`.
    public static func percentText(basisPoints: Int) -> String {
        let whole = basisPoints / 100
        let fraction = basisPoints % 100
        if fraction == 0 { return "\(whole)%" }
        return fraction % 10 == 0 ? "\(whole).\(fraction / 10)%" : "\(whole).\(fraction < 10 ? "0" : "")\(fraction)%"
    }

    /// A device id's place in the fleet for share waves: 0 to 9,999, from FNV-1a of the id.
    /// Stable across rollouts and restarts, so the first 5% is the same devices every time
    /// (a fleet's canaries stay its canaries).
    public static func bucket(_ deviceID: String) -> Int {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in deviceID.utf8 {
            hash ^= UInt64(byte)
            hash &*= 0x0000_0100_0000_01B3
        }
        // Fold the high bits in: FNV's low bits alone are poorly spread for short ids.
        return Int((hash ^ (hash >> 32)) % 10_000)
    }

    /// The wave of `waves` a device with this id and these groups is in: the first whose group
    /// it is in, whose query took it (`inQueryWave` of the wave's index), or whose share its
    /// bucket falls below (the last, 100%, takes every device).
    public static func index(
        in waves: [RolloutWave], deviceID: String, groups: [String], inQueryWave: (Int) -> Bool = { _ in false }
    ) -> Int {
        let bucket = bucket(deviceID)
        for (index, wave) in waves.enumerated() {
            switch wave {
            case .group(let name) where groups.contains(name): return index
            case .query where inQueryWave(index): return index
            case .share(let basisPoints) where bucket < basisPoints: return index
            default: continue
            }
        }
        return max(0, waves.count - 1)
    }

    /// Reads a list of waves; the last must be `100%` (every device the change reaches), shares
    /// must grow, and no group may repeat.
    public static func list(_ texts: [String]) -> Result<[RolloutWave], RolloutWaveError> {
        guard !texts.isEmpty, texts.count <= 20 else { return .failure(RolloutWaveError(index: nil, "name 1 to 20 waves")) }
        var waves: [RolloutWave] = []
        var lastShare = 0
        for (index, text) in texts.enumerated() {
            guard let wave = RolloutWave(text) else {
                return .failure(
                    RolloutWaveError(
                        index: index,
                        "\"\(text)\" is not a wave: write a share like 5% or 0.5%, group:NAME, or where:FACT=VALUE (conditions separated by ;)"
                    ))
            }
            if case .share(let basisPoints) = wave {
                guard basisPoints > lastShare else {
                    return .failure(RolloutWaveError(index: index, "\(wave) is not more than the wave before it: shares are cumulative"))
                }
                lastShare = basisPoints
            }
            guard !waves.contains(wave) else { return .failure(RolloutWaveError(index: index, "\(wave) is named twice")) }
            waves.append(wave)
        }
        guard waves.last == .everyone else {
            return .failure(RolloutWaveError(index: texts.count - 1, "the last wave must be 100%, so that the change reaches every device"))
        }
        return .success(waves)
    }
}

/// Why a list of waves was refused: which one (its index) and what is wrong.
public struct RolloutWaveError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The index of the wave at fault in the list read; `nil` when the list as a whole is wrong
    /// (empty, or more than 20 waves).
    public let index: Int?
    /// What is wrong, for a person: `5% is named twice`.
    public let message: String

    /// Creates an error.
    public init(index: Int?, _ message: String) {
        self.index = index
        self.message = message
    }

    /// The ``message`` alone (it quotes the wave at fault itself).
    public var description: String { message }
}

/// `POST /v1/admin/apps/{app}/rollouts`: a merge patch of one scope's values, staged in waves.
public struct RolloutRequest: Sendable, Hashable {
    /// `app` or `group:NAME` (a device scope reaches one device: nothing to stage).
    public var scope: String
    /// The RFC 7396 merge patch of the scope's values to stage; it changes at least one setting.
    public var patch: JSONObject
    /// The waves, in order: shares grow, a group is named once, and the last is `100%`
    /// (``RolloutWave/list(_:)``).
    public var waves: [RolloutWave]
    /// Pause when `error` plus `unsupported` reports exceed this share of the devices admitted
    /// so far, in basis points (200 = 2%).
    public var pauseOnErrorsBasisPoints: Int
    /// How long each wave has to report before the rollout pauses, in seconds.
    public var waveWaitSeconds: Int64
    /// Why, kept in the app's history (at most 1,024 characters); may be empty.
    public var message: String

    /// The default threshold: any error or unsupported report pauses (0%).
    public static let defaultPauseOnErrors = 0
    /// The default time a wave has to report: 10 minutes.
    public static let defaultWaveWait: Int64 = 600
    /// The allowed times a wave has to report: 5 seconds to a week.
    public static let waveWaits: ClosedRange<Int64> = 5...604_800

    /// Creates a request; the defaults pause at the first failure and give each wave 10 minutes to report.
    public init(
        scope: String, patch: JSONObject, waves: [RolloutWave], pauseOnErrorsBasisPoints: Int = defaultPauseOnErrors,
        waveWaitSeconds: Int64 = defaultWaveWait, message: String = ""
    ) {
        self.scope = scope
        self.patch = patch
        self.waves = waves
        self.pauseOnErrorsBasisPoints = pauseOnErrorsBasisPoints
        self.waveWaitSeconds = waveWaitSeconds
        self.message = message
    }

    /// Reads the wire form; unknown members, an empty patch, waves ``RolloutWave/list(_:)`` refuses
    /// and values out of range are refused, each at its pointer. `pauseOnErrorsPercent` is a
    /// percentage from 0 to 100 with at most two decimals.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["scope", "patch", "waves", "pauseOnErrorsPercent", "waveWaitSeconds", "message"])
        scope = try reader.string("scope", maximumLength: 256)
        patch = try reader.values("patch")
        guard !patch.isEmpty else { throw DocumentError(at: JSONPointer.root.appending("patch"), "must change at least one setting") }
        let texts = try reader.array("waves") { value, pointer throws(DocumentError) in
            guard case .string(let text) = value else {
                throw DocumentError(at: pointer, "must be a string like \"5%\" or \"group:canary\"")
            }
            return text
        }
        switch RolloutWave.list(texts) {
        case .success(let waves): self.waves = waves
        case .failure(let error):
            throw DocumentError(at: error.index.map { JSONPointer.root.appending("waves").appending(index: $0) } ?? .root, error.message)
        }
        pauseOnErrorsBasisPoints = try Self.percent(reader, "pauseOnErrorsPercent") ?? Self.defaultPauseOnErrors
        waveWaitSeconds = try reader.integer("waveWaitSeconds", in: Self.waveWaits, default: Self.defaultWaveWait)
        message = try reader.optionalString("message", maximumLength: 1024) ?? ""
    }

    /// `10m`, `90s`, `2h`: a number of seconds in the largest unit that divides it.
    public static func durationText(seconds: Int64) -> String {
        if seconds >= 3600, seconds % 3600 == 0 { return "\(seconds / 3600)h" }
        if seconds >= 60, seconds % 60 == 0 { return "\(seconds / 60)m" }
        return "\(seconds)s"
    }

    /// A percentage from 0 to 100 with at most two decimals, in basis points.
    static func percent(_ reader: ObjectReader, _ key: String) throws(DocumentError) -> Int? {
        guard let value = reader.object[key] else { return nil }
        guard case .number(let number) = value, case let hundredths = (number.doubleValue * 100).rounded(),
            abs(hundredths - number.doubleValue * 100) < 1e-6, (0...10_000).contains(hundredths)
        else { throw DocumentError(at: reader.location.appending(key), "must be a percentage from 0 to 100 with at most two decimals") }
        return Int(hundredths)
    }

    /// The wire form, the threshold as `pauseOnErrorsPercent` (`2` for 200 basis points).
    public var json: JSONValue {
        [
            "scope": .string(scope), "patch": .object(patch), "waves": .array(waves.map { .string($0.description) }),
            "pauseOnErrorsPercent": .number(.double(Double(pauseOnErrorsBasisPoints) / 100)),
            "waveWaitSeconds": .number(.integer(waveWaitSeconds)), "message": .string(message),
        ]
    }
}

/// Where a rollout is: running, paused (with why), completed or aborted.
public enum RolloutPhase: String, Sendable, CaseIterable {
    /// Admitting waves as their devices report.
    case running
    /// Stopped admitting waves, for too many failures or devices that did not report in time
    /// (``RolloutView/reason`` says which); an admin resumes or aborts it.
    case paused
    /// Every wave passed: the patch is written into the stored values.
    case completed
    /// Ended by an admin, a forced revert or a forced write; every device is back on the stored values.
    case aborted

    /// Running or paused: the rollout still decides what devices get.
    public var isActive: Bool { self == .running || self == .paused }
}

/// One device's part in a rollout's admitted waves, as `rollout status` lists the ones that
/// are not done.
public struct RolloutDeviceState: Sendable, Hashable {
    /// Where the device stands with the staged values.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Reported `applied` for the staged values (and so did its app, when it acknowledges).
        case applied
        /// Reported `error` or `unsupported` for them.
        case failed
        /// Has not fetched them, or not reported on them yet.
        case waiting
    }

    /// The device's id (`d-…`).
    public var device: String
    /// The index of the wave the device is in (0 for the first).
    public var wave: Int
    /// Whether it applied the staged values, failed on them, or is still waited for.
    public var outcome: Outcome
    /// The report's state and message for a failure; what it waits for otherwise.
    public var detail: String

    /// Creates a device's state.
    public init(device: String, wave: Int, outcome: Outcome, detail: String) {
        self.device = device
        self.wave = wave
        self.outcome = outcome
        self.detail = detail
    }

    /// Reads the wire form at `location` (an element of ``RolloutView/devices``); unknown members are refused.
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["device", "wave", "outcome", "detail"])
        device = try reader.string("device", maximumLength: 128)
        wave = Int(try reader.count("wave"))
        outcome = try reader.oneOf("outcome", Outcome.self)
        detail = try reader.string("detail")
    }

    /// The wire form.
    public var json: JSONValue {
        [
            "device": .string(device), "wave": .number(.integer(Int64(wave))), "outcome": .string(outcome.rawValue),
            "detail": .string(detail),
        ]
    }
}

/// How far one wave got.
public struct RolloutWaveProgress: Sendable, Hashable {
    /// The wave, as the request named it (`5%`, `group:canary`).
    public var wave: RolloutWave
    /// How many devices the wave admitted (disabled devices are not counted).
    public var devices: Int64
    /// How many of them applied the staged values (or are not changed by them).
    public var applied: Int64
    /// How many of them reported `error` or `unsupported` for the staged values.
    public var failed: Int64
    /// How many of them have not fetched the staged values, or not reported on them yet.
    public var waiting: Int64

    /// Creates a wave's progress.
    public init(wave: RolloutWave, devices: Int64, applied: Int64, failed: Int64, waiting: Int64) {
        self.wave = wave
        self.devices = devices
        self.applied = applied
        self.failed = failed
        self.waiting = waiting
    }

    /// Reads the wire form at `location` (an element of ``RolloutView/progress``); unknown members
    /// and a malformed wave are refused.
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        let reader = try ObjectReader(json, at: location, allowed: ["wave", "devices", "applied", "failed", "waiting"])
        guard let wave = RolloutWave(try reader.string("wave", maximumLength: RolloutWave.maximumQueryLength)) else {
            throw DocumentError(at: location.appending("wave"), "must be a wave like \"5%\" or \"group:canary\"")
        }
        self.wave = wave
        devices = try reader.count("devices")
        applied = try reader.count("applied")
        failed = try reader.count("failed")
        waiting = try reader.count("waiting")
    }

    /// The wire form, the wave as its text.
    public var json: JSONValue {
        [
            "wave": .string(wave.description), "devices": .number(.integer(devices)), "applied": .number(.integer(applied)),
            "failed": .number(.integer(failed)), "waiting": .number(.integer(waiting)),
        ]
    }
}

/// A rollout as admins see it: `GET /v1/admin/apps/{app}/rollout` and the answers of starting,
/// resuming and aborting one. Secrets in the patch are masked.
public struct RolloutView: Sendable, Hashable {
    /// The rollout's id (`r-…`).
    public var id: String
    /// The app id.
    public var app: String
    /// The scope whose values are staged: `app` or `group:NAME`.
    public var scope: String
    /// The staged merge patch; a secret reads `"********"`.
    public var patch: JSONObject
    /// The waves, in order; the last is `100%`.
    public var waves: [RolloutWave]
    /// The share of the admitted devices that may fail before the rollout pauses, in basis points
    /// (200 = 2%); `pauseOnErrorsPercent` on the wire.
    public var pauseOnErrorsBasisPoints: Int
    /// How long each wave has to report before the rollout pauses, in seconds.
    public var waveWaitSeconds: Int64
    /// Whether it is running, paused, completed or aborted.
    public var phase: RolloutPhase
    /// The index of the wave admitted last (0 for the first).
    public var currentWave: Int
    /// When the current wave was admitted, in seconds since the epoch; its time to report runs from then.
    public var waveStartedAt: Int64
    /// When the rollout started, in seconds since the epoch.
    public var startedAt: Int64
    /// When it completed or was aborted, in seconds since the epoch; `nil` while it is active.
    public var endedAt: Int64?
    /// Why it paused, when it is paused; why it ended, when aborted.
    public var reason: String
    /// Who started it, as the history names writers: `admin (token 1a2b3c4d)`,
    /// `console (token 1a2b3c4d)`.
    public var actor: String
    /// The message it was started with; may be empty.
    public var message: String
    /// One per wave admitted so far.
    public var progress: [RolloutWaveProgress]
    /// The admitted devices that failed or still wait, failures first (at most 50).
    public var devices: [RolloutDeviceState]

    /// Creates a view.
    public init(
        id: String, app: String, scope: String, patch: JSONObject, waves: [RolloutWave], pauseOnErrorsBasisPoints: Int,
        waveWaitSeconds: Int64, phase: RolloutPhase, currentWave: Int, waveStartedAt: Int64, startedAt: Int64, endedAt: Int64?,
        reason: String, actor: String, message: String, progress: [RolloutWaveProgress], devices: [RolloutDeviceState]
    ) {
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
        self.progress = progress
        self.devices = devices
    }

    /// Reads the wire form; unknown members are refused, and times must be RFC 3339 UTC timestamps.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(
            json,
            allowed: [
                "id", "app", "scope", "patch", "waves", "pauseOnErrorsPercent", "waveWaitSeconds", "phase", "currentWave", "waveStartedAt",
                "startedAt", "endedAt", "reason", "actor", "message", "progress", "devices",
            ])
        id = try reader.string("id", maximumLength: 128)
        app = try reader.string("app", maximumLength: 64)
        scope = try reader.string("scope", maximumLength: 256)
        patch = try reader.values("patch")
        waves = try reader.array("waves") { value, pointer throws(DocumentError) in
            guard case .string(let text) = value, let wave = RolloutWave(text) else { throw DocumentError(at: pointer, "must be a wave") }
            return wave
        }
        pauseOnErrorsBasisPoints = try RolloutRequest.percent(reader, "pauseOnErrorsPercent") ?? 0
        waveWaitSeconds = try reader.count("waveWaitSeconds")
        phase = try reader.oneOf("phase", RolloutPhase.self)
        currentWave = Int(try reader.count("currentWave"))
        waveStartedAt = try reader.timestamp("waveStartedAt")
        startedAt = try reader.timestamp("startedAt")
        endedAt = try reader.nullableTimestamp("endedAt")
        reason = try reader.string("reason")
        actor = try reader.string("actor", maximumLength: 256)
        message = try reader.string("message")
        progress = try reader.array("progress") { value, pointer throws(DocumentError) in try RolloutWaveProgress(json: value, at: pointer)
        }
        devices = try reader.array("devices") { value, pointer throws(DocumentError) in try RolloutDeviceState(json: value, at: pointer) }
    }

    /// The wire form, times as RFC 3339 UTC timestamps and the threshold as `pauseOnErrorsPercent`.
    public var json: JSONValue {
        [
            "id": .string(id), "app": .string(app), "scope": .string(scope), "patch": .object(patch),
            "waves": .array(waves.map { .string($0.description) }),
            "pauseOnErrorsPercent": .number(.double(Double(pauseOnErrorsBasisPoints) / 100)),
            "waveWaitSeconds": .number(.integer(waveWaitSeconds)), "phase": .string(phase.rawValue),
            "currentWave": .number(.integer(Int64(currentWave))), "waveStartedAt": .string(Timestamp.format(waveStartedAt)),
            "startedAt": .string(Timestamp.format(startedAt)), "endedAt": endedAt.map { .string(Timestamp.format($0)) } ?? .null,
            "reason": .string(reason), "actor": .string(actor), "message": .string(message), "progress": .array(progress.map(\.json)),
            "devices": .array(devices.map(\.json)),
        ]
    }
}

/// One write kept in an app's history: `GET /v1/admin/apps/{app}/history`. Secrets are masked.
public struct HistoryRecord: Sendable, Hashable {
    /// What one scope was changed by and to.
    public struct ScopeChange: Sendable, Hashable {
        /// The scope written: `app`, `group:NAME` or `device:ID`.
        public var scope: String
        /// The merge patch written (for a revert or a completed rollout: what it amounted to).
        public var patch: JSONObject
        /// The scope's values after the write.
        public var values: JSONObject

        /// Creates a scope's change.
        public init(scope: String, patch: JSONObject, values: JSONObject) {
            self.scope = scope
            self.patch = patch
            self.values = values
        }

        /// Reads the wire form at `location` (an element of ``HistoryRecord/scopes``); unknown
        /// members are refused.
        public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
            let reader = try ObjectReader(json, at: location, allowed: ["scope", "patch", "values"])
            scope = try reader.string("scope", maximumLength: 256)
            patch = try reader.values("patch")
            values = try reader.values("values")
        }

        /// The wire form.
        public var json: JSONValue { ["scope": .string(scope), "patch": .object(patch), "values": .object(values)] }
    }

    /// The number of this entry: the write's place in the app's history (1, 2, 3, … per app).
    /// It is not a device's revision: a device's `settings.json` counts the changes of the
    /// values that device gets, and a write to another group or device, or of metadata, makes
    /// no revision of its own. On the wire it is the member `revision`, the name CLIs of 0.7.0
    /// read (they refuse members they do not know); `entry` is read too, for the day it is
    /// renamed there.
    public var number: Int64
    /// When the write was made, in seconds since the epoch (RFC 3339 on the wire).
    public var at: Int64
    /// Who wrote: `admin (token 1a2b3c4d)`, `console (token 1a2b3c4d)`, `device d-…`, `server`.
    public var actor: String
    /// Why, as the writer said (the request's `message`); for a rollout's writes, what happened
    /// (`rollout r-… completed`). May be empty.
    public var message: String
    /// `values`, `metadata`, `revert`, `rollout` (started, advanced, paused, resumed, completed,
    /// aborted) or `initial` (values stored before the history began).
    public var kind: String
    /// The scopes the write changed, each with its patch and values after.
    public var scopes: [ScopeChange]
    /// The metadata version a `metadata` write stored.
    public var metadataVersion: Int64?

    /// Creates a record.
    public init(
        number: Int64, at: Int64, actor: String, message: String, kind: String, scopes: [ScopeChange], metadataVersion: Int64?
    ) {
        self.number = number
        self.at = at
        self.actor = actor
        self.message = message
        self.kind = kind
        self.scopes = scopes
        self.metadataVersion = metadataVersion
    }

    /// Reads the wire form at `location` (an element of ``HistoryList/entries``); unknown members
    /// are refused. The number is read from `revision`, or from `entry` when only that is there.
    public init(json: JSONValue, at location: JSONPointer) throws(DocumentError) {
        let reader = try ObjectReader(
            json, at: location, allowed: ["entry", "revision", "at", "actor", "message", "kind", "scopes", "metadataVersion"])
        number = try reader.count(reader.object["revision"] == nil && reader.object["entry"] != nil ? "entry" : "revision")
        at = try reader.timestamp("at")
        actor = try reader.string("actor", maximumLength: 256)
        message = try reader.string("message")
        kind = try reader.string("kind", maximumLength: 64)
        scopes = try reader.array("scopes") { value, pointer throws(DocumentError) in try ScopeChange(json: value, at: pointer) }
        metadataVersion = try reader.nullableCount("metadataVersion")
    }

    /// The wire form, the number as `revision` (the member CLIs of 0.7.0 read).
    public var json: JSONValue {
        [
            "revision": .number(.integer(number)), "at": .string(Timestamp.format(at)), "actor": .string(actor),
            "message": .string(message), "kind": .string(kind), "scopes": .array(scopes.map(\.json)),
            "metadataVersion": metadataVersion.map { .number(.integer($0)) } ?? .null,
        ]
    }
}

extension HistoryRecord {
    /// What the write changed, in one line: `metadata version 3`, or `app: title="Hi"; group:lobby: volume=3`
    /// (values as the server sent them: secrets masked), `-` for none.
    public var changeSummary: String {
        if kind == "metadata", let metadataVersion { return "metadata version \(metadataVersion)" }
        let parts = scopes.map { change in
            "\(change.scope): " + change.patch.map { "\($0.key)=\($0.value.serialized(maximumLength: 60))" }.joined(separator: " ")
        }
        return parts.isEmpty ? "-" : parts.joined(separator: "; ")
    }
}

/// `GET /v1/admin/apps/{app}/history`: the app's writes, oldest first.
public struct HistoryList: Sendable, Hashable {
    /// The app id.
    public var app: String
    /// The entries, oldest first (one page of them, with `limit` and `before`).
    public var entries: [HistoryRecord]

    /// Creates a list.
    public init(app: String, entries: [HistoryRecord]) {
        self.app = app
        self.entries = entries
    }

    /// Reads the wire form; unknown members are refused.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["app", "entries"])
        app = try reader.string("app", maximumLength: 64)
        entries = try reader.array("entries") { value, pointer throws(DocumentError) in try HistoryRecord(json: value, at: pointer) }
    }

    /// The wire form.
    public var json: JSONValue { ["app": .string(app), "entries": .array(entries.map(\.json))] }
}

/// `POST /v1/admin/apps/{app}/revert`: make the values as they were after history entry `to`.
public struct RevertRequest: Sendable, Hashable {
    /// The number of the history entry whose values to restore (``HistoryRecord/number``).
    public var to: Int64
    /// Only this scope (`app`, `group:NAME`, `device:ID`); `nil`: every scope.
    public var scope: String?
    /// Why, kept in the app's history (at most 1,024 characters); may be empty.
    public var message: String
    /// Revert even though a rollout of the app is running (it is aborted).
    public var force: Bool

    /// Creates a request; by default of every scope, without a message, and refused while a rollout runs.
    public init(to: Int64, scope: String? = nil, message: String = "", force: Bool = false) {
        self.to = to
        self.scope = scope
        self.message = message
        self.force = force
    }

    /// Reads the wire form; unknown members are refused, and only `to` is required.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["to", "scope", "message", "force"])
        to = try reader.count("to")
        scope = try reader.optionalString("scope", maximumLength: 256)
        message = try reader.optionalString("message", maximumLength: 1024) ?? ""
        force = try reader.optionalBool("force") ?? false
    }

    /// The wire form, without `scope` when it is `nil`.
    public var json: JSONValue {
        var object: JSONObject = ["to": .number(.integer(to)), "message": .string(message), "force": .bool(force)]
        if let scope { object["scope"] = .string(scope) }
        return .object(object)
    }
}
