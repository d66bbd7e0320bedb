import FleetServerCore

#if canImport(Glibc)
import Glibc
#endif

/// The system's real-time clock.
public struct SystemWallClock: WallClock {
    public init() {}

    public func secondsSinceEpoch() -> Int64 {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return Int64(spec.tv_sec)
    }
}
