import FleetAgentCore
import FleetDeviceFiles
import FleetDeviceState
import Testing

/// A repeatable random source for the policies' jitter.
struct SeededRandom: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var value = state
        value = (value ^ (value >> 30)) &* 0xBF58_476D_1CE4_E5B9
        value = (value ^ (value >> 27)) &* 0x94D0_49BB_1331_11EB
        return value ^ (value >> 31)
    }
}

@Suite("Retry backoff: exponential, full jitter, Retry-After")
struct RetryBackoffTests {
    @Test("the ceiling doubles from 1 s to the 5-minute cap; every delay lies within it")
    func ceilings() {
        var backoff = RetryBackoff()
        var random = SeededRandom(state: 1)
        var ceilings: [Duration] = []
        for _ in 0..<12 {
            let ceiling = backoff.nextCeiling
            ceilings.append(ceiling)
            let delay = backoff.delayAfterFailure(using: &random)
            #expect(delay >= .zero && delay <= ceiling)
        }
        #expect(Array(ceilings.prefix(10)) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300].map { Duration.seconds($0) })
        #expect(ceilings.last == .seconds(300) && backoff.failures == 12)
        backoff.reset()
        #expect(backoff.nextCeiling == .seconds(1) && backoff.failures == 0)
    }

    @Test("full jitter spreads a fleet's retries over the whole interval")
    func spread() {
        var random = SeededRandom(state: 7)
        let delays = (0..<1000).map { _ in
            var backoff = RetryBackoff()
            for _ in 0..<4 { _ = backoff.delayAfterFailure(using: &random) }
            return backoff.delayAfterFailure(using: &random)
        }
        #expect(delays.allSatisfy { $0 <= .seconds(16) })
        #expect(delays.filter { $0 < .seconds(4) }.count > 150 && delays.filter { $0 > .seconds(12) }.count > 150)
    }

    @Test("Retry-After is a lower bound, capped at an hour")
    func retryAfter() {
        var random = SeededRandom(state: 3)
        var backoff = RetryBackoff()
        #expect(backoff.delayAfterFailure(retryAfter: .seconds(120), using: &random) == .seconds(120))
        #expect(backoff.delayAfterFailure(retryAfter: .seconds(86_400), using: &random) == .seconds(3600))
        for _ in 0..<10 { _ = backoff.delayAfterFailure(using: &random) }
        #expect(backoff.delayAfterFailure(retryAfter: .milliseconds(1), using: &random) <= .seconds(300))
    }
}

@Suite("Poll schedule: long-polls, and the jittered timer when they are not possible")
struct PollScheduleTests {
    @Test("long-polls follow each other at once, after a change and after a full wait")
    func longPolls() {
        var schedule = PollSchedule(longPollWait: 55, pollInterval: .seconds(60), jitter: .seconds(5))
        var random = SeededRandom(state: 1)
        #expect(schedule.nextRequest == .longPoll(wait: 55))
        #expect(schedule.delay(after: .changed, using: &random) == .zero)
        #expect(schedule.delay(after: .unchanged(elapsed: .seconds(55)), using: &random) == .zero)
        #expect(schedule.delay(after: .unchanged(elapsed: .seconds(30)), using: &random) == .zero)
        #expect(schedule.nextRequest == .longPoll(wait: 55))
    }

    @Test("three long-polls cut short in a row switch to 10 timer polls, then long-polls again")
    func earlyEnds() {
        var schedule = PollSchedule(longPollWait: 50, pollInterval: .seconds(60), jitter: .seconds(5))
        var random = SeededRandom(state: 2)
        for _ in 0..<2 {
            let delay = schedule.delay(after: .unchanged(elapsed: .seconds(2)), using: &random)
            #expect(delay <= .seconds(5) && schedule.isLongPolling)
        }
        _ = schedule.delay(after: .unchanged(elapsed: .seconds(2)), using: &random)
        #expect(schedule.nextRequest == .poll)
        for _ in 0..<PollSchedule.fallbackPolls {
            #expect(schedule.nextRequest == .poll)
            let delay = schedule.delay(after: .unchanged(elapsed: .milliseconds(3)), using: &random)
            #expect(delay >= .seconds(60) && delay <= .seconds(65))
        }
        #expect(schedule.nextRequest == .longPoll(wait: 50))
    }

    @Test("a long-poll answered normally in between resets the count of early ends")
    func resets() {
        var schedule = PollSchedule(longPollWait: 50, pollInterval: .seconds(60), jitter: .zero)
        var random = SeededRandom(state: 2)
        for _ in 0..<10 {
            _ = schedule.delay(after: .unchanged(elapsed: .seconds(1)), using: &random)
            _ = schedule.delay(after: .unchanged(elapsed: .seconds(1)), using: &random)
            _ = schedule.delay(after: .changed, using: &random)
        }
        #expect(schedule.isLongPolling)
    }

