import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Testing

/// A report on the settings request (`Fleetset-Status`): the rules of `SyncMachine+StatusOnPoll`.
@Suite("Sync machine: the report on the next long-poll")
struct StatusOnPollMachineTests {
    static let applied8 = StatusReport(revision: 8, schemaVersion: 3, state: .applied, source: .agent)

    /// Online at revision 7; the first long-poll came back unchanged after its whole wait, from a
    /// server that takes reports on settings requests (`accepts`) or not.
    static func online(accepts: Bool = true, _ rules: SyncRules = TestApp.rules()) -> MachineRun {
        var run = MachineRun(rules)
        run.start(
            LoadedState(settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, status: TestApp.settledStatus(7)))
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil, acceptsStatus: accepts)))
        return run
    }

    /// What the request in flight carries.
    static func carried(_ run: MachineRun) -> StatusReport? {
        if case .fetchSettings(_, _, _, _, let carried)? = run.request { carried?.report } else { nil }
    }

    /// Answers the long-poll in flight with revision 8 from a server that takes reports or not.
    @discardableResult
    static func wake(_ run: inout MachineRun, accepts: Bool = true) -> [Step] {
        var produced = run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8), acceptsStatus: accepts)))
        if case .fetchMetadata = run.request { produced += run.answer(.metadataAnswer(TestApp.metadataDocument)) }
        return produced
    }

    @Test("woken: the report of the revision just applied rides on the next long-poll; no POST; delivered by its 304")
    func ridesOnTheNextLongPoll() {
        var run = Self.online()
        let applied = Self.wake(&run)
        #expect(run.reports().isEmpty, "no POST …/status")
        #expect(
            run.request
                == .fetchSettings(
                    wait: 55, knownRevision: 8, notBefore: nil, repeatsWhileUnchanged: [], carrying: StatusOnPoll.Carried(Self.applied8)))
        // Durable until delivered: reports.json holds it before status.json records the outcome.
        let saved = run.index(of: { $0 == .saveReports(PendingReports([Self.applied8])) }, in: applied)
        let status = run.index(of: \.isWriteStatus, in: applied)
        #expect(saved != nil && status != nil && saved! < status!)
        #expect(run.machine.status.revision == 8 && run.machine.status.state == .applied)

        run.advance(by: .seconds(55))
        let delivered = run.answer(.settingsAnswer(SettingsAnswer(document: nil, acceptsStatus: true)))
        #expect(run.machine.reports.isEmpty)
        #expect(delivered.contains(.saveReports(PendingReports())))
        #expect(run.events(in: delivered).contains("report-on-poll"))
        #expect(Self.carried(run) == nil && run.request?.isFetch == true, "the next long-poll carries nothing")
    }

    @Test("a server that does not say Fleetset-Accepts (an older release): the report goes by POST, exactly as before")
    func olderServer() {
        var run = Self.online(accepts: false)
        Self.wake(&run, accepts: false)
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.reportDelivered)
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 8, notBefore: nil, repeatsWhileUnchanged: []))
        // Before any answer (at start), nothing is known of the server: queued reports go by POST.
        var fresh = MachineRun()
        fresh.start(
            LoadedState(
                settings: TestApp.settings(8), source: .current, metadata: TestApp.metadata, reports: PendingReports([Self.applied8]),
                status: TestApp.settledStatus(8)))
        #expect(fresh.request == .deliverReport(Self.applied8))
    }

    @Test(
        "a transport failure or a 5xx leaves the report queued: it rides on the long-poll sent again after the backoff",
        arguments: [
            SyncFailure.transient("connection reset by peer"),
            .refusal(status: 503, code: .overloaded, retryAfter: .seconds(3), summary: "the server refused: 503 overloaded"),
        ])
    func failureKeepsIt(failure: SyncFailure) {
        var run = Self.online()
        Self.wake(&run)
        run.answer(.requestFailed(failure))
        #expect(run.machine.reports.reports == [Self.applied8])
        #expect(run.request == nil, "the backoff first")
        run.advanceToAlarm()
        #expect(Self.carried(run) == Self.applied8)
        #expect(run.reports().isEmpty)
    }

    @Test("an answer without Fleetset-Accepts (another server behind the address) delivers nothing: the report goes by POST")
    func answerWithoutAccepts() {
        var run = Self.online()
        Self.wake(&run)
        let answered = run.answer(.settingsAnswer(SettingsAnswer(document: nil, acceptsStatus: false)))
        #expect(run.events(in: answered).contains("report-on-poll-ignored"))
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.reportDelivered)
        #expect(run.machine.reports.isEmpty)
    }

    @Test("400 bad-status-header: that report goes by POST at once (no backoff), then the long-poll without it")
    func refusedHeader() {
        var run = Self.online()
        Self.wake(&run)
        let refused = run.answer(.requestFailed(TestApp.refusal(400, .badStatusHeader)))
        #expect(run.events(in: refused).contains("report-on-poll-refused"))
        #expect(!run.events(in: refused).contains("sync-failed"))
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.reportDelivered)
        #expect(run.request == .fetchSettings(wait: 55, knownRevision: 8, notBefore: nil, repeatsWhileUnchanged: []))
        #expect(run.machine.reports.isEmpty)
    }

    @Test("a report queued while a long-poll waits (the app's acknowledgement) cancels it; the long-poll goes again carrying it")
    func cancelledLongPollCarriesIt() {
        var run = Self.online()
        Self.wake(&run)
        run.advance(by: .seconds(55))
        run.answer(.settingsAnswer(SettingsAnswer(document: nil, acceptsStatus: true)))
        #expect(Self.carried(run) == nil)
        run.advance(by: .seconds(3))
        let ack = InboxDelivery(
            id: "a1", path: "/inbox/a1.json", content: .request(.ack(revision: 8, state: .applied, message: "reloaded")))
        let arrived = run.send(.inboxRequests([ack]))
        #expect(arrived.contains(.cancelRequest))
        run.answer(.requestCancelled)
        let report = StatusReport(revision: 8, schemaVersion: 3, state: .applied, message: "reloaded", source: .app)
        #expect(Self.carried(run) == report)
        #expect(run.reports().isEmpty)
        // The long-poll carrying the only queued report is not cancelled again.
        #expect(!run.send(.alarm).contains(.cancelRequest))
    }

    @Test("several reports: the older ones go by POST, oldest first, and the last rides on the long-poll")
    func severalReports() {
        var run = Self.online()
        let ack = StatusReport(revision: 8, schemaVersion: 3, state: .applied, message: "ok", source: .app)
        Self.wake(&run)
        run.send(
            .inboxRequests([
                InboxDelivery(id: "a1", path: "/inbox/a1.json", content: .request(.ack(revision: 8, state: .applied, message: "ok")))
            ]))
        #expect(run.machine.reports.reports == [Self.applied8, ack])
        run.answer(.requestCancelled)
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.reportDelivered)
        #expect(Self.carried(run) == ack)
    }

    @Test("reports.json holds what rides on the long-poll, not reports delivered since it was saved (a stop would send them again)")
    func fileFollowsTheRide() {
        var run = Self.online()
        Self.wake(&run)
        run.send(
            .inboxRequests([
                InboxDelivery(id: "a1", path: "/inbox/a1.json", content: .request(.ack(revision: 8, state: .applied, message: "ok")))
            ]))
        let ack = StatusReport(revision: 8, schemaVersion: 3, state: .applied, message: "ok", source: .app)
        #expect(run.machine.files.reports == PendingReports([Self.applied8, ack]), "saved for the ack's request file")
        run.answer(.requestCancelled)
        run.answer(.reportDelivered)
        #expect(Self.carried(run) == ack)
        #expect(run.machine.files.reports == PendingReports([ack]))
    }

    @Test("a report identical to one waiting further up is queued again at the end: the last report the server gets is the device's state")
    func newestLast() {
        let restored7 = StatusReport(revision: 7, schemaVersion: 3, state: .error, message: "settings.json was unusable", source: .agent)
        var queued = PendingReports()
        queued.append(Self.applied8)
        queued.append(restored7)
        var run = MachineRun()
        run.start(
            LoadedState(
                settings: TestApp.settings(7), source: .current, metadata: TestApp.metadata, reports: queued,
                status: TestApp.settledStatus(7)))
        // The server is back but its first answer is a failure: the reports wait for the next turn,
        // whose settings request brings revision 8 again.
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.requestFailed(.transient("connection refused")))
        run.advanceToAlarm()
        #expect(run.request?.isFetch == true)
        run.answer(.settingsAnswer(SettingsAnswer(document: TestApp.document(8), acceptsStatus: true)))
        #expect(run.machine.reports.reports == [Self.applied8, restored7, Self.applied8])
        run.answer(.reportDelivered)
        run.answer(.reportDelivered)
        #expect(Self.carried(run) == Self.applied8, "8 goes last: the server ends with the device's state")
        #expect(run.machine.files.reports == PendingReports([Self.applied8]))
    }

    @Test("a report too long for the header goes by POST")
    func tooLong() {
        var run = Self.online(accepts: true, TestApp.rules(jitter: .zero, hasHook: true))
        Self.wake(&run)
        guard case .runHook? = run.request else {
            Issue.record("no hook run: \(String(describing: run.request))")
            return
        }
        run.answer(.hookFinished(.failed(String(repeating: "ü", count: 3000))))
        let report = run.machine.reports.reports.first
        #expect(report.map { StatusOnPoll.Carried($0) == nil } == true)
        #expect(run.request == report.map(Machine.Action.deliverReport))
    }

    @Test("a change of the device waits: the report goes first, by POST, then the change, as before")
    func changeWaits() {
        var run = Self.online()
        Self.wake(&run)
        run.send(.inboxRequests([InboxDelivery(id: "r1", path: "/inbox/r1.json", content: .request(.set(["greeting": "hi"])))]))
        run.answer(.requestCancelled)
        #expect(run.request == .deliverReport(Self.applied8))
        run.answer(.reportDelivered)
        #expect(run.request == .patchSettings(["greeting": "hi"], basedOn: 8))
    }

    @Test("polling on the timer: a report is not held until the next poll is due; it goes by POST at once")
    func timerNotDue() {
        var run = Self.online(accepts: true, TestApp.rules(longPollWait: 0, pollInterval: .seconds(60), jitter: .seconds(5)))
        run.advanceToAlarm()
        Self.wake(&run)
        #expect(run.request == .deliverReport(Self.applied8))
    }
}
