import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetMetadata
import FleetProtocol
import Testing

@Suite("Sync machine: start-up and order")
struct SyncMachineStartTests {
    @Test("the settings on disk are served at once; nothing goes to the server before enrollment and the inbox's first scan")
    func servesDiskFirst() {
        var run = MachineRun()
        let actions = run.send(
            .started(
                LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7))))
        #expect(actions.contains(.served))
        #expect(actions.contains(.showStatus("revision 7 from disk")))
        #expect(run.request == .awaitOnline)
        #expect(run.fetches().isEmpty && run.reports().isEmpty)
        run.answer(.online(requests: []))
        #expect(run.fetches().map(\.known) == [7])
        #expect(run.fetches().map(\.wait) == [55])
    }

    @Test("nothing on disk: not served until the server's first revision is written")
    func nothingOnDisk() {
        var run = MachineRun()
        #expect(!run.start().contains(.served))
        #expect(run.fetches().map(\.known) == [nil])
        let applied = run.deliverRevision(1)
        #expect(applied.contains(.served))
        #expect(run.machine.settings?.revision == 1)
    }

    @Test("a revision written before a stop but not settled (no status for it) runs its hook and is reported again at start")
    func finishesInterruptedApply() {
        var run = MachineRun(TestApp.rules(jitter: .seconds(2), hasHook: true))
        run.start(
            LoadedState(settings: TestApp.settings(8), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)),
            online: nil)
        #expect(run.request == nil)  // the hook waits for its jittered delay first
        let hookStart = run.advance(by: .seconds(2))
        #expect(hookStart.contains(.runHook(TestApp.settings(8), secrets: ["1234"])))
        let finished = run.answer(.hookFinished(.succeeded))
        // Offline: the report is saved first, then status.json records the outcome.
        let saved = run.index(of: \.isSaveReports, in: finished)
        let status = run.index(of: \.isWriteStatus, in: finished)
        #expect(saved != nil && status != nil && saved! < status!)
        #expect(run.machine.reports.reports.map(\.revision) == [8])
        #expect(run.machine.status.revision == 8 && run.machine.status.state == .applied)
        #expect(run.request == .awaitOnline)
        // Online: the queued report goes before the first settings request.
        let online = run.answer(.online(requests: []))
        #expect(run.reports(in: online).map(\.revision) == [8] && run.fetches(in: online).isEmpty)
        let delivered = run.answer(.reportDelivered)
        #expect(delivered.contains(.saveReports(PendingReports())))
        #expect(run.fetches(in: delivered).count == 1)
    }

    @Test("an unusable settings.json: the previous generation is put back, served, reported as an error with the reasons")
    func restoresPrevious() {
        var run = MachineRun()
        let actions = run.start(
            LoadedState(
                settings: TestApp.settings(6), source: .previous, problems: ["settings.json: not JSON"], metadata: TestApp.metadata,
                status: TestApp.settledStatus(7)))
        #expect(actions.contains(.restorePrevious))
        let reports = run.machine.reports.reports
        #expect(reports.count == 2)
        #expect(reports.first?.state == .error)
        #expect(
            reports.first?.message.contains(
                "settings.json was unusable; serving revision 6 from settings.previous.json: settings.json: not JSON") == true)
        #expect(run.events(in: actions).contains("restored"))
    }

    @Test("a revision refused before a restart stays decided on: asked for with If-None-Match, not reported again when it comes")
    func refusalSurvivesRestart() {
        var run = MachineRun()
        var status = TestApp.settledStatus(7)
        status.latestRevision = 9
        status.state = .error
        status.lastError = "revision 9 is not valid for metadata version 3: /volume: must be <= 10 (got 11)"
        run.start(LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: status))
        #expect(run.fetches().map(\.known) == [9])
        run.deliverRevision(9, ["greeting": "hello", "volume": 11, "pin": "1234"])
        #expect(run.reports().isEmpty)
        #expect(run.events().contains("repeated"))
        // A hook that failed is no refusal: the settings' own revision is asked for.
        var hookFailed = MachineRun()
        var failed = TestApp.settledStatus(7)
        failed.state = .error
        hookFailed.start(LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: failed))
        #expect(hookFailed.fetches().map(\.known) == [7])
    }

    @Test("reports go first, then the device's changes, then the settings request")
    func order() {
        var run = MachineRun()
        var queued = PendingReports()
        queued.append(StatusReport(revision: 7, schemaVersion: 3, state: .applied, source: .agent))
        run.start(
            LoadedState(
                settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, reports: queued,
                status: TestApp.settledStatus(7)),
            online: [InboxDelivery(id: "r1", path: "/inbox/r1.json", content: .request(.set(["greeting": "hi"])))])
        #expect(run.request == .deliverReport(queued.reports[0]))
        run.answer(.reportDelivered)
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 7))
        run.answer(.changeConfirmed(revision: 8))
        // Download again after the confirmation.
        #expect(run.request == .fetchSettings(wait: 0, knownRevision: nil, notBefore: nil, repeatsWhileUnchanged: []))
        run.deliverRevision(8, ["greeting": "hi", "volume": 5, "pin": "1234"])
        #expect(run.machine.journal.ended.map(\.state) == [.applied])
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 8, notBefore: nil, repeatsWhileUnchanged: []))
    }
}