    @Test("a 200 repeating a revision already decided on waits at least pollInterval, however many come, while long-polling or not")
    func repeatedRevisions() {
        var random = SeededRandom(state: 5)
        for wait in [55, 0] {
            var schedule = PollSchedule(longPollWait: wait, pollInterval: .seconds(60), jitter: .seconds(5))
            for _ in 0..<1000 {
                let delay = schedule.delay(after: .repeated, using: &random)
                #expect(delay >= .seconds(60) && delay <= .seconds(65))
            }
            // Long-polls stay in use: a real change afterwards is followed at once by the next one.
            if wait > 0 {
                #expect(schedule.isLongPolling && schedule.delay(after: .changed, using: &random) == .zero)
            }
        }
    }

    @Test(
        "repeats for the HTTP client: timer delays as drawn for each poll, until their sum passes the horizon, at most 1000; none unless polling is configured"
    )
    func unchangedRepeats() {
        var random = SeededRandom(state: 3)
        let polling = PollSchedule(longPollWait: 0, pollInterval: .seconds(10), jitter: .seconds(2))
        let delays = polling.unchangedRepeatDelays(passing: .seconds(60), using: &random)
        #expect(delays.allSatisfy { $0 >= .seconds(10) && $0 <= .seconds(12) })
        #expect(delays.reduce(.zero, +) > .seconds(60))
        #expect(delays.dropLast().reduce(.zero, +) <= .seconds(60), "one draw past the horizon, no more")
        #expect(Set(delays).count > 1, "each repeat has its own jitter: \(delays)")
        #expect(polling.unchangedRepeatDelays(passing: .zero, using: &random).isEmpty)
        #expect(polling.unchangedRepeatDelays(passing: .seconds(-5), using: &random).isEmpty)
        let fast = PollSchedule(longPollWait: 0, pollInterval: .milliseconds(1), jitter: .zero)
        #expect(fast.unchangedRepeatDelays(passing: .seconds(60), using: &random).count == PollSchedule.maxRepeats)
        let slow = PollSchedule(longPollWait: 0, pollInterval: .seconds(60), jitter: .seconds(5))
        #expect(slow.unchangedRepeatDelays(passing: .seconds(60), using: &random).count == 1)
        // Long-polls, and a fallback from them to the timer, count every poll themselves.
        var longPolling = PollSchedule(longPollWait: 55, pollInterval: .seconds(10), jitter: .zero)
        #expect(longPolling.unchangedRepeatDelays(passing: .seconds(60), using: &random).isEmpty)
        _ = longPolling.delay(after: .longPollRefused, using: &random)
        #expect(!longPolling.isLongPolling)
        #expect(longPolling.unchangedRepeatDelays(passing: .seconds(60), using: &random).isEmpty)
    }

    @Test("a server refusing wait, or longPollWait 0, means the timer: pollInterval plus up to jitter")
    func timer() {
        var random = SeededRandom(state: 4)
        var refused = PollSchedule(longPollWait: 55, pollInterval: .seconds(30), jitter: .seconds(10))
        let delay = refused.delay(after: .longPollRefused, using: &random)
        #expect(delay >= .seconds(30) && delay <= .seconds(40) && refused.nextRequest == .poll)

        var off = PollSchedule(longPollWait: 0, pollInterval: .seconds(30), jitter: .seconds(10))
        var delays: Set<Duration> = []
        for _ in 0..<50 {
            #expect(off.nextRequest == .poll)
            let next = off.delay(after: .changed, using: &random)
            #expect(next >= .seconds(30) && next <= .seconds(40))
            delays.insert(next)
        }
        #expect(delays.count > 40, "the timer is jittered")
    }
}

@Suite("Liveness and readiness")
struct LivenessTests {
    @Test("a loop is overdue only past its announced step limit plus slack")
    func overdue() {
        var liveness = Liveness()
        let start = ContinuousClock.now
        liveness.beginStep("kiosk", limit: .seconds(85), now: start)
        liveness.beginStep("signage", limit: .seconds(1), now: start)
        #expect(liveness.overdueLoops(at: start + .seconds(30)).isEmpty)
        #expect(liveness.overdueLoops(at: start + .seconds(32)) == ["signage"])
        #expect(liveness.overdueLoops(at: start + .seconds(200)) == ["kiosk", "signage"])
        liveness.beginStep("signage", limit: .seconds(1), now: start + .seconds(199))
        liveness.remove("kiosk")
        #expect(liveness.overdueLoops(at: start + .seconds(200)).isEmpty)
    }

    @Test("ready once every app is served, or once at the timeout")
    func readiness() {
        var readiness = Readiness(apps: ["a", "b"])
        let steps = [readiness.served("a"), readiness.served("a"), readiness.served("b"), readiness.served("b"), readiness.timedOut()]
        #expect(steps == [false, false, true, false, false])

        var waiting = Readiness(apps: ["a", "b"])
        let first = waiting.served("a")
        let timedOut = waiting.timedOut()
        #expect(!first && timedOut && waiting.waiting == ["b"])
        let late = [waiting.served("b"), waiting.timedOut()]
        #expect(late == [false, false])
    }
}

