import FleetDeviceState
import FleetIO
import FleetJSON
import FleetMetadata
import FleetProtocol

/// What was found on disk for an app's settings at start-up, and what is served from it.
public struct SettingsOnDisk: Sendable {
    /// Which generation is served.
    public enum Source: Sendable, Equatable {
        /// `settings.json` itself.
        case current
        /// `settings.json` was missing, torn or invalid: the previous generation is served.
        case previous
        /// Nothing usable on disk.
        case none
    }

    /// The settings to serve, `nil` when there are none.
    public var settings: DeviceSettings?
    public var source: Source
    /// Why `settings.json` was not used (empty when it was, or when there was none at all).
    public var problems: [String]

    /// Reads the settings of `app` from `file`, falling back to the previous generation when the
    /// current one is missing, not JSON, not a settings document of this app, or refused by
    /// `check` (which returns the reasons, empty when the document is good).
    public static func load(_ file: GenerationFile, app: String, check: (DeviceSettings) -> [String] = { _ in [] }) -> SettingsOnDisk {
        var problems: [String] = []
        func read(_ path: String, _ bytes: () throws(FileError) -> [UInt8]?) -> DeviceSettings? {
            let data: [UInt8]
            do {
                guard let found = try bytes() else {
                    problems.append("\(path): missing")
                    return nil
                }
                data = found
            } catch {
                problems.append("\(error)")
                return nil
            }
            let settings: DeviceSettings
            do {
                settings = try DeviceSettings(json: try JSONParser.parse(data))
            } catch {
                problems.append("\(path): \(error)")
                return nil
            }
            guard settings.app == app else {
                problems.append("\(path): /app: the settings are for \"\(settings.app)\", not \"\(app)\"")
                return nil
            }
            let reasons = check(settings)
            guard reasons.isEmpty else {
                problems += reasons.map { "\(path): \($0)" }
                return nil
            }
            return settings
        }
        if let current = read(file.path, { () throws(FileError) in try file.readCurrent() }) {
            return SettingsOnDisk(settings: current, source: .current, problems: [])
        }
        let currentProblems = problems
        if let previous = read(file.previousPath, { () throws(FileError) in try file.readPrevious() }) {
            return SettingsOnDisk(settings: previous, source: .previous, problems: currentProblems)
        }
        // Nothing on disk at all is a first start, not a problem.
        let neverWritten = problems.allSatisfy { $0.hasSuffix(": missing") }
        return SettingsOnDisk(settings: nil, source: .none, problems: neverWritten ? [] : problems)
    }
}

/// The metadata documents kept beside the settings.
public enum MetadataOnDisk {
    /// The stored metadata whose version is `version` (the current generation, else the
    /// previous), or `nil` when neither is that version or readable.
    public static func load(_ file: GenerationFile, version: Int64) -> Metadata? {
        for bytes in [try? file.readCurrent(), try? file.readPrevious()] {
            guard let bytes = bytes ?? nil, let metadata = try? Metadata(json: bytes), metadata.version == version else { continue }
            return metadata
        }
        return nil
    }

    /// The current generation, whatever its version, or `nil`.
    public static func loadCurrent(_ file: GenerationFile) -> Metadata? {
        guard let bytes = try? file.readCurrent() else { return nil }
        return try? Metadata(json: bytes)
    }
}