@Suite("Sync machine: long-polls and the timer")
struct SyncMachinePollingTests {
    static func online(_ rules: SyncRules = TestApp.rules()) -> MachineRun {
        var run = MachineRun(rules)
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        return run
    }

    @Test("long-polls follow each other at once after a full wait")
    func backToBack() {
        var run = Self.online()
        run.advance(by: .seconds(55))
        let next = run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.fetches(in: next).map(\.wait) == [55])
    }

    @Test("three long-polls cut short in a row switch to the timer (pollInterval plus jitter), then long-polls come back")
    func earlyEnds() {
        var run = Self.online()
        for _ in 0..<3 {
            run.advance(by: .seconds(1))
            run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
            #expect(run.scheduledStart != nil, "never again at once after an early end: the next request waits")
        }
        let timerPoll = run.fetches().last
        #expect(timerPoll?.wait == 0)
        // Timer polls: each after pollInterval plus at most jitter.
        run.advanceToAlarm()
        let sent = run.instant
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        let gap = sent.duration(to: run.scheduledStart ?? sent)
        #expect(gap >= .seconds(60) && gap <= .seconds(65))
        for _ in 0..<PollSchedule.fallbackPolls {
            run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        }
        #expect(run.fetches().last?.wait == 55)
    }

    @Test("a server that refuses wait (400 bad-parameter) is polled on the timer")
    func longPollRefused() {
        var run = Self.online()
        let refused = run.answer(.requestFailed(TestApp.refusal(400, .badParameter)))
        #expect(run.events(in: refused).contains("long-poll-refused"))
        #expect(run.fetches().last?.wait == 0)
        let wait = run.instant.duration(to: run.scheduledStart ?? run.instant)
        #expect(wait >= .seconds(60) && wait <= .seconds(65), "on the timer: \(wait)")
    }
}

extension SyncMachinePollingTests {
    static let fastTimer = TestApp.rules(longPollWait: 0, pollInterval: .seconds(10), jitter: .seconds(2))

    /// The unchanged answers the request in flight lets the HTTP client take by itself.
    static func repeats(_ run: MachineRun) -> [Duration]? {
        if case .fetchSettings(_, _, _, let repeats, _)? = run.request { repeats } else { nil }
    }

    @Test(
        "an idle device on the timer lets the HTTP client take its unchanged answers until status.json's last-sync time is due: rewritten every minute or so, as without plans"
    )
    func repeatsWhenIdle() {
        var run = Self.online(Self.fastTimer)
        #expect(Self.repeats(run) == [], "the last-sync time is due at once: this answer writes it")
        var writes: [TestInstant] = []
        var plans = 0
        let end = run.instant.advanced(by: .seconds(600))
        while run.instant < end {
            let repeats = Self.repeats(run) ?? []
            if !repeats.isEmpty { plans += 1 }
            #expect(repeats.allSatisfy { $0 >= .seconds(10) && $0 <= .seconds(12) }, "each drawn as the timer draws it")
            if let start = run.scheduledStart { run.advance(by: run.instant.duration(to: start)) }
            run.advance(by: repeats.reduce(.zero, +))  // the plan's last 304 comes back
            let produced = run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
            if produced.contains(where: \.isWriteStatus) { writes.append(run.instant) }
        }
        let gaps = zip(writes, writes.dropFirst()).map { $0.duration(to: $1) }
        #expect(plans >= 8 && gaps.count >= 8, "\(plans) plans, \(writes.count) writes in 10 minutes")
        #expect(gaps.allSatisfy { $0 > .seconds(60) && $0 <= .seconds(60 + 12 + 12) }, "\(gaps)")

        let longPolling = Self.online()
        #expect(Self.repeats(longPolling) == [])
    }

