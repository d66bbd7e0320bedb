import FleetServerCore
import FleetTestWaiting
import PosixThreads
import Testing

@Suite("Work gate: so many jobs at once")
struct WorkGateTests {
    /// Jobs that each wait until the test lets them end, recording the most running at once
    /// and the order they started in.
    final class Jobs: Sendable {
        private struct State {
            var running = 0
            var most = 0
            var started: [Int] = []
            var held: [CheckedContinuation<Void, Never>] = []
        }

        private let state = Locked(State())

        func run(_ index: Int) async {
            await withCheckedContinuation { continuation in
                state.withLock { state in
                    state.running += 1
                    state.most = max(state.most, state.running)
                    state.started.append(index)
                    state.held.append(continuation)
                }
            }
            state.withLock { $0.running -= 1 }
        }

        /// Lets every job that waits end.
        func release() {
            for continuation in state.withLock({ state in
                defer { state.held = [] }; return state.held
            }) { continuation.resume() }
        }

        var held: Int { state.withLock { $0.held.count } }
        var most: Int { state.withLock { $0.most } }
        var started: [Int] { state.withLock { $0.started } }
    }

    @Test("no more than the limit run at once; the others wait, start in the order they came, and all run")
    func limits() async throws {
        let gate = WorkGate(limit: 3)
        let jobs = Jobs()
        for index in 0..<10 { gate.submit { await jobs.run(index) } }
        try await Waiting.until(timeout: .seconds(30), "never saw 3 jobs running: \(jobs.held) held") { jobs.held >= 3 }
        #expect(gate.counts.running == 3 && gate.counts.waiting == 7)
        #expect(Set(jobs.started) == [0, 1, 2])
        try await Waiting.until(timeout: .seconds(30), "only jobs \(jobs.started) of the 10 started") {
            if jobs.started.count >= 10 { return true }
            jobs.release()
            return false
        }
        jobs.release()
        try await Waiting.until(timeout: .seconds(30), "\(gate.counts.running) job(s) still ran after 30 s") {
            if gate.counts.running == 0 { return true }
            jobs.release()
            return false
        }
        #expect(jobs.most == 3)
        #expect(Array(jobs.started.dropFirst(3)) == Array(3..<10))
        #expect(gate.counts.running == 0 && gate.counts.waiting == 0)
        // Free again: a new job starts at once.
        let later = Jobs()
        gate.submit { await later.run(99) }
        try await Waiting.until(timeout: .seconds(30), "a job submitted to the free gate never started") { later.held >= 1 }
        later.release()
    }
}
