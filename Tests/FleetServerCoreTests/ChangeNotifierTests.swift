import FleetProtocol
import FleetServerCore
import FleetTestWaiting
import PosixThreads
import Testing

@Suite("Change notifier for long-polls")
struct ChangeNotifierTests {
    /// Waits until `app` has `count` waiters (the waiting tasks have registered). It sleeps
    /// between looks rather than yielding: a loop of `Task.yield()` keeps a thread of the shared
    /// pool busy, and starves the other tests' servers and fleets meanwhile. After 30 s the test
    /// fails, saying how many waiters it awaited and how many there were.
    func awaitWaiters(_ notifier: ChangeNotifier, _ app: String, _ count: Int) async throws {
        var waiting = 0
        try await Waiting.until(timeout: .seconds(30), "never saw \(count) waiter(s) of \(app): \(waiting) after 30 s") {
            waiting = await notifier.waiterCount(of: app)
            return waiting == count
        }
    }

    @Test("an app-wide change wakes every waiter of that app, and only of that app")
    func wakes() async throws {
        let notifier = ChangeNotifier()
        let start = await notifier.generation(of: "kiosk", device: "d-1")
        async let first = notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: start)
        async let second = notifier.waitForChange(of: "kiosk", device: "d-2", groups: ["lobby"], after: start)
        try await awaitWaiters(notifier, "kiosk", 2)
        await notifier.changed("signage", scope: .app)
        #expect(await notifier.waiterCount(of: "kiosk") == 2)
        await notifier.changed("kiosk", scope: .app)
        #expect(await first == .changed)
        #expect(await second == .changed)
        #expect(await notifier.lastWakeCount == 2)
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("a device-scope write wakes that device only; a group write the group's devices only")
    func scoped() async throws {
        let notifier = ChangeNotifier()
        var waits: [String: Task<ChangeNotifier.WaitOutcome, Never>] = [:]
        for index in 0..<100 {
            let device = "d-\(index)"
            waits[device] = Task {
                await notifier.waitForChange(of: "kiosk", device: device, groups: index < 10 ? ["lobby"] : [], after: .start)
            }
        }
        try await awaitWaiters(notifier, "kiosk", 100)
        await notifier.changed("kiosk", scope: .device("d-42"))
        #expect(await notifier.lastWakeCount == 1)
        #expect(await waits["d-42"]?.value == .changed)
        await notifier.changed("kiosk", scope: .group("lobby"))
        #expect(await notifier.lastWakeCount == 10)
        for index in 0..<10 { #expect(await waits["d-\(index)"]?.value == .changed) }
        #expect(await notifier.waiterCount(of: "kiosk") == 89)
        await notifier.changed("kiosk", scope: .group("nobody"))
        #expect(await notifier.lastWakeCount == 0)
        await notifier.changed("kiosk", scope: .app)
        #expect(await notifier.lastWakeCount == 89)
    }

    @Test("a change to a device wakes its long-polls in every app")
    func deviceChanged() async throws {
        let notifier = ChangeNotifier()
        async let kiosk = notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start)
        async let signage = notifier.waitForChange(of: "signage", device: "d-1", groups: [], after: .start)
        async let other = notifier.waitForChange(
            of: "kiosk", device: "d-2", groups: [], after: .start, timeout: .milliseconds(200))
        try await awaitWaiters(notifier, "kiosk", 2)
        try await awaitWaiters(notifier, "signage", 1)
        await notifier.deviceChanged("d-1")
        #expect(await notifier.lastWakeCount == 2)
        let (woken, alsoWoken) = await (kiosk, signage)
        #expect(woken == .changed && alsoWoken == .changed)
        #expect(await other == .timedOut)
    }