    @Test("a change that comes inside a plan is received as any change; a granted 'sync now' goes alone, without a plan")
    func changeAndSyncNowDuringPlan() {
        var run = Self.online(Self.fastTimer)
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.repeats(run)?.isEmpty == false)
        run.advance(by: .seconds(25))
        run.deliverRevision(8)
        #expect(run.machine.settings?.revision == 8)
        #expect(run.reports().map(\.revision) == [8])
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.repeats(run)?.isEmpty == false)
        run.send(.inboxRequests([InboxDelivery(id: "s1", path: "/inbox/s1.json", content: .request(.sync))]))
        #expect(run.cancelAsked, "the sync ends the plan")
        run.answer(.requestCancelled)
        #expect(Self.repeats(run) == [], "the request 'sync now' asked for answers by itself")
    }

    @Test(
        "work for the next turn (a failure before, a waiting report, an unreadable changes.json) keeps to one request a turn, so each turn retries it"
    )
    func noRepeatsWithWork() {
        var run = Self.online(Self.fastTimer)
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.repeats(run)?.isEmpty == false)
        run.answer(.requestFailed(.transient("connection refused")))
        run.advanceToAlarm()
        #expect(Self.repeats(run) == [], "after a failure, one request: its answer ends the error at once")
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.repeats(run)?.isEmpty == false)
        // Revision 8's report fails (a proxy's page): it waits for the next turn.
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        run.answer(.requestFailed(SyncFailure.refusal(status: 404, code: nil, retryAfter: nil, summary: "404 from a proxy")))
        run.advanceToAlarm()
        #expect(run.machine.reports.reports.count == 1)
        #expect(Self.repeats(run) == [], "a report waits: the next answer is its turn")

        // No failure at all: a change waits in the inbox for changes.json to be readable, and
        // every turn reads it again.
        var waiting = MachineRun(Self.fastTimer)
        waiting.journalOnDisk = nil
        waiting.start(
            LoadedState(
                settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, journal: nil,
                journalProblem: "changes.json: not JSON", status: TestApp.settledStatus(7)),
            online: [InboxDelivery(id: "c1", path: "/inbox/c1.json", content: .request(.set(["greeting": "hi"])))])
        for _ in 0..<3 {
            waiting.answer(.settingsAnswer(SettingsAnswer(document: nil)))
            #expect(waiting.machine.backoff.failures == 0 && waiting.machine.waitingRequests.map(\.id) == ["c1"])
            #expect(Self.repeats(waiting) == [])
        }
    }

    @Test("a repeating request is cancelled at once for a local change, also while its requests are going out")
    func repeatsCancelledForWork() {
        var run = Self.online(Self.fastTimer)
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.repeats(run)?.isEmpty == false)
        run.advance(by: .seconds(37))  // sent, and two repeats have gone
        run.send(.inboxRequests([InboxDelivery(id: "c1", path: "/inbox/c1.json", content: .request(.set(["greeting": "hi"])))]))
        #expect(run.cancelAsked)
        run.answer(.requestCancelled)
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 7))
    }
}

@Suite("Sync machine: misbehaving servers and proxies are harmless")
struct SyncMachineMisbehavingServerTests {
    @Test(
        "a server that ignores If-None-Match and wait, answering 200 with a refused revision at once: one request per pollInterval, one report",
        arguments: [false, true])
    func repeatedRevision(refusedRevision: Bool) {
        var run = SyncMachinePollingTests.online()
        let values: JSONObject =
            refusedRevision ? ["greeting": "hello", "volume": 99, "pin": "1234"] : ["greeting": "hi", "volume": 5, "pin": "1234"]
        // Ten minutes of a server answering every request at once with revision 9.
        let end = run.instant.advanced(by: .seconds(600))
        var answered = 0
        while run.instant < end {
            if case .fetchSettings? = run.request {
                guard (run.scheduledStart ?? run.instant) < end else { break }
                answered += 1
                run.deliverRevision(9, values)
            } else if run.request != nil {
                run.answer(.reportDelivered)
            } else {
                run.advanceToAlarm()
            }
        }
        #expect(answered <= 2 + 600 / 60, "\(answered) requests in 10 minutes")
        #expect(answered >= 600 / 65)
        #expect(run.reports().filter { $0.revision == 9 }.count == 1)
        #expect(run.machine.knownRevision == 9)
    }

