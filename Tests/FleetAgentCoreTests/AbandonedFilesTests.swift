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
