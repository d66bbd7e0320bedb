import CHeap
import FleetServerCore
import Logging
import ServiceLifecycle

/// Gives back to the system the memory a burst of requests left free in the allocator.
///
/// When an app-wide change wakes 10,000 long-polls, or a fleet reconnects after a restart, the
/// server's heap grows for the burst; afterwards glibc keeps the freed pages (between live
/// blocks, where its own trimming of the heap's top cannot reach them), and the server's
/// resident memory stays at the burst's size. Every ``interval`` this looks whether a burst
/// has ended — at least ``burst`` jobs ran through the ``WorkGate`` since the last trim, and
/// none runs now — and then calls `malloc_trim(0)`, which returns those pages: measured at
/// 10,000 held long-polls, about 45 MB of 260, in a few milliseconds (its `event=heap-trimmed`
/// debug line says how long). A quiet fleet's trickle of requests makes a burst every minute or
/// so; an idle server never trims.
struct HeapTrimmer: Service, CustomStringConvertible {
    let gate: WorkGate
    /// How often it looks (a lock's read).
    var interval: Duration = .milliseconds(250)
    /// The jobs since the last trim that make a burst.
    var burst = 1000
    let logger: Logger

    var description: String { "HeapTrimmer" }

    /// Whether a burst has ended: at least `burst` jobs were submitted since the last trim (the
    /// count wraps), and none runs now.
    static func burstEnded(submitted: Int, trimmedAt: Int, running: Int, burst: Int) -> Bool {
        submitted &- trimmedAt >= burst && running == 0
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            var trimmedAt = gate.submitted
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                let submitted = gate.submitted
                guard Self.burstEnded(submitted: submitted, trimmedAt: trimmedAt, running: gate.counts.running, burst: burst) else {
                    continue
                }
                trimmedAt = submitted
                let started = ContinuousClock.now
                let released = cheap_release_free_memory() == 1
                logger.debug(
                    "heap trimmed",
                    metadata: ["event": "heap-trimmed", "released": "\(released)", "duration": "\(ContinuousClock.now - started)"])
            }
        }
    }
}
