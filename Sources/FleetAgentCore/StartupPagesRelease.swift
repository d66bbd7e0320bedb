/// When the agent hands back the pages of its start-up to the kernel (the code and constants
/// only start-up used): once per process, ``settle`` after READY=1, when the loops have settled
/// into their work.
///
/// Each configuration generation (the first, and one per reload) says READY=1 and asks
/// ``delayAfterReady()``; once its delay has passed it asks ``release()``. A generation that ends
/// during its delay (a reload came) asks nothing, so the next generation's READY=1 starts the
/// delay again. Once the pages were handed back, a later generation waits for nothing and hands
/// back nothing.
public struct StartupPagesRelease: Sendable, Equatable {
    /// How long after READY=1 the pages are handed back.
    public static let settle: Duration = .seconds(5)

    /// Whether the pages were handed back already.
    public private(set) var released = false

    public init() {}

    /// How long a generation that said READY=1 waits before it asks ``release()``; nil when the
    /// pages were handed back already, and the generation has nothing to wait for.
    public func delayAfterReady() -> Duration? { released ? nil : Self.settle }

    /// Whether to hand the pages back now, a generation's delay after READY=1 having passed: true
    /// the first time, false ever after.
    public mutating func release() -> Bool {
        defer { released = true }
        return !released
    }
}