    @Test("a proxy's 403 page (no fleetset error body) is transient: the change stays queued, the report stays, the loop backs off")
    func proxyPage() {
        var run = MachineRun()
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)),
            online: [InboxDelivery(id: "r1", path: "/inbox/r1.json", content: .request(.set(["greeting": "hi"])))])
        let proxyPage = SyncFailure.refusal(status: 403, code: nil, retryAfter: nil, summary: "403 without fleetset's body")
        #expect(proxyPage.kind == .transient)
        run.answer(.requestFailed(proxyPage))
        #expect(run.machine.journal.queued.map(\.id) == ["r1"])
        #expect(run.request == nil && run.machine.holdUntil != nil)
        run.advanceToAlarm()
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 7))
    }

    @Test("Retry-After is honoured by every request, and 'sync now' never overrides it")
    func retryAfter() {
        var run = SyncMachinePollingTests.online()
        run.answer(.requestFailed(TestApp.refusal(429, .rateLimited, retryAfter: .seconds(120))))
        for second in 1...20 {
            run.advance(by: .seconds(1))
            run.send(.inboxRequests([InboxDelivery(id: "s\(second)", path: "/inbox/s\(second).json", content: .request(.sync))]))
        }
        #expect(run.request == nil)
        run.advance(by: .seconds(99))
        #expect(run.request == nil, "nothing before Retry-After")
        run.advance(by: .seconds(1))
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 7, notBefore: nil, repeatsWhileUnchanged: []))
        #expect(run.fetches().count == 2)
    }

    @Test("'sync now' is granted at most once per 10 s; more requests in between become one at the end of it")
    func syncNowRateLimited() {
        var run = SyncMachinePollingTests.online(TestApp.rules(longPollWait: 0))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))  // timer polling: the next in 60 s or so
        // 30 requests in 15 s: the server is asked at once, then again 10 s later, no more.
        var sent: [Duration] = []
        for index in 0..<30 {
            run.send(.inboxRequests([InboxDelivery(id: "s\(index)", path: "/inbox/s\(index).json", content: .request(.sync))]))
            if run.cancelAsked { run.answer(.requestCancelled) }  // the timer's request gives way
            if case .fetchSettings(_, _, nil, _, _)? = run.request {
                sent.append(run.instant.offset)
                run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
            }
            run.advance(by: .milliseconds(500))
        }
        #expect(sent == [.zero, .seconds(10)])
    }

    @Test(
        "a 'sync now' held back by the 10 s limit is not used up by a long-poll that starts meanwhile: when due, it ends it and a waiting report goes"
    )
    func heldSyncNowKept() {
        var run = SyncMachinePollingTests.online()
        run.send(.inboxRequests([InboxDelivery(id: "s1", path: "/inbox/s1.json", content: .request(.sync))]))
        run.answer(.requestCancelled)
        let first = run.instant
        // Revision 8 comes; its report fails (a proxy's page): it waits for the next turn.
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        run.answer(.requestFailed(SyncFailure.refusal(status: 404, code: nil, retryAfter: nil, summary: "404 from a proxy")))
        run.send(.inboxRequests([InboxDelivery(id: "s2", path: "/inbox/s2.json", content: .request(.sync))]))
        run.advanceToAlarm()
        #expect(
            run.request == .fetchSettings(wait: 55, knownRevision: 8, notBefore: nil, repeatsWhileUnchanged: []),
            "after the backoff, the long-poll; the report waits")
        run.advance(by: run.instant.duration(to: first.advanced(by: .seconds(10))))
        #expect(run.cancelAsked, "the held sync now comes due and ends the long-poll")
        run.answer(.requestCancelled)
        #expect(run.request == .deliverReport(StatusReport(revision: 8, schemaVersion: 3, state: .applied, source: .agent)))
    }

    @Test("a long-poll in flight is cancelled for a local change, but not for a stranger's refused file or a sync beyond the limit")
    func cancelOnlyForWork() {
        var run = SyncMachinePollingTests.online()
        run.send(.inboxRequests([InboxDelivery(id: "x", path: nil, content: .refused("written by uid 1000, who may not"))]))
        #expect(!run.cancelAsked)
        run.send(.inboxRequests([InboxDelivery(id: "s1", path: "/inbox/s1.json", content: .request(.sync))]))
        #expect(run.cancelAsked)  // the first sync now is granted
        run.answer(.requestCancelled)
        run.send(.inboxRequests([InboxDelivery(id: "s2", path: "/inbox/s2.json", content: .request(.sync))]))
        #expect(!run.cancelAsked, "a second one within 10 s waits")
        run.send(.inboxRequests([InboxDelivery(id: "c1", path: "/inbox/c1.json", content: .request(.set(["greeting": "hi"])))]))
        #expect(run.cancelAsked)
        run.answer(.requestCancelled)
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 7))
    }

    @Test("the wall clock jumping a day forward or back changes no deadline, delay or backoff", arguments: [86_400, -86_400])
    func clockJumps(jump: Int64) {
        var run = MachineRun(TestApp.rules(expectAck: true, ackTimeout: .seconds(30)))
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        run.deliverRevision(8)
        #expect(run.machine.status.awaitingAck == 8)
        run.wallOffset += jump
        run.advance(by: .seconds(29))
        #expect(run.reports().filter { $0.state == .unsupported }.isEmpty)
        run.advance(by: .seconds(1))
        #expect(run.cancelAsked, "the overdue acknowledgement ends the long-poll")
        run.answer(.requestCancelled)
        #expect(run.reports().last?.state == .unsupported)
        run.answer(.reportDelivered)
        // Backoff after a failure is as long whatever the wall clock does meanwhile.
        run.answer(.requestFailed(.transient("connection refused")))
        let hold = run.instant.duration(to: run.machine.holdUntil!)
        run.wallOffset -= jump
        run.advance(by: hold - .milliseconds(1))
        #expect(run.request == nil)
        run.advance(by: .milliseconds(1))
        #expect(run.request != nil)
    }

    @Test("failures back off with full jitter, doubling to the cap, and a success resets it")
    func backoff() {
        var run = SyncMachinePollingTests.online()
        var holds: [Duration] = []
        for failures in 1...10 {
            run.answer(.requestFailed(.transient("connection refused")))
            #expect(run.machine.backoff.failures == failures, "the count goes on: no success in between")
            let hold = run.instant.duration(to: run.machine.holdUntil!)
            holds.append(hold)
            run.advanceToAlarm()
        }
        #expect(holds.suffix(5).allSatisfy { $0 > .seconds(1) }, "later waits are drawn from wider intervals: \(holds)")
        for (index, hold) in holds.enumerated() {
            #expect(hold <= min(.seconds(300), .seconds(1) * (1 << index)))
        }
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.machine.backoff.failures == 0)
    }
}

