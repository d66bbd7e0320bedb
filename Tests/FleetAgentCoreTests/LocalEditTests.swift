import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Testing

@Suite("Sync machine: settings.json edited on the device")
struct LocalEditTests {
    static func settled(_ revision: Int64 = 7, editedWhileStopped: Bool = false) -> LoadedState {
        LoadedState(
            settings: TestApp.settings(revision), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(revision),
            previous: TestApp.settings(revision - 1), editedWhileStopped: editedWhileStopped)
    }

    static func rewrites(_ actions: [Step]) -> [Int64] {
        actions.compactMap { if case .rewriteSettings(let settings)? = $0.file { settings.revision } else { nil } }
    }

    static func checks(_ actions: [Step]) -> Int {
        actions.count { $0 == .checkSettingsFile }
    }

    /// A started machine with a hook, serving revision 7 and waiting on a long-poll.
    static func serving(hasHook: Bool = true) -> MachineRun {
        var run = MachineRun(TestApp.rules(hasHook: hasHook))
        run.start(settled())
        #expect(run.request?.isFetch == true)
        return run
    }

    @Test("an edit is put back once the writes settle: the long-poll ends, the hook runs, applied is reported with the detail")
    func editRestored() throws {
        var run = Self.serving()
        run.settingsEdited = true
        let seen = run.send(.settingsFileChanged)
        #expect(Self.checks(seen) == 0, "not before the writes have settled")
        let settled = run.advance(by: Machine.localEditSettle)
        #expect(Self.checks(settled) == 1)
        #expect(run.events(in: settled).contains("local-edit"))
        #expect(settled.contains(.cancelRequest), "the long-poll gives way")
        let restored = run.answer(.requestCancelled)
        #expect(Self.rewrites(restored) == [7])
        #expect(!run.settingsEdited)
        run.advanceToAlarm()  // the hook's jitter
        guard case .runHook(let settings, _)? = run.request else {
            Issue.record("no hook after the restore: \(String(describing: run.request))")
            return
        }
        #expect(settings == TestApp.settings(7))
        run.answer(.hookFinished(.succeeded))
        let report = try #require(run.reports().last)
        #expect(report.revision == 7 && report.state == .applied && report.detail == .restoredAfterLocalEdit)
        #expect(report.message == "settings.json was changed on the device; revision 7 was put back")
        run.answer(.reportDelivered)
        #expect(run.machine.status.revision == 7 && run.machine.status.state == .applied)
        #expect(run.request?.isFetch == true, "polling goes on")
    }

