import FleetJSON
import FleetProtocol

/// Device reports of `error` and `unsupported` told as one event per app and state per minute
/// (`device.error`, `device.unsupported`), never one per device: the first such report of an
/// app opens a minute; at its end the event says how many devices reported so, and names up to
/// ``sampleSize`` of them.
public struct ReportDigest: Sendable, Hashable {
    /// How long reports are gathered into one event: 60 s.
    public static let window: Int64 = 60
    /// How many device ids an event names.
    public static let sampleSize = 20

    private struct Key: Hashable {
        let app: String
        let state: StatusReport.State
    }

    private struct Batch: Hashable {
        var openedAt: Int64
        var lastAt: Int64
        var devices: Set<String>
        var sample: [String]
    }

    private var batches: [Key: Batch] = [:]

    public init() {}

    /// A device reported `state` for `app` at `now` (reports other than error and unsupported
    /// are not told).
    public mutating func record(app: String, device: String, state: StatusReport.State, at now: Int64) {
        guard state == .error || state == .unsupported else { return }
        let key = Key(app: app, state: state)
        var batch = batches[key] ?? Batch(openedAt: now, lastAt: now, devices: [], sample: [])
        batch.lastAt = now
        if batch.devices.insert(device).inserted, batch.sample.count < Self.sampleSize { batch.sample.append(device) }
        batches[key] = batch
    }

    /// The events of the minutes that ended by `now`, in app order; they are forgotten.
    public mutating func due(now: Int64) -> [WebhookEventDraft] {
        let ended = batches.filter { now - $0.value.openedAt >= Self.window }
        for key in ended.keys { batches[key] = nil }
        return ended.sorted { ($0.key.app, $0.key.state.rawValue) < ($1.key.app, $1.key.state.rawValue) }.map { key, batch in
            WebhookEventDraft(
                type: key.state == .error ? .deviceError : .deviceUnsupported, app: key.app, occurredAt: batch.lastAt,
                data: [
                    "state": .string(key.state.rawValue), "devices": .number(.integer(Int64(batch.devices.count))),
                    "sample": .array(batch.sample.map(JSONValue.string)), "from": .string(Timestamp.format(batch.openedAt)),
                    "until": .string(Timestamp.format(batch.lastAt)),
                ])
        }
    }

    /// Whether a minute is open.
    public var isEmpty: Bool { batches.isEmpty }
}

/// Devices that stopped checking in, told once per app each time more of them fall silent
/// (`devices.silent`): a device is silent when it was last seen longer ago than the threshold
/// (never seen: counted from its enrollment). One that is seen again is told again if it falls
/// silent again. The first look only learns who is silent already: a restarted server does
/// not tell again what it told before.
public struct SilenceWatch: Sendable, Hashable {
    /// How long without a request makes a device silent.
    public var threshold: Int64
    private var told: [String: Set<String>] = [:]
    private var primed = false

    public init(threshold: Int64) { self.threshold = threshold }

    /// Looks at every device at `now`; returns one event per app with newly silent devices.
    public mutating func look(_ devices: [Device], now: Int64) -> [WebhookEventDraft] {
        var silent: [String: [Device]] = [:]
        for device in devices where !device.disabled && now - (device.lastSeenAt ?? device.enrolledAt) > threshold {
            for app in device.apps { silent[app, default: []].append(device) }
        }
        defer {
            told = silent.mapValues { Set($0.map(\.id)) }
            primed = true
        }
        guard primed else { return [] }
        return silent.keys.sorted().compactMap { app in
            let all = silent[app] ?? []
            let new = all.filter { !(told[app]?.contains($0.id) ?? false) }
            guard !new.isEmpty else { return nil }
            return WebhookEventDraft(
                type: .devicesSilent, app: app, occurredAt: now,
                data: [
                    "newlySilent": .number(.integer(Int64(new.count))), "silent": .number(.integer(Int64(all.count))),
                    "silentAfterSeconds": .number(.integer(threshold)),
                    "sample": .array(new.prefix(ReportDigest.sampleSize).map { .string($0.id) }),
                ])
        }
    }
}