@Suite("Sync machine: applying, hooks, reports")
struct SyncMachineApplyTests {
    @Test("the hook runs after the file is written and a delay of at most jitter; the next request waits for it and the report")
    func hookOrder() {
        var run = MachineRun(TestApp.rules(jitter: .seconds(5), hasHook: true))
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        let answered = run.deliverRevision(8)
        #expect(answered.contains(.persist(TestApp.settings(8).withSyncedAt(run.wall), metadata: nil)))
        #expect(run.request == nil && run.fetches().count == 1)
        let started = run.instant
        run.advanceToAlarm()
        #expect(started.duration(to: run.instant) <= .seconds(5))
        guard case .runHook(let settings, let secrets) = run.request else {
            Issue.record("no hook: \(String(describing: run.request))")
            return
        }
        #expect(settings.revision == 8 && secrets == ["1234"])
        run.answer(.hookFinished(.failed("hook /usr/bin/reload exited with status 1: ********")))
        #expect(
            run.reports().last
                == StatusReport(
                    revision: 8, schemaVersion: 3, state: .error, message: "hook /usr/bin/reload exited with status 1: ********",
                    source: .agent))
        let delivered = run.answer(.reportDelivered)
        #expect(run.fetches(in: delivered).map(\.known) == [8])
        #expect(run.machine.status.state == .error && run.machine.status.lastError?.hasPrefix("hook") == true)
        #expect(!run.actions.contains(.restorePrevious), "the settings file stays as written")
    }

    @Test("a revision that fails validation keeps the last good settings and is reported once, with every reason")
    func refused() {
        var run = SyncMachinePollingTests.online()
        run.deliverRevision(8, ["greeting": "hello", "volume": 11, "pin": "12"])
        #expect(run.machine.settings?.revision == 7)
        #expect(run.machine.knownRevision == 8)
        #expect(!run.actions.contains { if case .persist? = $0.file { true } else { false } })
        let report = run.reports().last
        #expect(report?.state == .error && report?.message.contains("/volume") == true && report?.message.contains("12") == false)
        #expect(run.fetches().last?.known == 8)
    }

    @Test("a full disk: the last good settings stay, the failure is reported and backed off, the next turn tries again")
    func persistFailure() {
        var run = SyncMachinePollingTests.online()
        run.failing[.persist] = "settings.json: No space left on device"
        run.deliverRevision(8)
        #expect(run.machine.settings?.revision == 7 && run.machine.knownRevision == 7)
        #expect(run.machine.reports.reports.last?.message == "cannot write the settings: settings.json: No space left on device")
        #expect(run.machine.holdUntil != nil)
        // Failing again and again (the server sends the same revision at once): the backoff
        // grows, since no outcome was ever reached.
        for failures in 2...6 {
            run.advanceToAlarm()
            if case .deliverReport = run.request { run.answer(.reportDelivered) }
            if run.request == nil { run.advanceToAlarm() }
            run.deliverRevision(8)
            #expect(run.machine.backoff.failures == failures)
        }
        run.failing[.persist] = nil
        run.advanceToAlarm()
        #expect(run.request == .deliverReport(run.machine.reports.reports[0]))
        run.answer(.reportDelivered)
        if run.request == nil { run.advanceToAlarm() }
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 7, notBefore: nil, repeatsWhileUnchanged: []))
        run.deliverRevision(8)
        #expect(run.machine.settings?.revision == 8)
        #expect(run.machine.backoff.failures == 0)
    }

    @Test("status.json that cannot be written: logged, nothing else waits for it, and the outcome is written once the disk allows")
    func statusWriteFailure() {
        var run = SyncMachinePollingTests.online()
        run.failing[.writeStatus] = "status.json: No space left on device"
        let failed = run.deliverRevision(8)
        #expect(run.machine.settings?.revision == 8, "the settings are written all the same")
        #expect(run.events(in: failed).contains("disk-error"))
        #expect(run.machine.files.status?.revision != 8)
        #expect(run.request?.isFetch == true, "the agent goes on: its long-poll is out")
        // The disk allows again; the next turn (an unchanged answer, nothing new to say) writes
        // the outcome the failed write left out, at once.
        run.failing[.writeStatus] = nil
        run.answer(.settingsAnswer(SettingsAnswer(document: nil, acceptsStatus: true)))
        #expect(run.machine.files.status?.revision == 8 && run.machine.files.status?.state == .applied)
    }

    @Test("a report that fails is kept (saved), and goes on the next turn; one the server refuses for good is dropped")
    func queuedReports() {
        var run = SyncMachinePollingTests.online()
        _ = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        let failed = run.answer(.requestFailed(.transient("503")))
        #expect(failed.contains { $0.isSaveReports })
        #expect(run.machine.reports.reports.map(\.revision) == [8])
        #expect(run.request == nil && run.machine.holdUntil != nil, "every request waits for the backoff")
        run.advanceToAlarm()
        #expect(run.request?.isFetch == true, "then the settings request goes; the report waits for the next turn")
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.request == .deliverReport(run.machine.reports.reports[0]))
        let dropped = run.answer(.requestFailed(TestApp.refusal(422, .badRequest)))
        #expect(run.events(in: dropped).contains("report-refused"))
        #expect(run.machine.reports.isEmpty)
        #expect(dropped.contains(.saveReports(PendingReports())))
    }

    @Test("metadata of another version is fetched; a mismatch fetches it again after backoff; unsupported metadata is reported so")
    func metadata() throws {
        var run = SyncMachinePollingTests.online()
        run.answer(.settingsAnswer(SettingsAnswer(document: SettingsDocument(app: "kiosk", schemaVersion: 4, revision: 8, values: [:]))))
        #expect(run.request == .fetchMetadata(ifNoneMatch: nil))
        run.answer(.metadataAnswer(TestApp.metadataDocument))  // still version 3
        #expect(run.machine.holdUntil != nil && run.events().contains("sync-failed"))
        // A keyword of neither 2020-12 nor fleetset's extensions: unsupported, never half-checked.
        let unsupported: JSONValue = [
            "app": "kiosk", "version": 4,
            "schema": ["type": "object", "properties": ["greeting": ["type": "string", "futureKeyword": true]]],
        ]
        run.advanceToAlarm()
        run.answer(.settingsAnswer(SettingsAnswer(document: SettingsDocument(app: "kiosk", schemaVersion: 4, revision: 8, values: [:]))))
        #expect(run.request == .fetchMetadata(ifNoneMatch: nil), "the mismatching document is forgotten")
        let bytes = Array(unsupported.serialized().utf8)
        run.answer(.metadataAnswer(MetadataDocument(bytes: bytes, etag: "\"m4\"")))
        #expect(run.machine.settings?.revision == 7)
        #expect(run.reports().last?.revision == 8 && run.reports().last?.state == .unsupported)
    }

    @Test("the admin's token rotation goes before the next request")
    func rotation() {
        var run = SyncMachinePollingTests.online()
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil, rotationRequested: true)))
        #expect(run.request == .rotateToken)
        run.answer(.tokenRotated)
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 7, notBefore: nil, repeatsWhileUnchanged: []))
    }

    @Test("a rotation that keeps failing never stops the loop: requests go on, the rotation waits for its own backoff")
    func failingRotation() {
        var run = SyncMachinePollingTests.online()
        var rotations = 0
        var fetches = 0
        for _ in 0..<40 {
            switch run.request {
            case .rotateToken?:
                rotations += 1
                run.answer(.requestFailed(TestApp.refusal(404, .notFound)))
            case .fetchSettings?:
                fetches += 1
                run.advance(by: .seconds(55))
                run.answer(.settingsAnswer(SettingsAnswer(document: nil, rotationRequested: true)))
            default:
                run.advanceToAlarm()
            }
        }
        #expect(fetches >= 20, "\(fetches) settings requests, \(rotations) rotations")
        #expect(rotations >= 2 && rotations < fetches)
        #expect(run.events().contains("token-rotation-failed"))
    }

    @Test("status.json: written on every outcome, but a quiet device's last-sync time at most once a minute")
    func statusSparingly() {
        var run = SyncMachinePollingTests.online(TestApp.rules(longPollWait: 20))
        let before = run.actions.filter(\.isWriteStatus).count
        for _ in 0..<30 {  // ten minutes of 304s every 20 s
            run.advance(by: .seconds(20))
            run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        }
        let writes = run.actions.filter(\.isWriteStatus).count - before
        #expect((5...10).contains(writes), "\(writes) writes in ten minutes")
        let applied = run.deliverRevision(8)
        #expect(run.machine.status.revision == 8)
        #expect(applied.filter(\.isWriteStatus).count == 1, "one write for a new revision: its outcome")
        guard case .writeStatus(let last)? = run.actions.last(where: \.isWriteStatus)?.file else { return }
        #expect(last.revision == 8 && last.state == .applied)
    }
}

