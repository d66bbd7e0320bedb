import FleetAgentCore
import Testing

/// The rule behind `AgentLifecycleTests.startupPagesReleased`, as values: the pages of start-up
/// are handed back once per process, ``StartupPagesRelease/settle`` after READY=1, and not
/// again after a reload. Shown in milliseconds, instead of by watching an agent for the settle
/// after each READY=1.
@Suite("The pages of start-up: handed back once per process, 5 s after READY=1")
struct StartupPagesReleaseTests {
    @Test("the first READY=1 waits 5 s, then the pages are handed back")
    func firstReady() {
        var release = StartupPagesRelease()
        #expect(StartupPagesRelease.settle == .seconds(5))
        #expect(release.delayAfterReady() == StartupPagesRelease.settle)
        #expect(!release.released)
        let handedBack = release.release()
        #expect(handedBack && release.released)
    }

    @Test("after the release, each reloaded generation's READY=1 waits for nothing and hands back nothing")
    func notAgainAfterReload() {
        var release = StartupPagesRelease()
        #expect(release.delayAfterReady() != nil)
        let first = release.release()
        #expect(first)
        for reload in 1...3 {
            #expect(release.delayAfterReady() == nil, "reload \(reload)")
            let again = release.release()
            #expect(!again, "reload \(reload)")
        }
    }

    @Test("a reload during the delay: nothing is handed back, the next READY=1 waits 5 s again, and then the pages go back once")
    func reloadDuringDelay() {
        var release = StartupPagesRelease()
        #expect(release.delayAfterReady() == StartupPagesRelease.settle)
        // The first generation ends before its delay passed: it does not ask release().
        #expect(!release.released)
        #expect(release.delayAfterReady() == StartupPagesRelease.settle)
        let reloaded = release.release()
        #expect(reloaded)
        #expect(release.delayAfterReady() == nil)
        let again = release.release()
        #expect(!again)
    }
}
