import FleetJSON
import FleetMetadata
import FleetProtocol
import FleetSchema

/// Which stored values of an app break its metadata, and for whom: the check behind a
/// metadata upload (409 `values-invalid`) and every write of values (422 `invalid-values`).
///
/// Values are never valid or invalid on their own: a group's value may only break a rule
/// together with the app's. So the audit builds the effective settings of every *audience* the
/// change reaches — each enrolled device, and the devices that will enroll later — validates
/// them, and names for each error the scope that set the offending value.
public enum ValueAudit {
    /// Whose effective settings are checked.
    public struct Audience: Sendable, Hashable {
        /// For messages: a device id, or a description of devices that will enroll later.
        public let label: String
        public let groups: [String]
        public let deviceID: String?

        /// An enrolled device.
        public static func device(_ device: Device) -> Audience {
            Audience(label: device.id, groups: device.groups, deviceID: device.id)
        }

        /// Devices that enroll later into exactly these groups.
        public static func future(groups: [String]) -> Audience {
            let label = groups.isEmpty ? "new devices in no group" : "new devices in group " + groups.joined(separator: ", ")
            return Audience(label: label, groups: groups, deviceID: nil)
        }
    }

    /// One problem: where in the values, which scope set the value there, and who gets it.
    public struct Finding: Sendable, Hashable {
        public let pointer: JSONPointer
        /// The scope that set the top-level setting the error is in (`nil` for an error about
        /// the whole object, e.g. a missing required setting).
        public let scope: Scope?
        public let message: String
        public var audiences: [String]

        /// The wire form: `/volume`, "set at group:lobby: must be <= 10 (got 12); for d-1, d-2".
        public var detail: ErrorBody.Detail {
            let shown = audiences.prefix(3).joined(separator: ", ")
            let more = audiences.count > 3 ? " and \(audiences.count - 3) more" : ""
            let origin = scope.map { "set at \($0): " } ?? ""
            return ErrorBody.Detail(pointer: pointer.description, message: "\(origin)\(message); for \(shown)\(more)")
        }

        fileprivate var key: FindingKey { FindingKey(pointer: pointer, scope: scope, message: message) }
    }

    /// The findings for `values` (every scope's values of the app) across `audiences`, in the
    /// order first seen.
    public static func findings(metadata: Metadata, values: [Scope: JSONObject], audiences: [Audience]) -> [Finding] {
        var findings: [Finding] = []
        var indexByKey: [FindingKey: Int] = [:]
        var errorsBySignature: [String: [(JSONPointer, Scope?, String)]] = [:]
        for audience in audiences {
            let deviceValues = audience.deviceID.flatMap { values[.device($0)] } ?? [:]
            var groupValues: [String: JSONObject] = [:]
            for group in audience.groups { groupValues[group] = values[.group(group)] }
            // Audiences that see the same layers see the same errors: validate once per layer set.
            let signature = deviceValues.isEmpty ? groupValues.keys.sorted().joined(separator: "\u{0}") : nil
            let errors: [(JSONPointer, Scope?, String)]
            if let signature, let known = errorsBySignature[signature] {
                errors = known
            } else {
                let effective = EffectiveSettings(
                    metadata: metadata, app: values[.app] ?? [:], groups: groupValues, device: deviceValues,
                    deviceID: audience.deviceID ?? "")
                errors = metadata.validate(values: .object(effective.values)).map { error in
                    (error.instanceLocation, effective.source(of: error.instanceLocation), error.message)
                }
                if let signature { errorsBySignature[signature] = errors }
            }
            for (pointer, scope, message) in errors {
                let key = FindingKey(pointer: pointer, scope: scope, message: message)
                if let index = indexByKey[key] {
                    if findings[index].audiences.last != audience.label { findings[index].audiences.append(audience.label) }
                } else {
                    indexByKey[key] = findings.count
                    findings.append(Finding(pointer: pointer, scope: scope, message: message, audiences: [audience.label]))
                }
            }
        }
        return findings
    }

    /// The findings after a change that were not there before it: a write is refused only for
    /// problems it causes, so values that an earlier forced metadata upload made invalid do not
    /// block fixing them one by one.
    public static func newFindings(
        metadata: Metadata, before: [Scope: JSONObject], after: [Scope: JSONObject], audiences: [Audience]
    ) -> [Finding] {
        let old = Set(findings(metadata: metadata, values: before, audiences: audiences).map(\.key))
        return findings(metadata: metadata, values: after, audiences: audiences).filter { !old.contains($0.key) }
    }
}

private struct FindingKey: Hashable {
    let pointer: JSONPointer
    let scope: Scope?
    let message: String
}
