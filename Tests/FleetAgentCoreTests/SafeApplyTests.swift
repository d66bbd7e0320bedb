import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Testing

@Suite("Apply windows as values")
struct ApplyWindowTests {
    /// 2027-01-15 08:00:00 UTC, a Friday.
    static let fridayEight: Int64 = 1_800_000_000

    @Test("days, ranges, lists and times are read strictly")
    func parsing() throws {
        let weekdays = try #require(ApplyWindow("Mon-Fri 02:00-04:00"))
        #expect(weekdays.days == [1, 2, 3, 4, 5] && weekdays.start == 7_200 && weekdays.end == 14_400)
        #expect(ApplyWindow("daily 22:00-06:00")?.days == Set(0...6))
        #expect(ApplyWindow("Sat,Sun 00:00-24:00")?.days == [0, 6])
        #expect(ApplyWindow("fri-mon 10:00:30-10:00:45")?.days == [5, 6, 0, 1])
        #expect(ApplyWindow("Mon-Wed,Fri 01:00-02:00")?.days == [1, 2, 3, 5])
        for bad in [
            "Mon 25:00-26:00", "Funday 01:00-02:00", "Mon 01:00", "Mon 02:00-02:00", "Mon 1:00-2:00", "Mon 01:00-24:30", "01:00-02:00",
            "Mon 24:00-01:00", "Mon,, 01:00-02:00", "Mon 01:60-02:00", "Mon +1:00-02:00",
        ] {
            #expect(ApplyWindow(bad) == nil, "\(bad)")
        }
    }

    @Test("open inside the window on its days, also across midnight; the next opening is found")
    func evaluation() throws {
        let friday = Self.fridayEight
        let weekdays = try #require(ApplyWindow("Mon-Fri 02:00-04:00"))
        #expect(!weekdays.isOpen(atLocal: friday))
        #expect(weekdays.isOpen(atLocal: friday - 5 * 3600))  // Friday 03:00
        #expect(!weekdays.isOpen(atLocal: friday - 4 * 3600))  // Friday 04:00: closed at its end
        // Next: Monday 02:00 (Saturday and Sunday are not listed).
        #expect(weekdays.nextOpening(atOrAfterLocal: friday) == friday - 8 * 3600 + 3 * 86_400 + 2 * 3600)
        let overnight = try #require(ApplyWindow("Fri 22:00-02:00"))
        #expect(overnight.isOpen(atLocal: friday + 15 * 3600))  // Friday 23:00
        #expect(overnight.isOpen(atLocal: friday + 17 * 3600))  // Saturday 01:00
        #expect(!overnight.isOpen(atLocal: friday + 18 * 3600))  // Saturday 02:00
        #expect(!overnight.isOpen(atLocal: friday - 7 * 3600))  // Friday 01:00: Thursday is not listed
        #expect(overnight.nextOpening(atOrAfterLocal: friday) == friday + 14 * 3600)
        #expect([ApplyWindow]().allowApplying(atLocal: friday))
        #expect([weekdays, overnight].nextOpening(atOrAfterLocal: friday) == friday + 14 * 3600)
    }
}

@Suite("Sync machine: apply windows, the update lock, rollback")
struct SafeApplyTests {
    static func settled(_ revision: Int64 = 7) -> LoadedState {
        LoadedState(
            settings: TestApp.settings(revision), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(revision),
            previous: TestApp.settings(revision - 1))
    }

    static func persists(_ actions: [Step]) -> [Int64] {
        actions.compactMap { if case .persist(let settings, _)? = $0.file { settings.revision } else { nil } }
    }