    @Test("one long-poll per device and app: a newer one replaces the older")
    func replacement() async throws {
        let notifier = ChangeNotifier()
        let older = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 1)
        async let newer = notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start)
        #expect(await older.value == .replaced)
        try await awaitWaiters(notifier, "kiosk", 1)
        await notifier.changed("kiosk", scope: .device("d-1"))
        #expect(await newer == .changed)
    }

    @Test("a policy change wakes the long-polls of its scope, and one whose generation predates it returns at once")
    func policyChanges() async throws {
        let notifier = ChangeNotifier()
        let lobby = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: ["lobby"], after: .start) }
        let other = Task { await notifier.waitForChange(of: "kiosk", device: "d-2", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 2)
        let before = await notifier.generation(of: "kiosk", device: "d-3")
        await notifier.policyChanged(.group("lobby"))
        #expect(await lobby.value == .changed)
        #expect(await notifier.waiterCount(of: "kiosk") == 1, "the device outside the group still waits")
        // Read before the change, waiting after it: not missed.
        #expect(await notifier.waitForChange(of: "kiosk", device: "d-3", groups: [], after: before) == .changed)
        await notifier.policyChanged(.device("d-2"))
        #expect(await other.value == .changed)
    }

    @Test("from its busy limit a long-poll is answered busy at once, before the capacity")
    func busy() async throws {
        let notifier = ChangeNotifier(capacity: 3, busyLimit: 1)
        let first = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 1)
        #expect(await notifier.waitForChange(of: "kiosk", device: "d-2", groups: [], after: .start) == .busy)
        await notifier.changed("kiosk", scope: .app)
        #expect(await first.value == .changed)
        let unlimited = ChangeNotifier(capacity: 10)
        #expect(await unlimited.busyLimit == 10, "no busy limit: the capacity")
    }

    @Test("past its capacity a long-poll is shed at once; one replacing the same device's is not; a freed place is taken again")
    func capacity() async throws {
        let notifier = ChangeNotifier(capacity: 2)
        let first = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start) }
        let second = Task { await notifier.waitForChange(of: "signage", device: "d-2", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 1)
        try await awaitWaiters(notifier, "signage", 1)
        #expect(await notifier.waitForChange(of: "kiosk", device: "d-3", groups: [], after: .start) == .shed)
        #expect(await notifier.heldCount == 2)
        // The same device and app again: it replaces its own, it is not shed.
        let again = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start) }
        #expect(await first.value == .replaced)
        try await awaitWaiters(notifier, "kiosk", 1)
        await notifier.changed("signage", scope: .app)
        #expect(await second.value == .changed)
        let third = Task { await notifier.waitForChange(of: "kiosk", device: "d-3", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 2)
        await notifier.changed("kiosk", scope: .app)
        #expect(await again.value == .changed)
        #expect(await third.value == .changed)
    }

    @Test("a change between reading the generation and waiting is not lost")
    func noLostWakeup() async {
        let notifier = ChangeNotifier()
        let before = await notifier.generation(of: "kiosk", device: "d-1")
        await notifier.changed("kiosk", scope: .device("d-9"))
        #expect(await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: before) == .changed)
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("a change of the device between reading the generation and waiting is not lost either")
    func noLostDeviceChange() async {
        let notifier = ChangeNotifier()
        let before = await notifier.generation(of: "kiosk", device: "d-1")
        await notifier.deviceChanged("d-1")
        #expect(await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: before) == .changed)
        // Another device's change is not this one's.
        let mine = await notifier.generation(of: "kiosk", device: "d-1")
        await notifier.deviceChanged("d-2")
        #expect(await notifier.generation(of: "kiosk", device: "d-1") == mine)
    }

    @Test("cancelling a long-poll removes its waiter")
    func cancellation() async throws {
        let notifier = ChangeNotifier()
        let waiting = Task { await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start) }
        try await awaitWaiters(notifier, "kiosk", 1)
        waiting.cancel()
        #expect(await waiting.value == .cancelled)
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("the timeout ends a wait with no change, and the waiter is gone")
    func timeout() async throws {
        let notifier = ChangeNotifier()
        let outcome = await notifier.waitForChange(
            of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .milliseconds(5))
        #expect(outcome == .timedOut)
        try await awaitWaiters(notifier, "kiosk", 0)
    }

    @Test("a change before the timeout answers at once")
    func changeBeforeTimeout() async throws {
        let notifier = ChangeNotifier()
        async let outcome = notifier.waitForChange(
            of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .seconds(300))
        try await awaitWaiters(notifier, "kiosk", 1)
        await notifier.changed("kiosk", scope: .app)
        #expect(await outcome == .changed)
    }
}

