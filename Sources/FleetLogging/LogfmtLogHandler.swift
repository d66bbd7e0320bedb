import FleetIO
import Logging

#if canImport(Glibc)
import Glibc
#endif

/// A swift-log handler that writes one logfmt line per message:
///
/// ```
/// ts=2026-11-22T10:00:00.123Z level=info msg="status report" event=status app=kiosk device=d-… revision=4 state=applied source=agent message="…"
/// ```
///
/// Keys come in a fixed order — `ts`, `level`, `msg`, then the well-known keys (`event`, `app`,
/// `device`, `scope`, `revision`, …), then the rest sorted, and `message` last — so lines of the
/// same event line up. A value is quoted when it is empty or holds a space, `=`, `"` or a
/// control character; `"`, `\` and control characters are escaped, so one message is always
/// one line (journald and log shippers read it as such). Each line is one `write(2)`.
///
/// Under systemd (``Style/journald``) a line starts with the syslog priority in angle brackets
/// (`<6>` for info), which journald strips and keeps as the entry's priority, and has no `ts=`
/// (journald stamps every entry itself).
public struct LogfmtLogHandler: LogHandler {
    /// Where lines go.
    public typealias Sink = @Sendable (String) -> Void

    /// How lines begin.
    public enum Style: Sendable {
        /// `ts=… level=… msg=…`: for a terminal or a file.
        case timestamped
        /// `<6>level=info msg=…`: for standard error connected to journald.
        case journald
    }

    /// The lowest level logged: the one set on this handler, else its switch's current one.
    public var logLevel: Logger.Level {
        get { ownLevel ?? levelSwitch?.current ?? .info }
        set { ownLevel = newValue }
    }
    private var ownLevel: Logger.Level?
    private let levelSwitch: LogLevelSwitch?
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let sink: Sink
    private let style: Style

    /// The keys that come first, in this order, after `ts`, `level` and `msg`.
    static let leadingKeys = ["event", "app", "device", "scope", "version", "revision", "schema_version", "state", "source"]

    /// A handler writing to `sink` (default: standard error).
    public init(level: Logger.Level = .info, style: Style = .timestamped, sink: @escaping Sink = LogfmtLogHandler.standardError) {
        self.ownLevel = level
        self.levelSwitch = nil
        self.style = style
        self.sink = sink
    }

    /// A handler whose level follows `levelSwitch` (until set on the handler itself).
    public init(levelSwitch: LogLevelSwitch, style: Style = .timestamped, sink: @escaping Sink = LogfmtLogHandler.standardError) {
        self.ownLevel = nil
        self.levelSwitch = levelSwitch
        self.style = style
        self.sink = sink
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let own = event.metadata { merged.merge(own) { _, new in new } }
        switch style {
        case .timestamped:
            sink(Self.line(time: Self.now(), level: event.level, message: "\(event.message)", metadata: merged))
        case .journald:
            sink(Self.line(time: nil, level: event.level, message: "\(event.message)", metadata: merged))
        }
    }

    /// One formatted line, with its newline: with `time`, `ts=… level=…`; without,
    /// journald's `<N>level=…` (N the syslog priority of `level`).
    public static func line(time: String?, level: Logger.Level, message: String, metadata: Logger.Metadata) -> String {
        var line = time.map { "ts=\($0) " } ?? "<\(syslogPriority(level))>"
        line += "level=\(level.rawValue) msg=\(quoted(message))"
        var keys = leadingKeys.filter { metadata[$0] != nil }
        keys += metadata.keys.filter { !leadingKeys.contains($0) && $0 != "message" }.sorted()
        if metadata["message"] != nil { keys.append("message") }
        for key in keys {
            guard let value = metadata[key] else { continue }
            line += " \(key)=\(quoted("\(value)"))"
        }
        return line + "\n"
    }

    /// The syslog priority journald files a level under: critical 2, error 3, warning 4,
    /// notice 5, info 6, debug and trace 7.
    public static func syslogPriority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: 2
        case .error: 3
        case .warning: 4
        case .notice: 5
        case .info: 6
        case .debug, .trace: 7
        }
    }

    /// The value as logfmt writes it.
    static func quoted(_ value: String) -> String {
        let needsQuotes =
            value.isEmpty
            || value.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "\\" || $0.value < 0x20 || $0.value == 0x7F }
        guard needsQuotes else { return value }
        var text = "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    text +=
                        "\\u" + String(repeating: "0", count: 4 - String(scalar.value, radix: 16).count) + String(scalar.value, radix: 16)
                } else {
                    text.unicodeScalars.append(scalar)
                }
            }
        }
        return text + "\""
    }

    /// Writes a line to standard error in one call.
    public static let standardError: Sink = { line in
        var bytes = Array(line.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes { buffer in
                retryingOnInterrupt { Glibc.write(2, buffer.baseAddress! + offset, buffer.count - offset) }
            }
            guard written >= 0 else { return }
            offset += written
        }
        bytes.removeAll()
    }

    /// Now, as `2026-11-22T10:00:00.123Z` (UTC, milliseconds).
    static func now() -> String {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        var seconds = time_t(spec.tv_sec)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let milliseconds = Int(spec.tv_nsec / 1_000_000)
        let fraction = String(repeating: "0", count: 3 - String(milliseconds).count) + String(milliseconds)
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}
