import FleetJSON
import FleetProtocol

/// The events a change tells subscribers of, derived from the change itself (pure), so that each
/// store script writes them in the change's own transaction.
extension AppWrite {
    /// A revert's event, and the rollout's when the write moves one on: started (its first
    /// version), a wave admitted (a later wave whose start is this write), paused (by the
    /// rollout's own write: a forced value write that carries a paused rollout tells nothing
    /// again), completed, aborted (each once: an ended rollout is written no more).
    public var webhookEvents: [WebhookEventDraft] {
        var events: [WebhookEventDraft] = []
        let at = change.at
        if change.kind == .revert {
            events.append(WebhookEventDraft(type: .revert, app: app, occurredAt: at, data: ["actor": .string(change.actor)]))
        }
        if let rollout {
            var data: JSONObject = [
                "rollout": .string(rollout.id), "scope": .string(rollout.scope.description), "phase": .string(rollout.phase.rawValue),
                "wave": .number(.integer(Int64(rollout.currentWave + 1))), "waves": .number(.integer(Int64(rollout.waves.count))),
            ]
            if !rollout.reason.isEmpty { data["reason"] = .string(rollout.reason) }
            let type: WebhookEventType? =
                switch rollout.phase {
                case _ where change.kind != .rollout && rollout.phase.isActive: nil
                case .running where rollout.version == 1: .rolloutStarted
                case .running where rollout.currentWave > 0 && rollout.waveStartedAt == at: .rolloutWaveAdmitted
                case .running: nil
                case .paused: .rolloutPaused
                case .completed: .rolloutCompleted
                case .aborted: .rolloutAborted
                }
            if let type { events.append(WebhookEventDraft(type: type, app: app, occurredAt: at, data: data)) }
        }
        return events
    }
}

extension WebhookEventDraft {
    /// New metadata was stored for `app`.
    static func metadataStored(_ metadata: StoredMetadata, at time: Int64) -> WebhookEventDraft {
        WebhookEventDraft(
            type: .metadataStored, app: metadata.app, occurredAt: time, data: ["version": .number(.integer(Int64(metadata.version)))])
    }

    /// An entry of the audit trail: its wire form (what its hash covers) and its hash, so a
    /// receiver can check the chain as `fleetset-server audit verify` does.
    static func audit(_ record: AuditRecord) -> WebhookEventDraft {
        var data: JSONObject = ["hash": .string(record.hash)]
        if case .object(let entry)? = try? JSONParser.parse(Array(record.text.utf8)) { data["entry"] = .object(entry) }
        return WebhookEventDraft(type: .audit, apps: [], occurredAt: record.at, data: data)
    }

    /// Something happened to a device: enrolled, disabled, deleted.
    static func device(_ type: WebhookEventType, _ device: Device, at time: Int64) -> WebhookEventDraft {
        WebhookEventDraft(
            type: type, apps: device.apps, occurredAt: time,
            data: [
                "device": .string(device.id), "apps": .array(device.apps.map(JSONValue.string)),
                "groups": .array(device.groups.map(JSONValue.string)),
            ])
    }
}
