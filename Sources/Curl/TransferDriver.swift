import PosixThreads
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Runs every transfer of one ``HTTPClient`` on a dedicated thread that drives a `curl_multi`
/// handle, so no network call ever blocks the Swift concurrency pool.
///
/// Tasks talk to the thread through a locked inbox (new transfers, cancellations, shutdown)
/// and ``MultiHandle/wakeup()``, which makes the thread's wait return at once; that is what
/// makes cancellation take effect within milliseconds. The thread waits on the sockets libcurl
/// asks for (its multi_socket API), so one client can hold thousands of transfers.
final class TransferDriver: TaskExecutor, Sendable {
    private struct Inbox {
        var added: [Transfer] = []
        var cancelled: [Transfer] = []
        var shuttingDown = false
        var stopped = false
        var stopWaiters: [CheckedContinuation<Void, Never>] = []
        /// Work of tasks that prefer this thread (``HTTPClient/executor``), run between transfers.
        var jobs: [UnownedJob] = []
    }

    /// The transfer thread's name, as `top -H` shows it.
    static let threadName = "fleetset-http"

    private let multi: MultiHandle
    private let inbox = Locked(Inbox())
    /// The driver thread's ``PosixThreads/DetachedThread/currentID`` (0 until it runs). What is
    /// handed over on that thread itself (a job submitting its next transfer, an answer resuming
    /// a task that prefers this executor) needs no wakeup: the loop does not wait while its inbox
    /// holds anything.
    private let driverThread = Atomic<UInt>(0)

    /// The longest wait when nothing is due (``HTTPClient/Configuration/safetyNetWait``), in ms.
    private let safetyNetMilliseconds: Int32

    /// Creates the multi handle and starts the driver thread.
    init(safetyNetWait: Duration) throws(HTTPClientError) {
        safetyNetMilliseconds = Int32(clamping: safetyNetWait.wholeMilliseconds)
        multi = try MultiHandle()
        // The thread holds the driver until its loop ends.
        let started = DetachedThread.start(named: Self.threadName) { [self] in runLoop() }
        guard started == 0 else {
            throw HTTPClientError(
                kind: .libraryUnusable, message: "could not start the HTTP client's thread (error \(started))", call: "pthread_create")
        }
    }

    /// Hands a configured transfer to the thread; `continuation` is resumed with its outcome.
    func submit(_ transfer: Transfer, continuation: CheckedContinuation<HTTPClient.Response, any Error>) {
        let accepted = inbox.withLock { inbox in
            guard !inbox.shuttingDown else { return false }
            transfer.continuation = continuation
            inbox.added.append(transfer)
            return true
        }
        guard accepted else {
            continuation.resume(
                throwing: HTTPClientError(
                    kind: .clientShutDown, message: "the HTTP client was shut down before the request to \(transfer.url.text) started",
                    url: transfer.url.text))
            return
        }
        wakeUnlessOnDriverThread()
    }

    /// Makes the thread's wait return at once, unless this is the thread: it looks at its inbox
    /// before it waits, and does not wait while the inbox holds anything.
    private func wakeUnlessOnDriverThread() {
        guard driverThread.load(ordering: .relaxed) != DetachedThread.currentID else { return }
        multi.wakeup()
    }

    /// Aborts a transfer: the thread removes it from libcurl and its task gets `CancellationError`.
    func cancel(_ transfer: Transfer) {
        transfer.markCancelled()
        inbox.withLock { $0.cancelled.append(transfer) }
        wakeUnlessOnDriverThread()
    }

    /// Asks the thread to fail every pending transfer and end, without waiting for it.
    func requestShutdown() {
        inbox.withLock { $0.shuttingDown = true }
        multi.wakeup()
    }

    /// Fails every pending transfer with `clientShutDown` and returns once the thread has ended.
    func shutdown() async {
        await withCheckedContinuation { (waiter: CheckedContinuation<Void, Never>) in
            let alreadyStopped = inbox.withLock { inbox in
                inbox.shuttingDown = true
                if inbox.stopped { return true }
                inbox.stopWaiters.append(waiter)
                return false
            }
            if alreadyStopped { waiter.resume() } else { multi.wakeup() }
        }
    }

    // MARK: The driver thread

