#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A POSIX thread of its own, for work that blocks (a `curl_multi_poll` loop, `waitpid`, an
/// inotify `read`), which must never run on the Swift concurrency pool.
public enum DetachedThread {
    /// Starts a detached thread that runs `body` and ends with it. `body` (and what it captures)
    /// lives until the thread ends.
    ///
    /// - Returns: 0, or the `pthread_create` error number when no thread could be started
    ///   (`body` is then released without running).
    @discardableResult
    public static func start(_ body: @escaping @Sendable () -> Void) -> Int32 {
        let box = Unmanaged.passRetained(Body(body)).toOpaque()
        var thread = pthread_t()
        let started = pthread_create(
            &thread, nil,
            { context in
                let body = Unmanaged<Body>.fromOpaque(context!).takeRetainedValue()
                body.run()
                return nil
            }, box)
        guard started == 0 else {
            Unmanaged<Body>.fromOpaque(box).release()
            return started
        }
        pthread_detach(thread)
        return 0
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
