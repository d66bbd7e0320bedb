import FleetAgentCore
import FleetProtocol
import Testing

@Suite("One classification of failed requests")
struct SyncFailureTests {
    @Test(
        "with fleetset's error body: 401 authentication, 409 conflict, 408 transient, 429 throttled, other 4xx final, 5xx transient",
        arguments: [
            (401, SyncFailure.Kind.authentication), (403, .final), (404, .final), (408, .transient), (409, .conflict), (413, .final),
            (422, .final), (429, .throttled), (500, .transient), (502, .transient), (503, .transient),
        ])
    func withFleetsetBody(status: Int, kind: SyncFailure.Kind) {
        #expect(SyncFailure.kind(status: status, fleetsetCode: ErrorCode(rawValue: "some-code")) == kind)
    }

    @Test(
        "without fleetset's error body (a proxy's page) every 4xx is transient, but 429 still throttles",
        arguments: [401, 403, 404, 405, 409, 413, 422, 451, 499, 500, 503, 429])
    func withoutBody(status: Int) {
        #expect(SyncFailure.kind(status: status, fleetsetCode: nil) == (status == 429 ? .throttled : .transient))
    }

    @Test("Retry-After and the code travel with the failure; only fleetset's bad-parameter refuses long-polls")
    func carriedValues() {
        let throttled = SyncFailure.refusal(status: 503, code: nil, retryAfter: .seconds(120), summary: "busy")
        #expect(throttled.kind == .transient && throttled.retryAfter == .seconds(120) && "\(throttled)" == "busy")
        #expect(SyncFailure.refusal(status: 400, code: .badParameter, retryAfter: nil, summary: "wait").refusesLongPoll)
        #expect(!SyncFailure.refusal(status: 400, code: nil, retryAfter: nil, summary: "proxy").refusesLongPoll)
        #expect(!SyncFailure.refusal(status: 400, code: .invalidValues, retryAfter: nil, summary: "x").refusesLongPoll)
        #expect(SyncFailure.transient("could not connect").kind == .transient)
    }
}