    private func runLoop() {
        driverThread.store(DetachedThread.currentID, ordering: .relaxed)
        var active: [UnsafeMutableRawPointer: Transfer] = [:]
        // Transfers whose start delay has not passed: handed to libcurl when it has.
        var waiting: [Transfer] = []
        while true {
            let (added, cancelled, shuttingDown, jobs) = inbox.withLock { inbox in
                defer {
                    inbox.added = []
                    inbox.cancelled = []
                    inbox.jobs = []
                }
                return (inbox.added, inbox.cancelled, inbox.shuttingDown, inbox.jobs)
            }
            // What the jobs start (transfers, cancellations, more jobs) is in the inbox, which
            // makes this iteration's wait return at once (below).
            for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
            for transfer in cancelled {
                if let index = waiting.firstIndex(where: { $0 === transfer }) {
                    waiting.remove(at: index).complete(.failure(CancellationError()))
                    continue
                }
                guard let transfer = active.removeValue(forKey: transfer.easy.raw) else { continue }
                multi.remove(transfer.easy)
                transfer.complete(.failure(CancellationError()))
            }
            waiting += added
            let now = MonotonicTime.now()
            var stillWaiting: [Transfer] = []
            for transfer in waiting {
                if transfer.isCancelled {
                    transfer.complete(.failure(CancellationError()))
                    continue
                }
                if let start = transfer.startAt, start > now {
                    stillWaiting.append(transfer)
                    continue
                }
                do {
                    try multi.add(transfer.easy)
                    if transfer.firstSentAt == nil { transfer.firstSentAt = now }
                    active[transfer.easy.raw] = transfer
                } catch {
                    transfer.complete(.failure(error))
                }
            }
            waiting = stillWaiting
            if shuttingDown {
                for transfer in waiting {
                    transfer.complete(
                        .failure(
                            HTTPClientError(kind: .clientShutDown, message: "the HTTP client was shut down before the request started")))
                }
                break
            }
            do {
                // Wake up at least every second (the safety net) even if libcurl has no timer, and
                // when the next waiting transfer may start.
                var wait = safetyNetMilliseconds
                if let nextStart = waiting.lazy.compactMap(\.startAt).min() {
                    let milliseconds = (nextStart - min(nextStart, MonotonicTime.now()) + 999_999) / 1_000_000
                    wait = Int32(min(UInt64(wait), milliseconds))
                }
                // Handed over on this thread since the inbox was taken (no wakeup was sent for
                // it): look at the sockets without waiting, then take it.
                if inbox.withLock({ !$0.added.isEmpty || !$0.cancelled.isEmpty || !$0.jobs.isEmpty || $0.shuttingDown }) { wait = 0 }
                try multi.drive(maxWaitMilliseconds: wait)
                for (easy, result) in multi.finished() {
                    guard let transfer = active.removeValue(forKey: easy) else { continue }
                    multi.remove(transfer.easy)
                    let finishedAt = MonotonicTime.now()
                    if let delay = transfer.takeRepeat(after: result, now: finishedAt) {
                        // Unchanged, and the request's plan sends it again: nobody is woken.
                        transfer.startAt = finishedAt &+ UInt64(clamping: delay.nanoseconds)
                        waiting.append(transfer)
                        continue
                    }
                    transfer.complete(transfer.outcome(result))
                }
            } catch {
                // The engine itself failed (out of memory): fail what is in flight, keep serving.
                failAll(&active, with: error)
            }
        }
        failAll(
            &active, with: HTTPClientError(kind: .clientShutDown, message: "the HTTP client was shut down while the request was in flight"))
        // The last drain saw `shuttingDown`, and `submit` refuses new transfers once it is set,
        // so nothing is left in the inbox but the callers waiting for the thread to end.
        let (waiters, jobs) = inbox.withLock { inbox in
            inbox.stopped = true
            defer {
                inbox.stopWaiters = []
                inbox.jobs = []
            }
            return (inbox.stopWaiters, inbox.jobs)
        }
        for job in jobs { job.runSynchronously(on: asUnownedTaskExecutor()) }
        for waiter in waiters { waiter.resume() }
    }

    /// Runs a job of a task that prefers this thread: the task's own work goes on the thread
    /// that completes its transfers, so an answer resumes it with no switch to another thread.
    /// Once the thread has ended (the client was shut down), a job runs at once on the thread
    /// that enqueues it: a task that prefers a stopped client is never left waiting.
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let stopped = inbox.withLock { inbox in
            if inbox.stopped { return true }
            inbox.jobs.append(job)
            return false
        }
        if stopped { job.runSynchronously(on: asUnownedTaskExecutor()) } else { wakeUnlessOnDriverThread() }
    }

    private func failAll(_ active: inout [UnsafeMutableRawPointer: Transfer], with error: any Error) {
        for transfer in active.values {
            multi.remove(transfer.easy)
            transfer.complete(.failure(error))
        }
        active.removeAll()
    }
}
