import FleetServerCore
import Testing

@Suite("Change notifier for long-polls")
struct ChangeNotifierTests {
    /// Yields until `app` has `count` waiters (the waiting task has registered).
    func awaitWaiters(_ notifier: ChangeNotifier, _ app: String, _ count: Int) async {
        while await notifier.waiterCount(of: app) != count { await Task.yield() }
    }

    @Test("a change wakes every waiter of that app, and only of that app")
    func wakes() async {
        let notifier = ChangeNotifier()
        let start = await notifier.generation(of: "kiosk")
        async let first = notifier.waitForChange(of: "kiosk", after: start)
        async let second = notifier.waitForChange(of: "kiosk", after: start)
        await awaitWaiters(notifier, "kiosk", 2)
        await notifier.changed("signage")
        #expect(await notifier.waiterCount(of: "kiosk") == 2)
        await notifier.changed("kiosk")
        #expect(await first)
        #expect(await second)
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("a change between reading the generation and waiting is not lost")
    func noLostWakeup() async {
        let notifier = ChangeNotifier()
        let before = await notifier.generation(of: "kiosk")
        await notifier.changed("kiosk")
        #expect(await notifier.waitForChange(of: "kiosk", after: before))
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("cancelling a long-poll removes its waiter and returns false")
    func cancellation() async {
        let notifier = ChangeNotifier()
        let waiting = Task { await notifier.waitForChange(of: "kiosk", after: 0) }
        await awaitWaiters(notifier, "kiosk", 1)
        waiting.cancel()
        #expect(await waiting.value == false)
        #expect(await notifier.waiterCount(of: "kiosk") == 0)
    }

    @Test("the timeout ends a wait with no change, and the waiter is gone")
    func timeout() async {
        let notifier = ChangeNotifier()
        let changed = await notifier.waitForChange(of: "kiosk", after: 0, timeout: .milliseconds(5), clock: ContinuousClock())
        #expect(!changed)
        await awaitWaiters(notifier, "kiosk", 0)
    }

    @Test("a change before the timeout answers at once")
    func changeBeforeTimeout() async {
        let notifier = ChangeNotifier()
        async let changed = notifier.waitForChange(of: "kiosk", after: 0, timeout: .seconds(300), clock: ContinuousClock())
        await awaitWaiters(notifier, "kiosk", 1)
        await notifier.changed("kiosk")
        #expect(await changed)
    }
}
