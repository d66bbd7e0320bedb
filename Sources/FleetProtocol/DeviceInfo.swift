import FleetJSON

/// What a device is: the facts its agent reports (`PATCH /v1/device/info`, a JSON merge patch
/// of only the facts that changed) and the server keeps, shows (`admin devices`, the console,
/// `explain`) and filters by (``DeviceInfoFilter``).
///
/// ```json
/// {"os": {"id": "debian", "name": "Debian GNU/Linux", "version": "12", "prettyName": "Debian GNU/Linux 12 (bookworm)"},
///  "kernel": {"release": "6.1.0-28-amd64"},
///  "machine": {"arch": "x86_64", "hostname": "kiosk-17", "idHash": "…", "bootTime": "2026-11-25T06:00:00Z"},
///  "agent": {"version": "0.20.0"},
///  "storage": {"stateFree": 1234567890},
///  "apps": {"kiosk": {"version": "2.3.1"}}}
/// ```
///
/// A fact's dotted name (`os.version`, `apps.kiosk.version`) is how admins name it. Every fact is
/// a string of at most ``maximumFactLength`` characters, except `storage.stateFree` (bytes free
/// in the agent's state directory). `apps` holds each app's own facts (``maximumAppFacts`` at
/// most, names of `A-Z a-z 0-9 _ -`), which only a device the app is given may set. Facts are
/// never secret: every admin sees them as they are.
public enum DeviceInfo {
    /// The system facts, by group: what the agent reads from the device.
    public static let systemFacts: [String: Set<String>] = [
        "os": ["id", "name", "version", "prettyName"],
        "kernel": ["release"],
        "machine": ["arch", "hostname", "idHash", "bootTime"],
        "agent": ["version"],
        "storage": ["stateFree"],
    ]
    /// The facts whose values are integers (the rest are strings).
    public static let integerFacts: Set<String> = ["storage.stateFree"]
    /// The most facts one app may set.
    public static let maximumAppFacts = 32
    /// The longest fact value, in characters.
    public static let maximumFactLength = 256
    /// The longest name of an app's fact.
    public static let maximumNameLength = 64
    /// The largest stored info, as JSON text: 16 KiB.
    public static let maximumSize = 16 << 10

    /// The characters an app's fact name may use (no `.`, which separates a dotted name).
    public static let nameCharacters = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-".unicodeScalars)

    /// Whether `name` may name an app's fact.
    public static func isValidName(_ name: String) -> Bool {
        (1...maximumNameLength).contains(name.unicodeScalars.count) && name.unicodeScalars.allSatisfy(nameCharacters.contains)
    }

    /// Checks a patch a device sends: known groups and facts of the right type, `null` to remove
    /// one. A fact is one line shown to admins: it holds no control character (not even `\n` or
    /// `\t`), DEL, C1 control or bidirectional control (``TerminalText``). Under `apps`, the facts of an app the device is not given (`apps`) are left out of
    /// the patch returned, not refused: a stale app in the agent's configuration must not hold
    /// back the device's other facts.
    ///
    /// - Throws: the first problem, at its JSON pointer.
    public static func checkPatch(_ patch: JSONValue, apps: [String]) throws(DocumentError) -> JSONObject {
        guard case .object(var object) = patch else { throw DocumentError(at: .root, "must be an object of fact groups") }
        for (group, members) in object {
            let location = JSONPointer.root.appending(group)
            if group == "apps" {
                if members != .null { try checkAppFacts(members, at: location) }
                continue
            }
            guard let names = systemFacts[group] else {
                throw DocumentError(at: location, "is not a fact group (\((systemFacts.keys.sorted() + ["apps"]).joined(separator: ", ")))")
            }
            if members == .null { continue }
            guard case .object(let facts) = members else { throw DocumentError(at: location, "must be an object of facts") }
            for (name, value) in facts {
                guard names.contains(name) else {
                    throw DocumentError(
                        at: location.appending(name), "is not a fact of \(group) (\(names.sorted().joined(separator: ", ")))")
                }
                try checkValue(value, integer: integerFacts.contains("\(group).\(name)"), at: location.appending(name))
            }
        }
        if case .object(var byApp)? = object["apps"] {
            for (app, facts) in byApp where !apps.contains(app) {
                if case .null = facts { continue }  // removing an app's facts is always allowed
                byApp[app] = nil
            }
            object["apps"] = .object(byApp)
        }
        return object
    }

    /// `info` with only the facts of the apps in `apps` (a device whose apps changed keeps
    /// the others stored, unseen).
    public static func visible(_ info: JSONObject, apps: [String]) -> JSONObject {
        guard case .object(let byApp)? = info["apps"] else { return info }
        var visible = info
        var kept = JSONObject()
        for (app, facts) in byApp where apps.contains(app) { kept[app] = facts }
        if kept.isEmpty {
            visible["apps"] = nil
        } else {
            visible["apps"] = .object(kept)
        }
        return visible
    }

    private static func checkAppFacts(_ members: JSONValue, at location: JSONPointer) throws(DocumentError) {
        guard case .object(let byApp) = members else { throw DocumentError(at: location, "must be an object of apps") }
        for (app, facts) in byApp {
            let appLocation = location.appending(app)
            if facts == .null { continue }
            guard case .object(let named) = facts else { throw DocumentError(at: appLocation, "must be an object of facts") }
            try checkAppFacts(named, at: appLocation)
        }
    }

