#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A value guarded by a `pthread_mutex_t`: the lock fleetset's own code uses.
///
/// Not `Synchronization.Mutex`: on Linux that lock is a futex inside the (uninstrumented) Swift
/// runtime, so ThreadSanitizer cannot see it and reports every access it guards as a race
/// (Swift 6.3.1; a nine-line program shows it). `pthread_mutex_lock` is intercepted by the
/// sanitizer, so `scripts/sanitize thread` checks the code that uses this type for real.
public final class Locked<Value>: @unchecked Sendable {
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the value, holding the lock. `body` must not block for long or take the
    /// same lock again.
    public func withLock<Result, Failure: Error>(_ body: (inout Value) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