@Suite("Sync machine: the device's changes")
struct SyncMachineChangeTests {
    static func change(_ id: String, _ values: JSONObject) -> InboxDelivery {
        InboxDelivery(id: id, path: "/inbox/\(id).json", content: .request(.set(values)))
    }

    @Test("a request file is removed only once changes.json holding it is saved; a failed save keeps it until a later save works")
    func removedAfterSave() {
        var run = SyncMachinePollingTests.online()
        run.failing[.saveJournal] = "No space left on device"
        let taken = run.send(.inboxRequests([Self.change("c1", ["greeting": "hi"])]))
        #expect(taken.contains { if case .saveJournal? = $0.file { true } else { false } })
        #expect(!taken.contains(.removeRequest(path: "/inbox/c1.json")))
        run.failing[.saveJournal] = nil
        run.answer(.requestCancelled)  // the long-poll ends for the change
        let confirmed = run.answer(.changeConfirmed(revision: 8))
        #expect(confirmed.contains(.removeRequest(path: "/inbox/c1.json")))
    }

    @Test("changes wait for settings to check them against, then go")
    func waitForSettings() {
        var run = MachineRun()
        run.start(online: [Self.change("c1", ["greeting": "hi"])])
        #expect(run.machine.waitingRequests.map(\.id) == ["c1"])
        #expect(run.patches().isEmpty)
        run.deliverRevision(1)
        #expect(run.machine.journal.queued.map(\.id) == ["c1"])
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 1))
    }

    @Test("a change of a setting that is not x-writable is refused at once, with the reason, and its file removed")
    func notWritable() {
        var run = SyncMachinePollingTests.online()
        let actions = run.send(.inboxRequests([Self.change("c1", ["volume": 3])]))
        #expect(run.machine.journal.ended.first?.message.contains("is not x-writable") == true)
        #expect(actions.contains(.removeRequest(path: "/inbox/c1.json")))
        #expect(!run.cancelAsked)
    }

    @Test("two changes of one key before sending coalesce; the older ends superseded by the newer")
    func coalescing() {
        var run = MachineRun()
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)),
            online: [Self.change("c1", ["greeting": "one"]), Self.change("c2", ["greeting": "two"])])
        #expect(run.patches() == [["greeting": "two"]])
        #expect(
            run.machine.journal.lookup("c1")
                == .ended(.init(id: "c1", state: .superseded, keys: ["greeting"], supersededBy: "c2", endedAt: run.wall)))
    }

    @Test("a change whose values are in place already ends applied with nothing sent")
    func alreadyInPlace() {
        var run = SyncMachinePollingTests.online()
        run.send(.inboxRequests([Self.change("c1", ["greeting": "hello"])]))
        #expect(run.patches().isEmpty)
        #expect(run.machine.journal.ended.map(\.state) == [.applied])
    }

    @Test("409s fetch the new revision and send again, five times in a row at most; then the loop backs off and tries again")
    func conflictLimit() {
        var run = SyncMachinePollingTests.online()
        run.send(.inboxRequests([Self.change("c1", ["greeting": "hi"])]))
        run.answer(.requestCancelled)
        for revision in 8...13 {
            #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: Int64(revision - 1)))
            run.answer(.requestFailed(TestApp.refusal(409, .staleRevision)))
            guard revision < 13 else { break }
            #expect(run.request == .fetchSettings(wait: 0, knownRevision: nil, notBefore: nil, repeatsWhileUnchanged: []))
            run.deliverRevision(Int64(revision))
        }
        #expect(run.request == nil && run.machine.holdUntil != nil)
        #expect(run.patches().count == 6)
        #expect(run.machine.backoff.failures == 1)
        run.advanceToAlarm()
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 12))
        // The next rounds of conflicts back off longer: the downloads between never reset it.
        for round in 2...3 {
            for revision in 0..<6 {
                run.answer(.requestFailed(TestApp.refusal(409, .staleRevision)))
                if revision < 5 { run.deliverRevision(Int64(100 * round + revision)) }
            }
            #expect(run.machine.backoff.failures == round)
            run.advanceToAlarm()
        }
    }

    @Test("a final refusal (422 with fleetset's body) ends the change with the server's reason, and the next change goes")
    func finalRefusal() {
        var run = MachineRun()
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)),
            online: [Self.change("c1", ["greeting": "one"]), Self.change("c2", ["title": "Hall"])])
        #expect(run.request == .patchSettings(["greeting": "one"], basedOn: 7))
        run.answer(.requestFailed(TestApp.refusal(422, .invalidValues)))
        guard case .ended(let outcome) = run.machine.journal.lookup("c1") else {
            Issue.record("c1 did not end")
            return
        }
        #expect(outcome.state == .refused && outcome.message == "the server refused: 422 invalid-values")
        #expect(run.machine.holdUntil == nil)
        #expect(run.request == .patchSettings(["title": "Hall"], basedOn: 7), "the next change goes at once")
    }

    @Test("an unreadable changes.json is never overwritten; changes wait in the inbox; reading is retried each turn")
    func unreadableJournal() {
        var run = MachineRun()
        run.journalOnDisk = nil
        run.start(
            LoadedState(
                settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, journal: nil,
                journalProblem: "changes.json: not JSON",
                status: TestApp.settledStatus(7)),
            online: [Self.change("c1", ["greeting": "hi"])])
        #expect(run.machine.waitingRequests.map(\.id) == ["c1"])
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(!run.actions.contains { if case .saveJournal? = $0.file { true } else { false } })
        #expect(run.actions.filter { $0 == .loadJournal }.count == 2)
        run.journalOnDisk = ChangeJournal()
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.machine.journal.queued.map(\.id) == ["c1"])
        #expect(run.actions.contains(.removeRequest(path: "/inbox/c1.json")))
        #expect(run.events().contains("disk-recovered"))
    }

    @Test("a request id used before is moved aside, never queued twice")
    func reusedID() {
        var run = SyncMachinePollingTests.online()
        run.send(.inboxRequests([Self.change("c1", ["greeting": "hello"])]))
        let again = run.send(.inboxRequests([Self.change("c1", ["greeting": "other"])]))
        #expect(again.contains { if case .moveRequestAside(path: "/inbox/c1.json", _)? = $0.file { true } else { false } })
    }
}