extension ChangeNotifierTests {
    @Test("a shorter timeout registered after a longer one ends first: the one timer is set again for it")
    func timerRearms() async throws {
        let notifier = ChangeNotifier()
        let long = Task {
            await notifier.waitForChange(of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .seconds(120))
        }
        try await awaitWaiters(notifier, "kiosk", 1)
        let short = await notifier.waitForChange(of: "kiosk", device: "d-2", groups: [], after: .start, timeout: .milliseconds(20))
        #expect(short == .timedOut)
        #expect(await notifier.waiterCount(of: "kiosk") == 1)
        await notifier.changed("kiosk", scope: .device("d-1"))
        #expect(await long.value == .changed)
        #expect(await notifier.heldCount == 0)
    }

    @Test("a WaitCancellation ends its wait, whether it comes before the wait or during it, and the waiter is gone")
    func waitCancellation() async throws {
        let notifier = ChangeNotifier()
        let early = WaitCancellation()
        notifier.cancel(early)
        #expect(early.isCancelled)
        let before = await notifier.waitForChange(
            of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .seconds(120), cancellation: early)
        #expect(before == .cancelled)

        let during = WaitCancellation()
        let waiting = Task {
            await notifier.waitForChange(
                of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .seconds(120), cancellation: during)
        }
        let other = Task {
            await notifier.waitForChange(
                of: "kiosk", device: "d-2", groups: [], after: .start, timeout: .seconds(120), cancellation: WaitCancellation())
        }
        try await awaitWaiters(notifier, "kiosk", 2)
        notifier.cancel(during)
        notifier.cancel(during)  // twice is once
        #expect(await waiting.value == .cancelled)
        try await awaitWaiters(notifier, "kiosk", 1)
        await notifier.changed("kiosk", scope: .app)
        #expect(await other.value == .changed)
    }
}

extension ChangeNotifierTests {
    @Test(
        "after many waits ended early (their deadlines left in the queue and then compacted away), the live ones still time out",
        .timeLimit(.minutes(1)))
    func deadlinesAfterCompaction() async throws {
        let notifier = ChangeNotifier()
        for round in 0..<3 {
            // Each round's change moves the app's generation: the next round waits after it.
            let generation = await notifier.generation(of: "kiosk", device: "d-\(round)")
            let waits = (0..<500).map { index in
                Task {
                    await notifier.waitForChange(
                        of: "kiosk", device: "d-\(round)-\(index)", groups: [], after: generation, timeout: .seconds(120))
                }
            }
            try await awaitWaiters(notifier, "kiosk", 500)
            await notifier.changed("kiosk", scope: .app)
            for wait in waits { #expect(await wait.value == .changed) }
        }
        // 1,500 entries of ended waits are queued; the next timeouts run the compaction.
        let after = await notifier.generation(of: "kiosk", device: "d-live")
        for _ in 0..<2 {
            let outcome = await notifier.waitForChange(
                of: "kiosk", device: "d-live", groups: [], after: after, timeout: .milliseconds(20))
            #expect(outcome == .timedOut)
        }
        #expect(await notifier.heldCount == 0)
    }
}

@Suite("Bearer token")
struct BearerTokenTests {
    @Test("the token of a Bearer header, the scheme in any case and spaces around it")
    func accepted() {
        #expect(Authenticator.bearerToken("Bearer fsd_abc") == "fsd_abc")
        #expect(Authenticator.bearerToken("bearer fsd_abc") == "fsd_abc")
        #expect(Authenticator.bearerToken("BEARER   fsd_abc  ") == "fsd_abc")
        #expect(Authenticator.bearerToken("  Bearer fsd_abc") == "fsd_abc")
        #expect(Authenticator.bearerToken("Bearer " + String(repeating: "a", count: 512))?.utf8.count == 512)
    }

