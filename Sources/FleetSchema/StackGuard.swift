import CThreadStack

/// Tells whether the current thread has stack to spare, so that deep recursion ends with an
/// error instead of a crash whatever the thread's stack size (Swift's concurrency threads have
/// far smaller stacks than the main thread, and debug builds use larger frames).
struct StackGuard {
    /// Recursion stops when less than this is left.
    static let reserve = 64 << 10

    /// The lowest usable address of this thread's stack plus the reserve, or `nil` when unknown.
    private let limit: UInt?

    /// Reads the current thread's stack bounds.
    init() {
        var lowest: UnsafeMutableRawPointer?
        var size = 0
        guard cthreadstack_current(&lowest, &size) == 0, let lowest else {
            limit = nil
            return
        }
        limit = UInt(bitPattern: lowest) + UInt(Self.reserve)
    }

    /// Whether the stack (which grows down) still has more than the reserve left here.
    @inline(never)
    func hasRoom() -> Bool {
        guard let limit else { return true }
        return UInt(bitPattern: cthreadstack_position()) > limit
    }
}