@Suite("Sync machine: the app's acknowledgement")
struct SyncMachineAckTests {
    static func ack(_ id: String, _ revision: Int64, _ state: StatusReport.State = .applied) -> InboxDelivery {
        InboxDelivery(id: id, path: "/inbox/\(id).json", content: .request(.ack(revision: revision, state: state, message: "reloaded")))
    }

    @Test("the app's ack is relayed as source app and ends the wait; its file goes once reports.json holds it")
    func relayed() {
        var run = MachineRun(TestApp.rules(expectAck: true))
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        run.deliverRevision(8)
        #expect(run.machine.ackDeadline != nil)
        let acked = run.send(.inboxRequests([Self.ack("a1", 8)]))
        let saved = run.index(of: \.isSaveReports, in: acked)
        let removed = run.index(of: { $0 == .removeRequest(path: "/inbox/a1.json") }, in: acked)
        #expect(saved != nil && removed != nil && saved! < removed!)
        #expect(run.machine.ackDeadline == nil && run.machine.status.awaitingAck == nil)
        run.answer(.requestCancelled)
        #expect(
            run.request == .deliverReport(StatusReport(revision: 8, schemaVersion: 3, state: .applied, message: "reloaded", source: .app)))
        run.advance(by: .seconds(120))
        #expect(run.reports().filter { $0.state == .unsupported }.isEmpty)
    }

    @Test("an ack of a revision the device never received is moved aside")
    func futureRevision() {
        var run = SyncMachinePollingTests.online()
        let actions = run.send(.inboxRequests([Self.ack("a1", 9)]))
        #expect(actions.contains { if case .moveRequestAside(path: "/inbox/a1.json", _)? = $0.file { true } else { false } })
        #expect(run.machine.reports.isEmpty)
    }

    @Test("after a restart the deadline in status.json is kept, but never further away than ackTimeout; one past is reported at once")
    func deadlineAfterRestart() {
        for (left, expected) in [(Int64(10), Duration.seconds(10)), (-5, nil), (86_400, .seconds(30))] {
            var run = MachineRun(TestApp.rules(expectAck: true, ackTimeout: .seconds(30)))
            var status = TestApp.settledStatus(7)
            status.awaitingAck = 7
            status.ackDeadline = run.wall + left
            run.start(LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: status))
            if let expected {
                #expect(run.machine.ackDeadline == TestInstant.zero.advanced(by: expected))
                #expect(run.machine.reports.isEmpty)
            } else {
                #expect(run.machine.ackDeadline == nil)
                #expect(
                    run.reports() == [
                        StatusReport(
                            revision: 7, schemaVersion: 3, state: .unsupported, message: "no acknowledgement from the app", source: .agent)
                    ])
            }
        }
    }
}

