import FleetJSON
import PosixThreads

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The `Date` header's text (RFC 9110's IMF-fixdate), made once a second.
final class HTTPDateCache: Sendable {
    private let cached = Locked<(second: Int, text: String)>((-1, ""))

    /// The date now, as `Sun, 06 Nov 1994 08:49:37 GMT`.
    func now() -> String {
        let second = time(nil)
        return cached.withLock { cached in
            if cached.second != second { cached = (second, HTTPDate.text(secondsSince1970: second)) }
            return cached.text
        }
    }
}

/// Formats HTTP dates without a calendar library.
enum HTTPDate {
    private static let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `seconds` since 1970-01-01 00:00 UTC as an IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func text(secondsSince1970 seconds: Int) -> String {
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = Timestamp.civilDate(daysSinceEpoch: Int64(days))
        let clock = "\(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60))"
        let weekday = weekdays[((days % 7) + 7) % 7]
        return "\(weekday), \(two(Int(day))) \(months[Int(month) - 1]) \(year) \(clock) GMT"
    }

    private static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