    @Test("outside its windows a revision waits: reported pending once, polling goes on, applied when the window opens")
    func windowDefers() {
        // Friday 08:00 UTC is 09:00 on a device at UTC+1: its 10:00 window opens in an hour.
        var run = MachineRun(TestApp.rules(applyWindows: ["daily 10:00-11:00"]))
        run.utcOffset = 3600  // 09:00 local now
        run.start(Self.settled())
        run.deliverRevision(8, ["greeting": "new", "volume": 5, "pin": "1234"])
        #expect(Self.persists(run.actions).isEmpty)
        #expect(run.machine.settings?.revision == 7)
        #expect(run.machine.status.waitingRevision == 8)
        #expect(run.machine.status.waitingReason?.hasPrefix("outside the apply windows (daily 10:00-11:00, device local time)") == true)
        #expect(run.machine.status.waitingReason?.hasSuffix("the next opens at 2027-01-15T09:00:00Z") == true)
        #expect(run.reports().map(\.state) == [.pending])
        #expect(run.reports().first?.revision == 8)
        // Polling goes on, with the waiting revision as the one known; the same revision again changes nothing.
        #expect(run.fetches().last?.known == 8)
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.reports().count == 1)
        #expect(run.alarm == TestInstant.zero.advanced(by: .seconds(3600)))
        // The window opens in an hour: the long-poll in flight is cut short and the revision written.
        let opened = run.advance(by: .seconds(3600))
        #expect(opened.contains(.takeUpdateLock))
        #expect(opened.contains(.cancelRequest))
        let written = run.answer(.requestCancelled)
        #expect(Self.persists(written) == [8])
        #expect(run.machine.settings?.revision == 8 && run.machine.status.waitingRevision == nil)
        #expect(written.contains(.releaseUpdateLock))
        #expect(run.request == .deliverReport(StatusReport(revision: 8, schemaVersion: 3, state: .applied, source: .agent)))
    }

    @Test("a newer revision replaces the one waiting; only the newest is written when the window opens")
    func newerReplaces() {
        var run = MachineRun(TestApp.rules(applyWindows: ["Sat 00:00-24:00"]))
        run.start(Self.settled())
        run.deliverRevision(8)
        run.deliverRevision(9, ["greeting": "nine", "volume": 5, "pin": "1234"])
        #expect(run.reports().map { "\($0.revision) \($0.state)" } == ["8 pending", "9 pending"])
        #expect(run.machine.status.waitingRevision == 9)
        // Saturday 00:00 UTC is 16 h after Friday 08:00.
        run.advance(by: .seconds(16 * 3600))
        if run.request != nil, case .fetchSettings = run.request { run.answer(.requestCancelled) }
        #expect(Self.persists(run.actions) == [9])
    }

    @Test("a revision refused while another waits ends the wait: nothing stale is applied later")
    func refusalDropsDeferred() {
        var run = MachineRun(TestApp.rules(applyWindows: ["Sat 00:00-24:00"]))
        run.start(Self.settled())
        run.deliverRevision(8)
        run.deliverRevision(9, ["greeting": "hello", "volume": 99, "pin": "1234"])
        #expect(run.machine.deferred == nil && run.machine.status.waitingRevision == nil)
        run.advance(by: .seconds(3 * 86_400))
        #expect(Self.persists(run.actions).isEmpty)
    }

    @Test("an edit put back right after the lock is taken keeps the lock for the revision written next")
    func lockKeptAcrossRestore() {
        var run = MachineRun()
        run.appHoldsUpdateLock = true
        run.start(Self.settled())
        run.deliverRevision(8)
        // The app edits settings.json, then lets go of its lock: the retry takes the lock, the
        // long-poll ends, the edit is put back first, then revision 8 is written, with the lock.
        run.advance(by: .milliseconds(1_500))
        run.settingsEdited = true
        run.send(.settingsFileChanged)
        run.appHoldsUpdateLock = false
        let taken = run.advance(by: .milliseconds(500))
        #expect(taken.contains(.takeUpdateLock) && taken.contains(.cancelRequest))
        let written = run.answer(.requestCancelled)
        let files = written.compactMap(\.file)
        let rewrite = files.firstIndex { if case .rewriteSettings = $0 { true } else { false } }
        let persist = files.firstIndex { if case .persist = $0 { true } else { false } }
        let release = files.firstIndex(of: .releaseUpdateLock)
        #expect(rewrite != nil && persist != nil && rewrite! < persist!, "\(files)")
        #expect(release != nil && persist! < release!, "the lock is let go only once 8 is written: \(files)")
        #expect(run.machine.settings?.revision == 8 && !run.machine.holdsUpdateLock)
    }

    @Test("while the app holds its update lock the revision waits, tried again every 2 s; the lock is held through the hook")
    func updateLock() {
        var run = MachineRun(TestApp.rules(jitter: .seconds(1), hasHook: true))
        run.appHoldsUpdateLock = true
        run.start(Self.settled())
        run.deliverRevision(8)
        #expect(Self.persists(run.actions).isEmpty)
        #expect(run.machine.status.waitingReason == "the app holds its update lock (updates.lock); applying when it lets go")
        #expect(run.reports().map(\.state) == [.pending])
        #expect(run.events().contains("deferred"))
        let retried = run.advance(by: SafeApplyMachine.updateLockRetry)
        #expect(retried.contains(.takeUpdateLock))
        #expect(run.events().filter { $0 == "deferred" }.count == 1, "the same reason is logged once")
        run.appHoldsUpdateLock = false
        let taken = run.advance(by: SafeApplyMachine.updateLockRetry)
        #expect(taken.contains(.takeUpdateLock) && taken.contains(.cancelRequest))
        let written = run.answer(.requestCancelled)
        #expect(Self.persists(written) == [8])
        #expect(run.machine.holdsUpdateLock)
        #expect(!written.contains(.releaseUpdateLock), "held until the hook has run")
        run.advanceToAlarm()
        let hooked = run.answer(.hookFinished(.succeeded))
        #expect(hooked.contains(.releaseUpdateLock) && !run.machine.holdsUpdateLock)
    }

    @Test(
        "an app that never lets go of its update lock keeps a revision out for updateLockMaxHold, then it is applied and its report says why"
    )
    func updateLockMaxHold() {
        var rules = TestApp.rules(jitter: .seconds(1))
        rules.updateLockMaxHold = .seconds(60)
        var run = MachineRun(rules)
        run.appHoldsUpdateLock = true
        run.start(Self.settled())
        run.deliverRevision(8)
        #expect(Self.persists(run.actions).isEmpty)
        var written: [Int64] = []
        for _ in 0..<15 { written += Self.persists(run.advance(by: SafeApplyMachine.updateLockRetry)) }
        // A newer revision replaces the one waiting: the app's hold is counted from its first refusal still.
        run.deliverRevision(9)
        for _ in 0..<14 { written += Self.persists(run.advance(by: SafeApplyMachine.updateLockRetry)) }
        #expect(written.isEmpty, "58 s: the lock is still the app's to hold")
        let overridden = run.advance(by: SafeApplyMachine.updateLockRetry)
        #expect(run.events().contains("update-lock-overridden"))
        let persisted = Self.persists(overridden + run.answer(.requestCancelled))
        #expect(persisted == [9], "written without the lock 60 s after the first refusal")
        #expect(!run.machine.holdsUpdateLock)
        let applied = run.reports().last { $0.revision == 9 }
        #expect(applied?.state == .applied)
        #expect(applied?.message == "applied without the update lock: the app held updates.lock for over 1 min (updateLockMaxHold)")
    }

    @Test("rollbackOnError: a failed hook puts the previous generation back, runs its hook, reports error once; no loop")
    func rollbackOnHookFailure() {
        var run = MachineRun(TestApp.rules(jitter: .seconds(1), hasHook: true, rollbackOnError: true))
        run.start(Self.settled())
        run.deliverRevision(8, ["greeting": "eight", "volume": 5, "pin": "1234"])
        run.advanceToAlarm()
        let failed = run.answer(.hookFinished(.failed("hook /usr/bin/reload exited with status 1")))
        #expect(failed.contains(.restorePrevious))
        #expect(run.machine.settings?.revision == 7)
        #expect(run.reports().filter { $0.revision == 8 }.isEmpty, "no report before the rollback is done")
        run.advanceToAlarm()
        #expect(run.request == .runHook(TestApp.settings(7), secrets: ["1234"]))
        run.answer(.hookFinished(.succeeded))
        let report = run.request
        #expect(
            report
                == .deliverReport(
                    StatusReport(
                        revision: 8, schemaVersion: 3, state: .error,
                        message: "the hook failed: hook /usr/bin/reload exited with status 1; rolled back to revision 7", source: .agent)))
        run.answer(.reportDelivered)
        #expect(run.machine.status.revision == 7 && run.machine.status.latestRevision == 8 && run.machine.status.state == .error)
        #expect(run.events().contains("rolled-back"))
        // Revision 8 is decided on: asked for with If-None-Match, and not applied when it comes again.
        #expect(run.fetches().last?.known == 8)
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8))))
        #expect(Self.persists(run.actions) == [8])
        // A newer revision is applied, and may itself be rolled back to 7.
        run.deliverRevision(9)
        #expect(Self.persists(run.actions) == [8, 9])
    }

    @Test("the previous generation's hook failing too is said in the report; the rollback is not rolled back")
    func rollbackHookFailsToo() {
        var run = MachineRun(TestApp.rules(jitter: .seconds(1), hasHook: true, rollbackOnError: true))
        run.start(Self.settled())
        run.deliverRevision(8)
        run.advanceToAlarm()
        run.answer(.hookFinished(.failed("exit 1")))
        run.advanceToAlarm()
        let again = run.answer(.hookFinished(.failed("exit 2")))
        #expect(!again.contains(.restorePrevious))
        #expect(run.reports().last?.message == "the hook failed: exit 1; rolled back to revision 7, whose hook failed too: exit 2")
        #expect(run.actions.filter { $0 == .restorePrevious }.count == 1)
    }

    @Test("rollbackOnError: an app's error acknowledgement rolls back; without a previous generation nothing is restored")
    func rollbackOnAppError() {
        var run = MachineRun(TestApp.rules(expectAck: true, rollbackOnError: true))
        run.start(Self.settled())
        run.deliverRevision(8)
        let acked = run.send(.inboxRequests([SyncMachineAckTests.ack("a1", 8, .error)]))
        #expect(acked.contains(.cancelRequest))
        let rolled = run.answer(.requestCancelled)
        #expect(rolled.contains(.restorePrevious))
        #expect(run.machine.settings?.revision == 7)
        var delivered: [StatusReport] = []
        while case .deliverReport(let report) = run.request {
            delivered.append(report)
            run.answer(.reportDelivered)
        }
        #expect(delivered.map(\.source) == [.app, .agent])
        #expect(delivered.last?.message == "the app reported error: reloaded; rolled back to revision 7")

        var first = MachineRun(TestApp.rules(jitter: .seconds(1), hasHook: true, rollbackOnError: true))
        first.start(LoadedState())
        first.deliverRevision(1)
        first.advanceToAlarm()
        let failed = first.answer(.hookFinished(.failed("exit 1")))
        #expect(!failed.contains(.restorePrevious))
        #expect(first.reports().last?.message == "exit 1")
    }

    @Test("after a restart a revision that was waiting is fetched and checked again, even after an error outcome")
    func waitingSurvivesRestart() {
        var status = TestApp.settledStatus(7)
        status.state = .error  // the last outcome: a rollback, say
        status.latestRevision = 8
        status.waitingRevision = 8
        status.waitingReason = "outside the apply windows"
        var run = MachineRun(TestApp.rules(applyWindows: ["Sat 00:00-24:00"]))
        run.start(LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: status))
        #expect(run.fetches().map(\.known) == [7])
        #expect(run.machine.status.waitingRevision == nil)
        run.deliverRevision(8)
        #expect(run.machine.status.waitingRevision == 8)
    }

    @Test("a newer revision arriving while the lock is held for the one waiting lets go of the lock, then takes it for the newer")
    func lockReleasedWhenReplaced() {
        var run = MachineRun(TestApp.rules(applyWindows: ["Fri 09:00-10:00"]))
        run.start(Self.settled())
        run.deliverRevision(8)
        #expect(run.machine.deferred != nil)
        // The window opens while a long-poll is in flight: the lock is taken and the request cut short…
        let opened = run.advance(by: .seconds(3600))
        #expect(opened.contains(.takeUpdateLock) && opened.contains(.cancelRequest) && run.machine.holdsUpdateLock)
        // …but the long-poll brings revision 9 first.
        let answered = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(9))))
        // Let go for 8, taken for 9, 9 written (no hook), let go again.
        let locks = answered.filter { $0 == .releaseUpdateLock || $0 == .takeUpdateLock }
        #expect(locks.map(\.file) == [.releaseUpdateLock, .takeUpdateLock, .releaseUpdateLock])
        #expect(Self.persists(run.actions) == [9])
        #expect(!run.machine.holdsUpdateLock)
        #expect(run.actions.filter { $0 == .takeUpdateLock }.count == run.actions.filter { $0 == .releaseUpdateLock }.count)
    }

    @Test("after a restart the rolled-back revision stays decided on")
    func rollbackSurvivesRestart() {
        var status = TestApp.settledStatus(7)
        status.state = .error
        status.latestRevision = 8
        var run = MachineRun(TestApp.rules(hasHook: true, rollbackOnError: true))
        run.start(LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: status))
        #expect(run.fetches().map(\.known) == [8])
    }
}

/// The machine's type, for its static members.
typealias SafeApplyMachine = Machine