    @Test(
        "something that keeps rewriting settings.json is not fought for ever: 5 restores in 10 minutes, then one error report, then restores again"
    )
    func restoreLimit() throws {
        var run = Self.serving()
        /// Edits the file and lets the check run; returns the revisions rewritten.
        func edit() -> [Int64] {
            run.settingsEdited = true
            _ = run.send(.settingsFileChanged)
            var actions = run.advance(by: Machine.localEditSettle)
            if actions.contains(.cancelRequest) { actions += run.answer(.requestCancelled) }
            let rewritten = Self.rewrites(actions)
            guard !rewritten.isEmpty else { return [] }
            run.advanceToAlarm()  // the hook's jitter
            run.answer(.hookFinished(.succeeded))
            run.answer(.reportDelivered)
            return rewritten
        }
        for round in 1...Machine.restoreLimit { #expect(edit() == [7], "restore \(round)") }
        let reportsBefore = run.reports().count
        #expect(edit().isEmpty, "the sixth edit within the window stays")
        let refusal = try #require(run.reports().last)
        #expect(run.reports().count == reportsBefore + 1 && refusal.state == .error)
        #expect(refusal.message.hasPrefix("settings.json keeps being changed on the device: put back 5 times in 10 minutes"))
        run.answer(.reportDelivered)
        #expect(edit().isEmpty)
        #expect(run.reports().count == reportsBefore + 1, "reported once")
        _ = run.advance(by: Machine.restoreWindow)
        #expect(edit() == [7], "the window passed: put back again")
    }

    @Test("the agent's own writes are no edit: a change event with the file as written makes a check and nothing else")
    func ownWriteIsNoEdit() {
        var run = Self.serving()
        run.send(.settingsFileChanged)
        let settled = run.advance(by: Machine.localEditSettle)
        #expect(Self.checks(settled) == 1)
        #expect(Self.rewrites(run.actions).isEmpty)
        #expect(!settled.contains(.cancelRequest))
        #expect(!run.events(in: settled).contains("local-edit"))
    }

    @Test("the restore's own write makes no second round: no loop")
    func noLoop() {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        run.send(.settingsFileChanged)
        run.advance(by: Machine.localEditSettle)
        run.answer(.requestCancelled)
        #expect(Self.rewrites(run.actions) == [7])
        // The rewrite itself is seen by the watch.
        run.send(.settingsFileChanged)
        run.advance(by: Machine.localEditSettle)
        run.send(.settingsFileChanged)
        run.advance(by: .seconds(30))
        #expect(Self.rewrites(run.actions) == [7])
        #expect(run.reports().filter { $0.detail == .restoredAfterLocalEdit }.count == 1)
    }

    @Test("an editor saving in several steps makes one check and one restore; a stream of writes is checked after 10 s at most")
    func debounced() {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        var produced: [Step] = []
        for _ in 0..<5 {
            produced += run.send(.settingsFileChanged)
            produced += run.advance(by: .milliseconds(300))
        }
        #expect(Self.checks(produced) == 0)
        produced += run.advance(by: Machine.localEditSettle)
        #expect(Self.checks(produced) == 1)
        run.answer(.requestCancelled)
        #expect(Self.rewrites(run.actions) == [7])

        var stream = Self.serving(hasHook: false)
        var checked = 0
        for _ in 0..<40 {
            checked += Self.checks(stream.send(.settingsFileChanged))
            checked += Self.checks(stream.advance(by: .milliseconds(500)))
        }
        #expect(checked == 2, "one check per 10 s of changes without a pause")
    }

    @Test("a hand edit is found at the next answer even without a change event")
    func checkedOnEachAnswer() {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        let answered = run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.checks(answered) == 1)
        #expect(Self.rewrites(answered) == [7])
        #expect(run.reports().last?.detail == .restoredAfterLocalEdit)
    }

