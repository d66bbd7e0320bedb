import Logging
import Synchronization

/// The lowest level logged, shared by every handler made with it, and changeable while the
/// program runs: `fleetsetd` sets it from `logLevel` at start and again when SIGHUP re-reads
/// the configuration.
public final class LogLevelSwitch: Sendable {
    private let level: Mutex<Logger.Level>

    /// A switch at `level`.
    public init(_ level: Logger.Level) { self.level = Mutex(level) }

    /// The level now.
    public var current: Logger.Level { level.withLock { $0 } }

    /// Sets the level for every handler of this switch, from the next message on.
    public func set(_ newLevel: Logger.Level) { level.withLock { $0 = newLevel } }
}
