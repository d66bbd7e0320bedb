import FleetAgentCore
import FleetClient
import FleetProtocol

extension SyncFailure {
    /// Classifies any failure of a request to the server, once; the loop decides on the value.
    public static func classifying(_ error: any Error) -> SyncFailure {
        switch error {
        case let failure as SyncFailure:
            return failure
        case let error as FleetClientError:
            switch error {
            case .refused(let status, let body?, let retryAfter):
                let details = body.details.map { "; \($0.pointer.isEmpty ? "/" : $0.pointer): \($0.message)" }.joined()
                return .refusal(
                    status: status, code: body.error, retryAfter: retryAfter,
                    summary: "the server refused: \(status) \(body.error): \(body.message)\(details)")
            case .refused(let status, nil, let retryAfter):
                return .refusal(
                    status: status, code: nil, retryAfter: retryAfter,
                    summary: "the server answered \(status) without fleetset's error description (a proxy?)")
            case .badResponse(let message):
                return .transient(message)
            }
        default:
            return .transient("\(error)")
        }
    }
}
