import FleetIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A process's memory and CPU time, read from `/proc/<pid>/status` and `/proc/<pid>/stat`.
public struct ProcessUsage: Sendable, Equatable {
    /// Resident memory (`VmRSS`), in bytes.
    public var residentBytes: Int64
    /// The most resident memory so far (`VmHWM`), in bytes.
    public var peakResidentBytes: Int64
    /// User plus system CPU time so far.
    public var cpu: Duration

    /// The usage of process `pid` now; `nil` when it is gone or `/proc` cannot be read.
    public static func of(pid: Int32) -> ProcessUsage? {
        guard let status = try? FileSystem.readFile("/proc/\(pid)/status"), let stat = try? FileSystem.readFile("/proc/\(pid)/stat") else {
            return nil
        }
        return parse(status: String(decoding: status, as: UTF8.self), stat: String(decoding: stat, as: UTF8.self), ticksPerSecond: ticks)
    }

    /// Reads the two files' text; `nil` when they are not as the kernel writes them.
    public static func parse(status: String, stat: String, ticksPerSecond: Int64) -> ProcessUsage? {
        func kilobytes(_ field: String) -> Int64? {
            guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }) else { return nil }
            return line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap { Int64($0) }
        }
        // The command name (field 2) is in parentheses and may hold spaces: count after its end.
        guard let close = stat.lastIndex(of: ")"), let rss = kilobytes("VmRSS"), ticksPerSecond > 0 else { return nil }
        let fields = stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
        guard fields.count > 12, let user = Int64(fields[11]), let system = Int64(fields[12]) else { return nil }
        let ticks = user + system
        return ProcessUsage(
            residentBytes: rss * 1024, peakResidentBytes: (kilobytes("VmHWM") ?? rss) * 1024,
            cpu: .seconds(ticks / ticksPerSecond) + .milliseconds((ticks % ticksPerSecond) * 1000 / ticksPerSecond))
    }

    private static let ticks = Int64(sysconf(Int32(_SC_CLK_TCK)))
}
