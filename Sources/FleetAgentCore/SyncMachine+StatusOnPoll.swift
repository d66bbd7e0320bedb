import FleetDeviceState
import FleetProtocol

/// A report on the settings request (`Fleetset-Status`, ``FleetProtocol/StatusOnPoll``): a woken
/// device costs the server two requests per change (the answer, then the next long-poll with
/// the report), not three (the answer, a `POST …/status`, the next long-poll).
///
/// The rules:
/// - Only to a server whose last settings answer said `Fleetset-Accepts: status`; until the
///   first answer, and with a server that does not say it (an older release), reports go by
///   `POST` exactly as before.
/// - Only when the queue holds one report (the usual case: the outcome of the revision just
///   applied), no change of the device's waits (reports go before changes), the settings
///   request is due now (a request the timer or a busy server put off is not brought forward:
///   the report goes by `POST` at once, as before), and the report fits the header. Otherwise
///   the queue goes by `POST`, oldest first, until one is left.
/// - The report stays queued (and in `reports.json`, as any report not yet delivered) until the
///   request's answer: a 200 or 304 saying `Fleetset-Accepts: status` delivers it; a transport
///   failure, a 5xx or a cancellation leaves it queued for the next settings request; an answer
///   without `Fleetset-Accepts` (a server of an older release behind the same address) leaves it
///   queued for a `POST`. A 400 `bad-status-header` (or any other final refusal) sends that report
///   by `POST` instead, where the server's rules for reports apply as before.
/// - A long-poll in flight that does not carry the queued report is cancelled and sent again at
///   once carrying it: that costs one request where a `POST` and a new long-poll cost two, and
///   reports as promptly (the server records the report before the long-poll waits). Letting
///   the long-poll run to its end instead would hold the report up to its whole wait.
/// - The server records the report before it looks at the long-poll, and the agent knows only
///   from the answer: a connection lost in between sends the report again (at least once).
extension SyncMachine {
    /// The report the next settings request carries, if the rules above allow one.
    mutating func reportToCarry(_ now: Moment, fetchDue: Bool) -> StatusOnPoll.Carried? {
        reportQueue.toCarry(fetchDue: fetchDue, changeWaits: nextChangeToSend(now) != nil)
    }

    /// Takes what a settings answer (200 or 304) says of reports: whether the server takes them
    /// on settings requests, and so whether the one `carried` was recorded.
    mutating func settingsAnswerHeard(_ answer: SettingsAnswer, carried: StatusReport?) {
        switch reportQueue.heard(acceptsStatus: answer.acceptsStatus, carried: carried) {
        case nil:
            break
        case false?:
            log(
                .warning, "the server did not say it took the report on the settings request; sending it by POST",
                event: "report-on-poll-ignored", ["revision": "\(carried?.revision ?? 0)"])
        case true?:
            statusFile.checkWanted = true
            log(
                .debug, "status report delivered on the settings request", event: "report-on-poll",
                ["revision": "\(carried?.revision ?? 0)"])
        }
    }

    /// A settings request carrying `carried` failed: after a final refusal the report goes by
    /// `POST`. Returns whether the failure was the header's alone (400 `bad-status-header`):
    /// then nothing else is wrong, and the `POST` goes at once, without a backoff.
    mutating func carriedReportRefused(_ carried: StatusReport, _ failure: SyncFailure) -> Bool {
        guard failure.kind == .final else { return false }
        reportQueue.carriedRefused(carried)
        log(
            .warning, "status report refused on the settings request; sending it by POST", event: "report-on-poll-refused",
            ["revision": "\(carried.revision)", "error": failure.summary])
        return failure.code == .badStatusHeader
    }
}