    @Test("an edit while a newer revision is fetched: the newer one is written after the restore, over the agent's own file")
    func editWhileNewerFetched() {
        var run = MachineRun(TestApp.rules(hasHook: false))
        run.start(LoadedState(settings: TestApp.settings(7), source: .current, status: TestApp.settledStatus(7)))
        // No metadata held: revision 8 needs it fetched first.
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8, ["volume": 6]))))
        guard case .fetchMetadata = run.request else {
            Issue.record("no metadata request: \(String(describing: run.request))")
            return
        }
        run.settingsEdited = true
        run.send(.settingsFileChanged)
        run.advance(by: Machine.localEditSettle)
        #expect(Self.rewrites(run.actions).isEmpty, "nothing written while the metadata is on its way")
        let applied = run.answer(.metadataAnswer(TestApp.metadataDocument))
        let rewrite = applied.firstIndex { if case .rewriteSettings? = $0.file { true } else { false } }
        let persist = applied.firstIndex { if case .persist? = $0.file { true } else { false } }
        #expect(
            rewrite != nil && persist != nil && rewrite! < persist!,
            "the edit is undone before the newer revision keeps the file as previous")
        #expect(run.machine.settings?.revision == 8)
        let reports = run.reports(in: run.actions + (run.request.map { [.action($0)] } ?? []))
        #expect(reports.contains { $0.revision == 7 && $0.detail == .restoredAfterLocalEdit })
    }

    @Test("an edit found right before a new revision is written is put back first")
    func checkedBeforeWriting() {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        run.send(.settingsFileChanged)
        // Revision 8 comes before the writes settled: the check is made at once.
        let applied = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8, ["volume": 6]))))
        let rewrite = applied.firstIndex { if case .rewriteSettings? = $0.file { true } else { false } }
        let persist = applied.firstIndex { if case .persist? = $0.file { true } else { false } }
        #expect(rewrite != nil && persist != nil && rewrite! < persist!)
    }

    @Test("a restore that cannot be written is reported as an error and tried again at the next check")
    func rewriteFails() {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        run.failing[.rewriteSettings] = "No space left on device"
        run.send(.settingsFileChanged)
        run.advance(by: Machine.localEditSettle)
        run.answer(.requestCancelled)
        let report = run.request.flatMap { if case .deliverReport(let report) = $0 { report } else { nil } }
        #expect(report?.state == .error && report?.message.contains("cannot be put back") == true && report?.detail == nil)
        run.answer(.reportDelivered)
        run.failing[.rewriteSettings] = nil
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(Self.rewrites(run.actions) == [7, 7])
        #expect(!run.settingsEdited)
    }

    @Test("settings.json changed while stopped: the revision is fetched without If-None-Match and written back from the answer")
    func editedWhileStopped() throws {
        var run = MachineRun(TestApp.rules(hasHook: false))
        // The file says volume 9: what the hand edit left, not what the server sent.
        var loaded = Self.settled(editedWhileStopped: true)
        loaded.settings = TestApp.settings(7, ["greeting": "hello", "volume": 9, "pin": "1234"])
        run.start(loaded)
        #expect(run.events().contains("local-edit"))
        #expect(run.fetches().last?.known == nil)
        let served = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(7))))
        #expect(Self.rewrites(served) == [7])
        let rewritten = served.compactMap { if case .rewriteSettings(let settings)? = $0.file { settings } else { nil } }
        #expect(rewritten.first?.values["volume"] == 5)
        let report = try #require(run.reports(in: run.actions + (run.request.map { [.action($0)] } ?? [])).last)
        #expect(report.revision == 7 && report.detail == .restoredAfterLocalEdit)
        #expect(run.machine.knownRevision == 7)
    }

    @Test("a server that refuses the detail (0.7.0) gets the report again without it; refused again, it is dropped")
    func detailRefused() throws {
        var run = Self.serving(hasHook: false)
        run.settingsEdited = true
        run.answer(.settingsAnswer(SettingsAnswer(document: nil)))
        #expect(run.reports().last?.detail == .restoredAfterLocalEdit)
        let refused = run.answer(.requestFailed(TestApp.refusal(400, .badRequest)))
        #expect(run.events(in: refused).contains("report-refused"))
        let again = try #require(run.reports(in: refused).last)
        #expect(again.detail == nil && again.revision == 7 && again.state == .applied)
        #expect(again.message == "settings.json was changed on the device; revision 7 was put back")
        let dropped = run.answer(.requestFailed(TestApp.refusal(400, .badRequest)))
        #expect(run.reports(in: dropped).isEmpty && run.machine.reports.isEmpty)
        #expect(run.request?.isFetch == true)
    }

    @Test("queued reports with and without a detail survive reports.json")
    func queuedDetail() throws {
        let reports = PendingReports([
            StatusReport(revision: 6, schemaVersion: 3, state: .applied, source: .agent),
            StatusReport(revision: 7, schemaVersion: 3, state: .applied, source: .agent, detail: .restoredAfterLocalEdit),
        ])
        #expect(try PendingReports(json: try JSONParser.parse(reports.json.serialized())) == reports)
        let older = try PendingReports(json: ["reports": [["revision": 6, "schemaVersion": 3, "state": "applied", "source": "agent"]]])
        #expect(older.reports.first?.detail == nil)
    }
}