    @Test(
        "anything else is no token",
        arguments: [
            nil, "", "Bearer", "Bearer ", "Bearerfsd_abc", "Basic fsd_abc", "Bearer\tfsd_abc", "Bearer fsd abc", "Bearex fsd_abc",
            "Bearer " + String(repeating: "a", count: 513), "Beare fsd_abc", "Bearer-fsd_abc",
        ])
    func refused(header: String?) {
        #expect(Authenticator.bearerToken(header) == nil)
    }
}

@Suite("Deadline queue")
struct DeadlineQueueTests {
    @Test("due waiters come out earliest first, and only those due")
    func order() {
        var queue = DeadlineQueue<Int>()
        for (waiter, deadline) in [(1, 50), (2, 10), (3, 30), (4, 10), (5, 70), (6, 20)] { queue.add(waiter, at: deadline) }
        #expect(queue.earliest == 10)
        #expect(queue.due(at: 5) == [])
        #expect(Set(queue.due(at: 10)) == [2, 4])
        #expect(queue.due(at: 40) == [6, 3])
        #expect(queue.earliest == 50)
        #expect(queue.due(at: 1000) == [1, 5])
        #expect(queue.earliest == nil && queue.count == 0)
    }

    @Test("a thousand random deadlines come out sorted")
    func sorted() {
        var queue = DeadlineQueue<Int>()
        var generator = SplitMix(seed: 7)
        var deadlines: [Int: Int] = [:]
        for waiter in 0..<1000 {
            let deadline = Int(generator.next() % 10_000)
            deadlines[waiter] = deadline
            queue.add(waiter, at: deadline)
        }
        let out = queue.due(at: .max)
        #expect(out.count == 1000)
        #expect(out.map { deadlines[$0]! } == deadlines.values.sorted())
    }

