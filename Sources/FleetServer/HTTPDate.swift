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
        let (year, month, day) = civilDate(daysSince1970: days)
        let weekday = weekdays[((days % 7) + 7) % 7]
        return
            "\(weekday), \(two(day)) \(months[month - 1]) \(year) \(two(secondOfDay / 3600)):\(two(secondOfDay / 60 % 60)):\(two(secondOfDay % 60)) GMT"
    }

    /// The proleptic Gregorian year, month (1–12) and day (1–31) of a day count from 1970-01-01.
    static func civilDate(daysSince1970 days: Int) -> (year: Int, month: Int, day: Int) {
        let shifted = days + 719_468  // from 0000-03-01
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthFromMarch = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthFromMarch + 2) / 5 + 1
        let month = monthFromMarch < 10 ? monthFromMarch + 3 : monthFromMarch - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    private static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
