#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A POSIX thread of its own, for work that blocks (a libcurl transfer loop, `waitpid`, an
/// inotify `read`), which must never run on the Swift concurrency pool.
public enum DetachedThread {
    /// Starts a detached thread that runs `body` and ends with it. `body` (and what it captures)
    /// lives until the thread ends.
    ///
    /// - Parameter name: the thread's name as `top -H` and `/proc/PID/task/TID/comm` show it
    ///   (Linux keeps its first 15 bytes).
    /// - Returns: 0, or the `pthread_create` error number when no thread could be started
    ///   (`body` is then released without running).
    @discardableResult
    public static func start(named name: String? = nil, _ body: @escaping @Sendable () -> Void) -> Int32 {
        let box = Unmanaged.passRetained(
            Body {
                if let name { nameCurrentThread(name) }
                body()
            }
        ).toOpaque()
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

    /// The calling thread's identity (`pthread_self()`): the same on every call from one thread,
    /// and different from that of any other thread running meanwhile.
    public static var currentID: UInt {
        #if canImport(Glibc)
        UInt(pthread_self())
        #else
        UInt(bitPattern: pthread_self())
        #endif
    }

    /// Names the calling thread, best effort, through `/proc/thread-self/comm` (Swift's Glibc
    /// module leaves out `pthread_setname_np`, a GNU extension).
    private static func nameCurrentThread(_ name: String) {
        let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return }
        let bytes = Array(name.utf8.prefix(15))
        _ = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        close(descriptor)
    }

    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
}