    @Test("compaction drops the entries of ended waiters once they are most of the queue, and keeps the live ones")
    func compaction() {
        var queue = DeadlineQueue<Int>()
        for waiter in 0..<3000 { queue.add(waiter, at: waiter) }
        queue.compact { $0 % 2 == 0 }  // half are live: not worth it yet
        #expect(queue.count == 3000)
        queue.compact { $0 % 3 == 0 }
        #expect(queue.count == 1000)
        #expect(queue.due(at: 9) == [0, 3, 6, 9])
        var small = DeadlineQueue<Int>()
        for waiter in 0..<100 { small.add(waiter, at: waiter) }
        small.compact { _ in false }  // too few to bother
        #expect(small.count == 100)
    }
}

/// A small deterministic generator for the tests' random deadlines.
private struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite("Rate limiter")
struct RateLimiterTests {
    @Test("a burst goes through, then one request per 1/rate; the wait is said")
    func bucket() {
        var limiter = RateLimiter<String>(.init(rate: 2, burst: 3))
        let start = Duration.seconds(100)
        for _ in 0..<3 { #expect(limiter.take("a", now: start) == nil) }
        #expect(limiter.take("a", now: start) == .milliseconds(500))
        #expect(limiter.take("b", now: start) == nil)  // keys are separate
        #expect(limiter.take("a", now: start + .milliseconds(499)) != nil)
        #expect(limiter.take("a", now: start + .milliseconds(500)) == nil)
        #expect(limiter.isExhausted("a", now: start + .milliseconds(500)))
        #expect(!limiter.isExhausted("a", now: start + .seconds(2)))
        // Idle for long, it holds no more than the burst.
        let later = start + .seconds(3600)
        for _ in 0..<3 { #expect(limiter.take("a", now: later) == nil) }
        #expect(limiter.take("a", now: later) != nil)
    }

    @Test("memory is bounded: full buckets go first, then the longest idle")
    func bounded() {
        var limiter = RateLimiter<Int>(.init(rate: 1, burst: 1), maximumKeys: 100)
        for key in 0..<1000 { _ = limiter.take(key, now: .seconds(Int64(key))) }
        #expect(limiter.keyCount <= 100)
        // The newest keys are still limited.
        #expect(limiter.take(999, now: .seconds(999)) != nil)
    }
}

@Suite("Parked long-polls in the change notifier")
struct ParkedWaitTests {
    /// The outcomes `park` hands on, in order.
    final class Outcomes: Sendable {
        private let seen = Locked<[ChangeNotifier.WaitOutcome]>([])
        func record(_ outcome: ChangeNotifier.WaitOutcome) { seen.withLock { $0.append(outcome) } }
        var all: [ChangeNotifier.WaitOutcome] { seen.withLock { $0 } }
    }

    @Test("a parked wait holds no task: it returns at once, and the change, the replacement or the cancellation is handed on once")
    func parkedOutcomes() async throws {
        let notifier = ChangeNotifier()
        let first = Outcomes()
        let second = Outcomes()
        let cancelled = Outcomes()
        let cancellation = WaitCancellation()
        let start = await notifier.generation(of: "kiosk", device: "d-1")
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: start, timeout: .seconds(300), cancellation: nil, resume: first.record)
                == nil)
        #expect(await notifier.heldCount == 1)
        // A newer long-poll of the device replaces it.
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: start, timeout: .seconds(300), cancellation: nil, resume: second.record)
                == nil)
        #expect(first.all == [.replaced] && second.all.isEmpty)
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-2", groups: [], after: start, timeout: .seconds(300), cancellation: cancellation,
                resume: cancelled.record) == nil)
        #expect(await notifier.heldCount == 2)
        notifier.cancel(cancellation)
        var held = 0
        try await Waiting.until(timeout: .seconds(30), "the cancelled long-poll was never let go: \(held) held after 30 s, not 1") {
            held = await notifier.heldCount
            return held == 1
        }
        #expect(cancelled.all == [.cancelled])
        await notifier.changed("kiosk", scope: .app)
        #expect(second.all == [.changed] && first.all == [.replaced])
        #expect(await notifier.heldCount == 0)
        // Nothing is handed on twice.
        await notifier.changed("kiosk", scope: .app)
        #expect(second.all == [.changed] && cancelled.all == [.cancelled])
    }

    @Test("a wait that cannot begin is answered by park itself, and never handed on: changed meanwhile, cancelled, shed, busy, out of time")
    func immediateOutcomes() async {
        let notifier = ChangeNotifier(capacity: 2, busyLimit: 1)
        let never = Outcomes()
        let start = await notifier.generation(of: "kiosk", device: "d-1")
        await notifier.changed("kiosk", scope: .app)
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: start, timeout: .seconds(9), cancellation: nil, resume: never.record)
                == .changed)
        let now = await notifier.generation(of: "kiosk", device: "d-1")
        let cancellation = WaitCancellation()
        notifier.cancel(cancellation)
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: now, timeout: .seconds(9), cancellation: cancellation, resume: never.record)
                == .cancelled)
        #expect(
            await notifier.park(of: "kiosk", device: "d-1", groups: [], after: now, timeout: .zero, cancellation: nil, resume: never.record)
                == .timedOut)
        let held = Outcomes()
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: now, timeout: .seconds(9), cancellation: nil, resume: held.record)
                == nil)
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-2", groups: [], after: now, timeout: .seconds(9), cancellation: nil, resume: never.record)
                == .busy)
        #expect(never.all.isEmpty && held.all.isEmpty)
        #expect(await notifier.heldCount == 1)
    }

    @Test("the one timer ends parked waits whose time is up, earliest first")
    func parkedTimeout() async throws {
        let clock = ManualClock()
        let notifier = ChangeNotifier(clock: ServiceClock(clock))
        let short = Outcomes()
        let long = Outcomes()
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-1", groups: [], after: .start, timeout: .seconds(120), cancellation: nil, resume: long.record)
                == nil)
        #expect(
            await notifier.park(
                of: "kiosk", device: "d-2", groups: [], after: .start, timeout: .seconds(20), cancellation: nil, resume: short.record)
                == nil)
        clock.advance(by: .seconds(19))
        await Task.yield()
        #expect(short.all.isEmpty && long.all.isEmpty)
        clock.advance(by: .seconds(1))
        try await Waiting.until(timeout: .seconds(30), "the 20 s wait, its time up on the test's clock, had no outcome after 30 s") {
            !short.all.isEmpty
        }
        #expect(short.all == [.timedOut] && long.all.isEmpty)
        #expect(await notifier.heldCount == 1)
        clock.advance(by: .seconds(100))
        try await Waiting.until(timeout: .seconds(30), "the 120 s wait, its time up on the test's clock, had no outcome after 30 s") {
            !long.all.isEmpty
        }
        #expect(long.all == [.timedOut] && short.all == [.timedOut])
        #expect(await notifier.heldCount == 0)
    }
}
