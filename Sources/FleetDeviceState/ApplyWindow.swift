/// When new settings may be applied, in the device's local time: days of the week and a time
/// of day, as an app's `applyWindows` names them.
///
/// The text is `DAYS HH:MM-HH:MM` (seconds may be added: `HH:MM:SS`), where `DAYS` is `daily`,
/// one day (`Mon`), a range (`Mon-Fri`, `Fri-Mon` wraps) or a list of these (`Sat,Sun`,
/// `Mon-Wed,Fri`). A window that ends before it starts crosses midnight: `Fri 22:00-02:00` is
/// Friday 22:00 to Saturday 02:00. `24:00` ends a window at midnight. Days are English
/// three-letter names, in any case.
///
/// A value: the agent asks it with local seconds (seconds since the epoch plus the UTC offset
/// in force), so it is tested with any clock, and a change of time zone or daylight saving
/// applies at the next question.
public struct ApplyWindow: Sendable, Hashable, CustomStringConvertible {
    /// Days it opens on, 0 = Sunday … 6 = Saturday.
    public let days: Set<Int>
    /// Seconds after local midnight it opens.
    public let start: Int
    /// Seconds after local midnight it closes (may be ≤ `start`: it closes the next day).
    public let end: Int
    /// The text it was read from.
    public let description: String

    static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]
    static let secondsPerDay: Int64 = 86_400

    /// Reads `text`; `nil` when it is not a window.
    public init?(_ text: String) {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2 else { return nil }
        guard let days = Self.days(String(parts[0])) else { return nil }
        let times = parts[1].split(separator: "-", omittingEmptySubsequences: false)
        guard times.count == 2, let start = Self.seconds(String(times[0]), allowing24: false),
            let end = Self.seconds(String(times[1]), allowing24: true), start != end
        else { return nil }
        self.days = days
        self.start = start
        self.end = end
        description = text
    }

    /// Whether the window is open at `localSeconds` (seconds since the epoch, shifted to local time).
    public func isOpen(atLocal localSeconds: Int64) -> Bool {
        let (day, second) = Self.dayAndSecond(localSeconds)
        if start < end { return days.contains(day) && second >= start && second < end }
        // Crosses midnight: the evening of a listed day, or the morning after one.
        return (days.contains(day) && second >= start) || (days.contains((day + 6) % 7) && second < end)
    }

    /// The first local second at or after `localSeconds` when the window is open (within the
    /// next eight days; it opens at least weekly).
    public func nextOpening(atOrAfterLocal localSeconds: Int64) -> Int64 {
        if isOpen(atLocal: localSeconds) { return localSeconds }
        let (day, second) = Self.dayAndSecond(localSeconds)
        let midnight = localSeconds - Int64(second)
        for offset in 0...7 {
            let candidateDay = (day + offset) % 7
            let opening = midnight + Int64(offset) * Self.secondsPerDay + Int64(start)
            if days.contains(candidateDay), opening > localSeconds { return opening }
        }
        return localSeconds + 7 * Self.secondsPerDay
    }

    /// The day of the week (0 = Sunday) and the second of the day of `localSeconds`.
    static func dayAndSecond(_ localSeconds: Int64) -> (day: Int, second: Int) {
        let days = localSeconds >= 0 ? localSeconds / secondsPerDay : (localSeconds - secondsPerDay + 1) / secondsPerDay
        let second = Int(localSeconds - days * secondsPerDay)
        // 1970-01-01 was a Thursday (4).
        let day = Int(((days + 4) % 7 + 7) % 7)
        return (day, second)
    }

    private static func days(_ text: String) -> Set<Int>? {
        if text.lowercased() == "daily" { return Set(0...6) }
        var days: Set<Int> = []
        for item in text.lowercased().split(separator: ",", omittingEmptySubsequences: false) {
            let bounds = item.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count), let first = dayNames.firstIndex(of: String(bounds[0])),
                let last = dayNames.firstIndex(of: String(bounds[bounds.count - 1]))
            else { return nil }
            var day = first
            while true {
                days.insert(day)
                if day == last { break }
                day = (day + 1) % 7
            }
        }
        return days.isEmpty ? nil : days
    }

    private static func seconds(_ text: String, allowing24: Bool) -> Int? {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(fields.count), fields.allSatisfy({ $0.count == 2 && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let hours = Int(fields[0]), let minutes = Int(fields[1]), (0..<60).contains(minutes)
        else { return nil }
        let seconds = fields.count == 3 ? Int(fields[2]) : 0
        guard let seconds, (0..<60).contains(seconds) else { return nil }
        if hours == 24, allowing24, minutes == 0, seconds == 0 { return 86_400 }
        guard (0..<24).contains(hours) else { return nil }
        return hours * 3600 + minutes * 60 + seconds
    }
}

extension [ApplyWindow] {
    /// Whether settings may be applied at `localSeconds`: always when no window is named.
    public func allowApplying(atLocal localSeconds: Int64) -> Bool {
        isEmpty || contains { $0.isOpen(atLocal: localSeconds) }
    }

    /// The first local second at or after `localSeconds` when one of the windows is open.
    public func nextOpening(atOrAfterLocal localSeconds: Int64) -> Int64 {
        map { $0.nextOpening(atOrAfterLocal: localSeconds) }.min() ?? localSeconds
    }
}
