import Crypto
import FleetDeviceFiles
import FleetIO
import FleetJSON
import FleetProtocol
import FleetVersion

#if canImport(Glibc)
import Glibc
#endif

/// Reads the device's facts (``DeviceInfo``) from the system: `os-release`, `uname`, the
/// machine id (only its keyed hash leaves the device), the boot time, the free space of the
/// state directory, and each app's own facts (`facts.json`).
struct DeviceFacts {
    /// Where the facts are read; tests point these at files of their own.
    struct Sources: Sendable {
        var osRelease = ["/etc/os-release", "/usr/lib/os-release"]
        var machineID = "/etc/machine-id"
        var procStat = "/proc/stat"
    }

    /// The key the machine id is hashed with (as systemd's app-specific ids are): the hash names
    /// the device to fleetset and cannot be turned back into the machine id, or matched with
    /// another program's.
    static let machineIDKey = Array("fleetset device facts".utf8)

    var sources = Sources()

    /// The system facts now, and each app's own.
    func read(stateDirectory: String, layout: DeviceLayout, apps: [String]) -> JSONObject {
        var info = JSONObject()
        let release = Self.osRelease(sources.osRelease.lazy.compactMap { try? FileSystem.readFile($0, maximumSize: 64 << 10) }.first ?? [])
        var os = JSONObject()
        for (fact, field) in [("id", "ID"), ("name", "NAME"), ("version", "VERSION_ID"), ("prettyName", "PRETTY_NAME")] {
            if let value = release[field] { os[fact] = .string(DeviceInfo.reportable(value)) }
        }
        if !os.isEmpty { info["os"] = .object(os) }
        var names = utsname()
        var machine = JSONObject()
        if uname(&names) == 0 {
            info["kernel"] = ["release": .string(DeviceInfo.reportable(Self.field(&names.release)))]
            machine["arch"] = .string(DeviceInfo.reportable(Self.field(&names.machine)))
            machine["hostname"] = .string(DeviceInfo.reportable(Self.field(&names.nodename)))
        }
        if let id = try? FileSystem.readFile(sources.machineID, maximumSize: 4096) {
            let trimmed = String(decoding: id, as: UTF8.self).trimmingCharacters(in: " \n")
            if !trimmed.isEmpty { machine["idHash"] = .string(Self.machineIDHash(trimmed)) }
        }
        if let stat = try? FileSystem.readFile(sources.procStat, maximumSize: 1 << 20), let boot = Self.bootTime(procStat: stat) {
            machine["bootTime"] = .string(Timestamp.format(boot))
        }
        if !machine.isEmpty { info["machine"] = .object(machine) }
        info["agent"] = ["version": .string(FleetVersion.current)]
        var space = statvfs()
        if statvfs(stateDirectory, &space) == 0 {
            info["storage"] = ["stateFree": .number(.integer(Int64(space.f_bavail) * Int64(space.f_frsize)))]
        }
        var byApp = JSONObject()
        for app in apps {
            if let facts = Self.appFacts(layout.appFactsFile(app)), !facts.isEmpty { byApp[app] = .object(facts) }
        }
        if !byApp.isEmpty { info["apps"] = .object(byApp) }
        return info
    }

    /// An app's own facts as saved in `facts.json`; `nil` when there are none or they cannot be
    /// read. Each as ``DeviceInfo/reportable(_:)`` makes it (a file kept before the server
    /// refused control characters may hold some).
    static func appFacts(_ path: String) -> JSONObject? {
        guard let bytes = try? FileSystem.readFileIfPresent(path, maximumSize: 64 << 10),
            case .object(var facts)? = try? JSONParser.parse(bytes)
        else { return nil }
        for (name, value) in facts { if case .string(let text) = value { facts[name] = .string(DeviceInfo.reportable(text)) } }
        return facts
    }

    /// The fields of an `os-release` file: `KEY=value`, values optionally in single or double
    /// quotes, with `\` escapes inside double quotes; comments and malformed lines skipped.
    static func osRelease(_ bytes: [UInt8]) -> [String: String] {
        var fields: [String: String] = [:]
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
            let text = line.trimmingCharacters(in: " \t\r")
            guard !text.hasPrefix("#"), let equals = text.firstIndex(of: "=") else { continue }
            let key = String(text[..<equals])
            guard !key.isEmpty, key.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else { continue }
            var value = Substring(text[text.index(after: equals)...])
            if let quote = value.first, quote == "\"" || quote == "'" {
                guard value.count >= 2, value.last == quote else { continue }
                value = value.dropFirst().dropLast()
                if quote == "\"" {
                    var unescaped = ""
                    var escaping = false
                    for character in value {
                        if escaping || character != "\\" {
                            unescaped.append(character)
                            escaping = false
                        } else {
                            escaping = true
                        }
                    }
                    value = Substring(unescaped)
                }
            }
            fields[key] = String(value)
        }
        return fields
    }

    /// The boot time from `/proc/stat`'s `btime` line, in seconds since the epoch.
    static func bootTime(procStat bytes: [UInt8]) -> Int64? {
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where line.hasPrefix("btime ") {
            return Int64(line.dropFirst(6).trimmingCharacters(in: " "))
        }
        return nil
    }

    /// HMAC-SHA256 of the machine id with ``machineIDKey``, the first 128 bits in hex.
    static func machineIDHash(_ machineID: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Array(machineID.utf8), using: SymmetricKey(data: machineIDKey))
        return code.prefix(16).lowercaseHex
    }

    private static func field<T>(_ value: inout T) -> String {
        withUnsafeBytes(of: &value) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
    }
}
