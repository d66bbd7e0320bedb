import FleetAgentCore
import Testing

@Suite("Abandoned temporary files in an inbox: told apart by monotonic time alone")
struct AbandonedFilesTests {
    typealias Files = AbandonedFiles<TestInstant>

    static let version = Files.Version(inode: 7, size: 12, modified: 1_000)

    @Test("a file unchanged for an hour of monotonic time is abandoned; one that changes or goes starts over")
    func abandoned() {
        var files = Files(abandonedAfter: .seconds(3600))
        let start = TestInstant.zero
        #expect(files.look(at: [".a": Self.version, ".b": Self.version], now: start).isEmpty)
        // Still being written: its size changes, so its hour starts again.
        var growing = Self.version
        growing.size = 40
        #expect(files.look(at: [".a": Self.version, ".b": growing], now: start.advanced(by: .seconds(1800))).isEmpty)
        #expect(files.look(at: [".a": Self.version, ".b": growing], now: start.advanced(by: .seconds(3600))) == [".a"])
        #expect(files.look(at: [".b": growing], now: start.advanced(by: .seconds(5399))).isEmpty)
        #expect(files.look(at: [".b": growing], now: start.advanced(by: .seconds(5400))) == [".b"])
        // A file gone and back (a new writer reusing the name) is a new file.
        #expect(files.look(at: [:], now: start.advanced(by: .seconds(6000))).isEmpty)
        #expect(files.look(at: [".b": growing], now: start.advanced(by: .seconds(7000))).isEmpty)
    }

    @Test("modification times two days old (a wall clock set forward) make no file abandoned")
    func wallClockIgnored() {
        var files = Files(abandonedAfter: .seconds(3600))
        let old = Files.Version(inode: 9, size: 3, modified: -172_800_000_000_000)
        #expect(files.look(at: [".old": old], now: .zero).isEmpty)
        #expect(files.look(at: [".old": old], now: TestInstant.zero.advanced(by: .seconds(600))).isEmpty)
    }
}

@Suite("Inbox refusals of one user are throttled, per uid")
struct RefusalThrottleTests {
    @Test("20 at once, then one every 6 s per uid; the rest counted, each uid on its own; the count is taken once")
    func throttled() {
        var throttle = RefusalThrottle<TestInstant>(burst: 20, refill: .seconds(6))
        let start = TestInstant.zero
        let flood = (0..<100).map { _ in throttle.admit(65534, at: start) }
        #expect(flood.prefix(20).allSatisfy { $0 == .handle })
        #expect(flood[20] == .quietFromNow && flood.dropFirst(21).allSatisfy { $0 == .quiet })
        // Another user is not affected by the first one's flood.
        #expect(throttle.admit(1000, at: start) == .handle)
        // 6 s later one more is handled in full; the next is quiet again.
        #expect(throttle.admit(65534, at: start.advanced(by: .seconds(6))) == .handle)
        #expect(throttle.admit(65534, at: start.advanced(by: .seconds(6))) == .quiet)
        let summary = throttle.takeSummary(at: start.advanced(by: .seconds(60)))
        #expect(summary.map(\.uid) == [65534] && summary.map(\.count) == [81])
        #expect(throttle.takeSummary(at: start.advanced(by: .seconds(61))).isEmpty)
        // After the summary, a quiet refusal says so again first.
        #expect(throttle.admit(65534, at: start.advanced(by: .seconds(61))) == .handle)
    }
}