@Suite("Redacting a hook's output")
struct OutputRedactionTests {
    @Test("every occurrence of every secret is masked, longer secrets first")
    func masks() {
        let output = Array("connect user=kiosk password=hunter2 pin 4711 hunter2\n".utf8)
        #expect(
            OutputRedaction.redact(output, secrets: ["hunter2", "4711", "hunter"], limit: 2048, wasCut: false)
                == "connect user=kiosk password=******** pin ******** ********\n")
        #expect(OutputRedaction.redact(Array("nothing".utf8), secrets: [""], limit: 2048, wasCut: false) == "nothing")
    }

    @Test("a secret is redacted in its JSON-escaped form too")
    func escapedForms() {
        let secret = #"pa"ss\word"#
        let output = Array(#"{"pin": "pa\"ss\\word"} and pa"ss\word"#.utf8)
        let redacted = OutputRedaction.redact(output, secrets: [secret], limit: 2048, wasCut: false)
        #expect(redacted == #"{"pin": "********"} and ********"#, "\(redacted)")
    }

    @Test("a secret that straddles the cut is masked whole: redaction comes before the cut")
    func straddlingTheCut() {
        let secret = "correct-horse-battery-staple"
        let text = "x" + secret + String(repeating: "y", count: 20)
        // Cut first, then redact (the old order), would keep "battery-staple…" in the last 30 bytes.
        let limit = 30
        let keep = OutputRedaction.bytesToKeep(limit: limit, secrets: [secret])
        #expect(keep == limit + secret.utf8.count - 1)
        let collected = Array(text.utf8.suffix(keep))
        let redacted = OutputRedaction.redact(collected, secrets: [secret], limit: limit, wasCut: text.utf8.count > keep)
        #expect(!redacted.contains("staple") && !redacted.contains("battery"))
        #expect(redacted.hasSuffix("********" + String(repeating: "y", count: 20)))
    }

    @Test("the fragment of a secret whose start was lost before the collected tail is dropped")
    func fragmentAtTheStart() {
        let secret = "0123456789abcdef"
        let collected = Array(("89abcdef" + " and the rest of the output").utf8)  // the tail of a longer stream
        let redacted = OutputRedaction.redact(collected, secrets: [secret], limit: 2048, wasCut: true)
        // As many bytes as the longest secret less one may be a fragment: they are dropped.
        #expect(redacted == "e rest of the output")
        // Not cut: nothing was lost, so nothing is dropped.
        #expect(OutputRedaction.redact(collected, secrets: [secret], limit: 2048, wasCut: false) == "89abcdef and the rest of the output")
    }
}

@Suite("What refused/ keeps")
struct RefusedFolderTests {
    @Test("requests older than a week go with their reasons")
    func age() {
        let now = 2_000_000_000
        let entries = [
            RefusedFolder.Entry(name: "old.json", modified: now - RefusedFolder.maximumAge - 10),
            RefusedFolder.Entry(name: "old.json.reason", modified: now - RefusedFolder.maximumAge - 10),
            RefusedFolder.Entry(name: "new.json", modified: now - 10),
            RefusedFolder.Entry(name: "new.json.reason", modified: now - 10),
        ]
        #expect(RefusedFolder.expired(entries, now: now) == ["old.json", "old.json.reason"])
    }

    @Test("beyond 100 requests the oldest go; a request whose reason is newer counts as new")
    func count() {
        let now = 2_000_000_000
        var entries: [RefusedFolder.Entry] = []
        for index in 0..<105 {
            entries.append(.init(name: "r\(index).json", modified: now - 1000 + index))
            entries.append(.init(name: "r\(index).json.reason", modified: now - 1000 + index))
        }
        entries[0] = .init(name: "r0.json", modified: now - 1000)
        entries[1] = .init(name: "r0.json.reason", modified: now)  // just refused: kept
        let expired = RefusedFolder.expired(entries, now: now)
        #expect(
            expired == [
                "r1.json", "r1.json.reason", "r2.json", "r2.json.reason", "r3.json", "r3.json.reason", "r4.json", "r4.json.reason",
                "r5.json", "r5.json.reason",
            ])
    }

    @Test("a hard link or a stranger's file is never attributed to an allowed writer")
    func attribution() {
        let writers = Writers(users: ["kiosk": 1000])
        #expect(RequestFileCheck.isAttributable(kind: .regular, links: 1, owner: 1000, group: 1000, writers: writers, agentUser: 999))
        #expect(!RequestFileCheck.isAttributable(kind: .regular, links: 2, owner: 1000, group: 1000, writers: writers, agentUser: 999))
        #expect(!RequestFileCheck.isAttributable(kind: .other, links: 1, owner: 1000, group: 1000, writers: writers, agentUser: 999))
        #expect(!RequestFileCheck.isAttributable(kind: .regular, links: 1, owner: 1001, group: 1001, writers: writers, agentUser: 999))
    }
}
