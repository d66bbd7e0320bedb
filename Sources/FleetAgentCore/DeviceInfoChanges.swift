import FleetJSON
import FleetProtocol

/// Which of the device's facts to report: a JSON merge patch from the facts the server has taken
/// to the facts now, holding only what changed (`null` for a fact that is gone).
///
/// Free space changes all the time; it is reported again only when it moved by at least a
/// tenth of the value reported, and at least ``freeSpaceStep``, so a device writing logs does
/// not report every few minutes.
public enum DeviceInfoChanges {
    /// The least change of free space that is reported: 64 MiB.
    public static let freeSpaceStep: Int64 = 64 << 20

    /// The merge patch from `reported` to `current`; empty when nothing worth reporting changed.
    public static func patch(reported: JSONObject, current: JSONObject) -> JSONObject {
        difference(reported, current, path: "")
    }

    private static func difference(_ old: JSONObject, _ new: JSONObject, path: String) -> JSONObject {
        var patch = JSONObject()
        for (key, value) in new {
            let name = path.isEmpty ? key : path + "." + key
            switch (old[key], value) {
            case (.object(let before)?, .object(let after)):
                let nested = difference(before, after, path: name)
                if !nested.isEmpty { patch[key] = .object(nested) }
            case (let before?, _) where before == value:
                continue
            case (let before?, _) where DeviceInfo.integerFacts.contains(name):
                if isSignificant(from: before.numberValue?.int64Value, to: value.numberValue?.int64Value) { patch[key] = value }
            default:
                patch[key] = value
            }
        }
        for key in old.keys where new[key] == nil { patch[key] = .null }
        return patch
    }

    /// Whether free space moved enough to be reported again.
    static func isSignificant(from old: Int64?, to new: Int64?) -> Bool {
        guard let old, let new else { return old != new }
        return abs(new - old) >= max(freeSpaceStep, old / 10)
    }
}