extension DeviceSettings {
    func withSyncedAt(_ time: Int64) -> DeviceSettings {
        var copy = self
        copy.syncedAt = time
        return copy
    }
}

@Suite("Sync machine: status.json records an outcome only once its report is safe")
struct SyncMachineOutcomeRecordTests {
    /// The outcomes `status.json` was written with, in order: (revision, state).
    static func statusWrites(_ actions: [Step]) -> [(Int64?, AppStatus.State)] {
        actions.compactMap { if case .writeStatus(let status)? = $0.file { (status.revision, status.state) } else { nil } }
    }

    @Test("online: the status of revision 8 is written after its report is delivered, never before")
    func afterDelivery() {
        var run = SyncMachinePollingTests.online()
        let answered = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        #expect(run.request == .deliverReport(StatusReport(revision: 8, schemaVersion: 3, state: .applied, source: .agent)))
        #expect(!Self.statusWrites(answered).contains { $0.0 == 8 }, "a crash now must not lose the report")
        let delivered = run.answer(.reportDelivered)
        #expect(Self.statusWrites(delivered).contains { $0.0 == 8 && $0.1 == .applied })
    }

    @Test("the report cannot go: reports.json first, the status after its save; a failed save writes no status at all")
    func afterSave() {
        var run = SyncMachinePollingTests.online()
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        run.failing[.saveReports] = "No space left on device"
        let failed = run.answer(.requestFailed(.transient("503")))
        #expect(failed.contains { $0.isSaveReports })
        #expect(!Self.statusWrites(failed).contains { $0.0 == 8 })
        run.failing[.saveReports] = nil
        let held = run.advanceToAlarm()
        #expect(!held.contains { $0.isSaveReports }, "a failed save is tried again on the next turn, not in a loop")
        run.advance(by: .seconds(55))
        let turn = run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(turn.contains { $0.isSaveReports })
        #expect(run.request == .deliverReport(StatusReport(revision: 8, schemaVersion: 3, state: .applied, source: .agent)))
        let delivered = run.answer(.reportDelivered)
        #expect(Self.statusWrites(delivered).contains { $0.0 == 8 && $0.1 == .applied })
        #expect(!Self.statusWrites(run.actions).dropLast().contains { $0.0 == 8 })
    }

    @Test("an overdue acknowledgement: awaitingAck stays in status.json until the unsupported report is safe")
    func ackTimeout() {
        var run = MachineRun(TestApp.rules(expectAck: true, ackTimeout: .seconds(30)))
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        run.deliverRevision(8)
        let overdue = run.advance(by: .seconds(30))
        let saved = overdue.firstIndex { $0.isSaveReports }
        let written = overdue.firstIndex { if case .writeStatus(let status)? = $0.file { status.awaitingAck == nil } else { false } }
        #expect(saved != nil && written != nil && saved! < written!)
        if case .writeStatus(let status)? = overdue[written ?? 0].file { #expect(status.state == .unsupported) }
        #expect(run.machine.reports.reports.last?.state == .unsupported)
    }
}