    /// Checks one app's facts (or a patch of them): valid names, strings of at most
    /// ``maximumFactLength`` characters without control characters, or `null`.
    public static func checkAppFacts(_ facts: JSONObject, at location: JSONPointer) throws(DocumentError) {
        for (name, value) in facts {
            guard isValidName(name) else {
                throw DocumentError(at: location.appending(name), "must be 1 to \(maximumNameLength) characters of A-Z a-z 0-9 _ -")
            }
            try checkValue(value, integer: false, at: location.appending(name))
        }
    }

    private static func checkValue(_ value: JSONValue, integer: Bool, at location: JSONPointer) throws(DocumentError) {
        switch value {
        case .null:
            return
        case .string(let text) where !integer:
            guard text.unicodeScalars.count <= maximumFactLength else {
                throw DocumentError(at: location, "must be at most \(maximumFactLength) characters long")
            }
            try TerminalText.check(text, at: location)
        case .number(let number) where integer:
            guard number.isInteger, let bytes = number.int64Value, bytes >= 0 else {
                throw DocumentError(at: location, "must be a non-negative integer")
            }
        default:
            throw DocumentError(at: location, integer ? "must be a non-negative integer or null" : "must be a string or null")
        }
    }

    /// `info` with a checked patch (``checkPatch(_:apps:)``) applied; groups left empty go.
    ///
    /// - Throws: when an app would hold more than ``maximumAppFacts`` facts, or the whole more
    ///   than ``maximumSize`` bytes.
    public static func applying(_ patch: JSONObject, to info: JSONObject) throws(DocumentError) -> JSONObject {
        guard case .object(var merged) = JSONValue.object(info).applyingMergePatch(.object(patch)) else { return info }
        for (group, members) in merged where members.objectValue?.isEmpty == true { merged[group] = nil }
        if case .object(var byApp)? = merged["apps"] {
            for (app, facts) in byApp {
                let count = facts.objectValue?.count ?? 0
                if count == 0 { byApp[app] = nil }
                guard count <= maximumAppFacts else {
                    throw DocumentError(
                        at: JSONPointer.root.appending("apps").appending(app), "may hold at most \(maximumAppFacts) facts, not \(count)")
                }
            }
            if byApp.isEmpty {
                merged["apps"] = nil
            } else {
                merged["apps"] = .object(byApp)
            }
        }
        let size = JSONValue.object(merged).serialized().utf8.count
        guard size <= maximumSize else {
            throw DocumentError(at: .root, "the device's facts would take \(size) bytes, more than \(maximumSize)")
        }
        return merged
    }

    /// `text` as a device reports it as a fact: every character a server refuses in one shown as
    /// its escape (``TerminalText/escaped(_:keepingNewlinesAndTabs:)``), then cut to
    /// ``maximumFactLength`` characters: a fact the server refuses would hold back every other.
    public static func reportable(_ text: String) -> String {
        let shown = TerminalText.escaped(text)
        guard shown.unicodeScalars.count > maximumFactLength else { return shown }
        return String(String.UnicodeScalarView(shown.unicodeScalars.prefix(maximumFactLength)))
    }

    /// Every fact by its dotted name (`os.version`), sorted by name; integers in decimal.
    public static func facts(_ info: JSONObject) -> [(name: String, value: String)] {
        var facts: [(name: String, value: String)] = []
        func collect(_ value: JSONValue, _ prefix: String) {
            switch value {
            case .object(let object):
                for key in object.keys { collect(object[key] ?? .null, prefix.isEmpty ? key : prefix + "." + key) }
            case .string(let text):
                facts.append((prefix, text))
            default:
                facts.append((prefix, value.serialized()))
            }
        }
        collect(.object(info), "")
        return facts.sorted { $0.name < $1.name }
    }

    /// The fact with dotted name `name`, as ``facts(_:)`` shows it.
    public static func fact(_ name: String, in info: JSONObject) -> String? {
        var current = JSONValue.object(info)
        for part in name.split(separator: ".", omittingEmptySubsequences: false) {
            guard case .object(let object) = current, let next = object[String(part)] else { return nil }
            current = next
        }
        switch current {
        case .string(let text): return text
        case .object, .array, .null: return nil
        default: return current.serialized()
        }
    }

    /// A one-line summary for lists: `Debian GNU/Linux 12, x86_64, agent 0.20.0`.
    public static func summary(_ info: JSONObject) -> String {
        let os = [fact("os.name", in: info), fact("os.version", in: info)].compactMap(\.self).joined(separator: " ")
        var parts = [os, fact("machine.arch", in: info) ?? ""].filter { !$0.isEmpty }
        if let agent = fact("agent.version", in: info) { parts.append("agent \(agent)") }
        return parts.joined(separator: ", ")
    }
}

/// The headers of protocol v1 beyond HTTP's own.
public enum FleetHeader {
    /// On a settings answer: the admin asked the device to rotate its token (`requested`).
    public static let rotateToken = "Fleetset-Rotate-Token"
    /// On a settings request: the ``DevicePolicy/tag`` of the policy the agent has (`0`: none).
    /// On the answer: the tag of the device's policy now, sent only when it differs, so that
    /// the agent fetches `GET /v1/device/policy` only when it changed.
    public static let policy = "Fleetset-Policy"
    /// On a settings answer: the server is busy; send the next request after this many
    /// seconds, not at once.
    public static let nextPoll = "Fleetset-Next-Poll"
    /// On a settings request: the status report of the revision the device applied last, so
    /// that it needs no `POST …/status` of its own (``StatusOnPoll``). Sent only to a server
    /// that answered with ``accepts``.
    public static let status = "Fleetset-Status"
    /// On every settings answer (200 and 304) of a server that records a report sent in
    /// ``status``: `status` (a comma-separated list, for what later servers take).
    public static let accepts = "Fleetset-Accepts"
}
