import FleetAgentCore
import FleetJSON
import FleetProtocol
import FleetSimulator
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A generator that returns a fixed sequence, for draws the tests can predict: with the
/// standard library's bounded draws, 1 gives the lowest value of a range and `.max` the highest
/// (0 would be rejected forever).
struct SequenceGenerator: RandomNumberGenerator {
    var values: [UInt64]
    var index = 0

    mutating func next() -> UInt64 {
        defer { index += 1 }
        return values[index % values.count]
    }
}

@Suite("A simulated device behaves as the agent does on the wire")
struct SimulatedDeviceTests {
    func document(_ revision: Int64) -> SettingsDocument {
        SettingsDocument(app: "fleetsim", schemaVersion: 1, revision: revision, values: ["message": "hello"])
    }

    @Test("it asks for its settings, reports each new revision applied, then waits in a long-poll with the revision it holds")
    func longPollLoop() {
        var random = SequenceGenerator(values: [1])
        var device = SimulatedDevice(longPollWait: 300)
        #expect(device.start == .init(request: .settings(knownRevision: nil, wait: 300), after: .zero))
        #expect(
            device.handle(.settings(document(4)), using: &random) == .init(request: .report(revision: 4, schemaVersion: 1), after: .zero))
        #expect(device.handle(.reported, using: &random) == .init(request: .settings(knownRevision: 4, wait: 300), after: .zero))
        // A long-poll that waited its time comes back unchanged: the next one goes at once.
        #expect(
            device.handle(.unchanged(elapsed: .seconds(300)), using: &random)
                == .init(request: .settings(knownRevision: 4, wait: 300), after: .zero))
    }

    @Test("asked to write back, it patches after its report and reports the revision the server answers")
    func writeBack() {
        var random = SequenceGenerator(values: [1])
        var device = SimulatedDevice(longPollWait: 300)
        _ = device.handle(.settings(document(4)), using: &random)
        device.requestWriteBack()
        #expect(device.handle(.reported, using: &random).request == .writeBack(basedOn: 4))
        #expect(device.handle(.settings(document(5)), using: &random).request == .report(revision: 5, schemaVersion: 1))
        #expect(device.handle(.reported, using: &random).request == .settings(knownRevision: 5, wait: 300))
        // A refused write-back is given up: the device downloads again.
        device.requestWriteBack()
        #expect(device.handle(.reported, using: &random).request == .writeBack(basedOn: 5))
        #expect(device.handle(.writeBackRefused, using: &random).request == .settings(knownRevision: 5, wait: 300))
    }

    @Test("after failures it retries the same request with full-jitter backoff under a doubling ceiling, at least Retry-After")
    func backoff() {
        var device = SimulatedDevice(longPollWait: 300, backoff: RetryBackoff(base: .seconds(1), cap: .seconds(8)))
        var highest = SequenceGenerator(values: [.max])
        _ = device.handle(.settings(document(4)), using: &highest)
        var ceilings: [Duration] = []
        for _ in 0..<5 {
            let action = device.handle(.failed(retryAfter: nil), using: &highest)
            #expect(action.request == .report(revision: 4, schemaVersion: 1))
            ceilings.append(action.after)
        }
        #expect(ceilings == [.seconds(1), .seconds(2), .seconds(4), .seconds(8), .seconds(8)])
        #expect(device.failuresInARow == 5)
        var lowest = SequenceGenerator(values: [1])
        #expect(device.handle(.failed(retryAfter: .seconds(10)), using: &lowest).after == .seconds(10))
        #expect(device.handle(.reported, using: &lowest).request == .settings(knownRevision: 4, wait: 300))
        #expect(device.failuresInARow == 0)
        // A failed write-back is not sent again as it was: the device downloads first.
        device.requestWriteBack()
        _ = device.handle(.settings(document(5)), using: &lowest)
        #expect(device.handle(.reported, using: &lowest).request == .writeBack(basedOn: 5))
        #expect(device.handle(.failed(retryAfter: nil), using: &lowest).request == .settings(knownRevision: 5, wait: 300))
    }

    @Test(
        "to a server that says Fleetset-Accepts: status, the report rides on the next long-poll (two requests per change); by POST otherwise, or with a write-back waiting"
    )
    func reportOnTheNextLongPoll() {
        var random = SequenceGenerator(values: [1])
        var device = SimulatedDevice(longPollWait: 300)
        let four = SimulatedDevice.Revision(revision: 4, schemaVersion: 1)
        device.heard(acceptsStatus: true)
        #expect(
            device.handle(.settings(document(4)), using: &random)
                == .init(request: .settings(knownRevision: 4, wait: 300, reporting: four), after: .zero))
        // A failed request carrying the report is sent again carrying it.
        #expect(device.handle(.failed(retryAfter: nil), using: &random).request == .settings(knownRevision: 4, wait: 300, reporting: four))
        #expect(device.handle(.unchanged(elapsed: .seconds(300)), using: &random).request == .settings(knownRevision: 4, wait: 300))
        // A write-back waits: the report goes first, by POST, as the agent sends it before a change.
        device.requestWriteBack()
        #expect(device.handle(.settings(document(5)), using: &random).request == .report(revision: 5, schemaVersion: 1))
        #expect(device.handle(.reported, using: &random).request == .writeBack(basedOn: 5))
        // An older server (no Fleetset-Accepts): by POST, as before.
        device.heard(acceptsStatus: false)
        #expect(device.handle(.settings(document(6)), using: &random).request == .report(revision: 6, schemaVersion: 1))
    }

    @Test("long-polls that keep ending early turn it to polling on the jittered timer, as the agent")
    func earlyEnds() {
        var random = SequenceGenerator(values: [1])
        var device = SimulatedDevice(longPollWait: 300, pollInterval: .seconds(60), jitter: .seconds(10))
        _ = device.handle(.settings(document(4)), using: &random)
        _ = device.handle(.reported, using: &random)
        var last = device.handle(.unchanged(elapsed: .seconds(1)), using: &random)
        for _ in 1..<PollSchedule.earlyEndLimit { last = device.handle(.unchanged(elapsed: .seconds(1)), using: &random) }
        #expect(last.request == .settings(knownRevision: 4, wait: 0))
        #expect(device.handle(.unchanged(elapsed: .milliseconds(5)), using: &random).after == .seconds(60))
    }
}

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
