import FleetSimulator
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("What the simulator reports")
struct FleetReportTests {
    @Test("percentiles are nearest-rank over the samples")
    func percentiles() {
        let summary = LatencySummary((1...200).map { Duration.milliseconds($0) })
        #expect(summary.count == 200 && summary.p50 == .milliseconds(100) && summary.p95 == .milliseconds(190))
        #expect(summary.p99 == .milliseconds(198) && summary.max == .milliseconds(200))
        #expect(LatencySummary([]).p99 == .zero)
        #expect(LatencySummary([.milliseconds(7)]).p50 == .milliseconds(7))
    }

    @Test("a process's memory and CPU come from /proc, command names with spaces and parentheses included")
    func processUsage() throws {
        let status = "Name:\tfleetset-server\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"
        let stat = "4242 (fleet (set) x) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 130 0 0 20 0 9 0 100 1000000 25600"
        let usage = try #require(ProcessUsage.parse(status: status, stat: stat, ticksPerSecond: 100))
        #expect(usage.residentBytes == 100 << 20 && usage.peakResidentBytes == 200 << 20)
        #expect(usage.cpu == .milliseconds(3800))
        #expect(ProcessUsage.parse(status: "Name: x\n", stat: stat, ticksPerSecond: 100) == nil)
        let mine = try #require(ProcessUsage.of(pid: getpid()))
        #expect(mine.residentBytes > 1 << 20)
    }
}
