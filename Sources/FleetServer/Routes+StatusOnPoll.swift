import FleetProtocol
import FleetServerCore
import HTTPTypes
import Hummingbird

/// A status report carried on a settings request (`Fleetset-Status`, ``StatusOnPoll``): a
/// woken device reports the revision it applied on its next long-poll, with no `POST
/// …/status` of its own.
extension Routes {
    /// The request header that carries a status report.
    static let statusHeader = HTTPField.Name(FleetHeader.status)!
    /// The answer header that says the server takes ``statusHeader``, on every settings answer.
    static let acceptsHeader = HTTPField.Name(FleetHeader.accepts)!

    /// Records the report a settings request carries in ``statusHeader``, exactly as `POST
    /// /v1/apps/{app}/status` does, before the long-poll looks at anything: the report is in
    /// even if the long-poll then waits minutes. Without the header, nothing.
    ///
    /// - Throws: 400 `bad-status-header` naming the header and what is wrong with it; the
    ///   gateway's own errors as they are.
    func recordStatusOnPoll(_ request: Request, app: String, device: Device) async throws {
        guard let value = request.headers[Self.statusHeader] else { return }
        let report: StatusReport
        do {
            report = try StatusOnPoll.report(fromHeaderValue: value)
        } catch {
            throw ServiceError(400, .badStatusHeader, error.description)
        }
        try await service.gateway.recordStatus(app: app, device: device, report)
    }
}
