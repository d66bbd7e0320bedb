import FleetJSON
import FleetProtocol

/// Status reports the server has not received yet, oldest first, kept in
/// `apps/<app>/reports.json` so that they survive restarts and power cuts.
///
/// The queue is bounded: past ``capacity`` the oldest reports are dropped (the server keeps
/// only the latest per device and app anyway; the dropped ones are only missing from its log).
public struct PendingReports: Sendable, Hashable {
    /// The most reports kept.
    public static let capacity = 100

    public private(set) var reports: [StatusReport]

    public init(_ reports: [StatusReport] = []) {
        self.reports = Array(reports.suffix(Self.capacity))
    }

    public var isEmpty: Bool { reports.isEmpty }

    /// Adds a report at the end, unless the last one queued is identical. An identical report
    /// further up is not enough: the server takes the last report it gets as the device's state,
    /// so the newest goes last (an agent that applied revision 8, then reported its restore of
    /// 7, then caught up on 8 again must end with 8, not 7).
    public mutating func append(_ report: StatusReport) {
        guard reports.last != report else { return }
        reports.append(report)
        if reports.count > Self.capacity { reports.removeFirst(reports.count - Self.capacity) }
    }

    /// Puts `report` in place of the first one (the same report, sent again in another form).
    public mutating func replaceFirst(with report: StatusReport) {
        guard !reports.isEmpty else { return }
        reports[0] = report
    }

    /// Removes the first report identical to `report` (delivered: by `POST`, or out of turn on a
    /// settings request); nothing when none is queued.
    public mutating func remove(_ report: StatusReport) {
        guard let index = reports.firstIndex(of: report) else { return }
        reports.remove(at: index)
    }

    /// Removes the first `count` reports (delivered).
    public mutating func removeFirst(_ count: Int) {
        reports.removeFirst(min(count, reports.count))
    }

    /// Reads the file form `{"reports": [...]}`.
    public init(json: JSONValue) throws(DocumentError) {
        let reader = try ObjectReader(json, allowed: ["reports"])
        guard case .array(let list)? = reader.object["reports"] else { throw reader.missingOr("reports", "must be an array") }
        var reports: [StatusReport] = []
        for (index, element) in list.enumerated() {
            // An agent from before the server refused control characters may have queued some;
            // the agent escapes them before sending.
            reports.append(
                try StatusReport(
                    json: element, at: JSONPointer.root.appending("reports").appending(index: index), acceptingAnyMessage: true))
        }
        self.init(reports)
    }

    /// The file form.
    public var json: JSONValue { ["reports": .array(reports.map(\.json))] }
}
