import FleetDeviceState
import FleetJSON
import FleetProtocol

/// The status reports the server has not received (`reports.json`), and how they go: by
/// `POST …/status`, oldest first, or one on the next settings request (`Fleetset-Status`, see
/// `SyncMachine+StatusOnPoll`).
///
/// `reports.json` is saved only when a report cannot go now (a failure, an outcome whose
/// `status.json` waits for it, an acknowledgement whose request file waits for it) or the
/// queue is empty again: a device that reaches its server writes no file per report.
struct ReportQueue {
    var record: DurableRecord<PendingReports>
    /// How much each report says (the agent policy's `statusReports`).
    var detail: AgentPolicy.ReportDetail
    /// A report failed for a reason other than its own: the rest wait for the next turn.
    var waitForNextTurn = false
    /// The last settings answer said the server takes a report on the settings request.
    var serverTakesStatusOnPoll = false
    /// A report the server refused on the settings request: it goes by `POST`.
    var refusedOnPoll: StatusReport?

    init(loaded: PendingReports, detail: AgentPolicy.ReportDetail) {
        // Queued by an older agent, a message may hold what the server now refuses: escaped as a new one is.
        let sendable = PendingReports(
            loaded.reports.map { report in
                var sendable = report
                sendable.message = Self.message(report.message, detail: .full)
                return sendable
            })
        record = DurableRecord(sendable, onDisk: sendable)
        self.detail = detail
    }

    var reports: [StatusReport] { record.value.reports }
    var isEmpty: Bool { record.value.isEmpty }
    /// The report to `POST` next, unless the queue waits for the next turn.
    var nextToDeliver: StatusReport? { waitForNextTurn ? nil : reports.first }

    /// Adds a report to the queue in memory, its message as the policy's detail allows.
    mutating func queue(_ report: StatusReport) {
        var report = report
        report.message = Self.message(report.message, detail: detail)
        record.value.append(report)
    }

    /// `message` as a report carries it: every character the server refuses in a message (a
    /// control character but `\n` and `\t`, a bidirectional control) shown as its escape
    /// (``TerminalText``), then at most ``StatusReport/maximumMessageLength`` characters; for
    /// ``AgentPolicy/ReportDetail/brief``, its first line (the first problem) and at most
    /// ``AgentPolicy/briefMessageLength``.
    static func message(_ message: String, detail: AgentPolicy.ReportDetail) -> String {
        var text = Substring(TerminalText.escaped(message, keepingNewlinesAndTabs: true))
        var limit = StatusReport.maximumMessageLength
        var cut = false
        if detail == .brief {
            limit = AgentPolicy.briefMessageLength
            if let end = text.firstIndex(where: { $0 == "\n" || $0 == ";" }) {
                text = text[..<end]
                cut = true
            }
        }
        if text.unicodeScalars.count > limit { return String(String.UnicodeScalarView(text.unicodeScalars.prefix(limit - 1))) + "…" }
        return cut ? String(text) + " …" : String(text)
    }

    /// `report` was delivered by `POST`. Removed by value: a queue at its capacity may have
    /// dropped its oldest reports (this one among them) while it was on its way.
    mutating func delivered(_ report: StatusReport) {
        record.value.remove(report)
        left()
    }

    /// A report left the queue (delivered or dropped): `reports.json` follows once the queue is
    /// empty (until then the next delivery is near).
    private mutating func left() {
        if isEmpty, !record.isSaved { record.wantSave() }
    }

    /// What became of a report the server did not take.
    enum Refusal {
        /// Refused with its detail (a server of 0.7.0 refuses the member): sent again without it.
        case retryWithoutDetail(StatusReport)
        /// Refused for good: dropped rather than block the queue.
        case dropped
        /// Any other failure: the queue waits for the next turn (after the backoff).
        case waits
    }

    /// The `POST` of the first report failed.
    mutating func deliveryFailed(_ failure: SyncFailure) -> Refusal {
        if failure.kind == .final, var first = reports.first, first.detail != nil {
            first.detail = nil
            record.value.replaceFirst(with: first)
            if !record.isSaved { record.wantSave() }
            return .retryWithoutDetail(first)
        }
        if failure.kind == .final {
            record.value.removeFirst(1)
            left()
            return .dropped
        }
        waitForNextTurn = true
        if !record.isSaved { record.wantSave() }
        return .waits
    }

    /// A new turn (an answered settings request, a granted "sync now"): the queue goes again.
    mutating func newTurn() { waitForNextTurn = false }

    // MARK: - On the settings request

    /// The report the next settings request carries: only to a server that takes one, only when
    /// the queue holds one report, no change waits, the request is due now, and the report fits
    /// the header.
    func toCarry(fetchDue: Bool, changeWaits: @autoclosure () -> Bool) -> StatusOnPoll.Carried? {
        guard serverTakesStatusOnPoll, fetchDue, reports.count == 1, let report = reports.first, report != refusedOnPoll,
            !changeWaits()
        else { return nil }
        return StatusOnPoll.Carried(report)
    }

    /// Whether queued reports need a request other than one carrying `carrying`.
    func needAnotherRequest(than carrying: StatusOnPoll.Carried?) -> Bool {
        guard !isEmpty, !waitForNextTurn else { return false }
        return carrying.map { reports != [$0.report] } ?? true
    }

    /// What a settings answer (200 or 304) said of reports. Returns whether the report it
    /// `carried` was taken (`nil`: it carried none).
    mutating func heard(acceptsStatus: Bool, carried: StatusReport?) -> Bool? {
        serverTakesStatusOnPoll = acceptsStatus
        guard let carried else { return nil }
        guard acceptsStatus else { return false }
        record.value.remove(carried)
        left()
        return true
    }

    /// A settings request carrying `carried` failed for good: the report goes by `POST`.
    mutating func carriedRefused(_ carried: StatusReport) { refusedOnPoll = carried }
}
