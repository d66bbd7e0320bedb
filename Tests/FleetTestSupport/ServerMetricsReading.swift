import Curl

/// The long-polls a server holds now: its `fleetset_long_polls_held` gauge, read from
/// `GET /metrics` at `baseURL` with the admin token.
public func longPollsHeld(http: HTTPClient, baseURL: String, adminToken: String) async throws -> Int {
    let response = try await http.execute(
        HTTPClient.Request(url: baseURL + "/metrics", headers: ["Authorization": "Bearer " + adminToken]))
    let text = String(decoding: response.body, as: UTF8.self)
    guard response.status == 200,
        let line = text.split(separator: "\n").first(where: { $0.hasPrefix("fleetset_long_polls_held ") }),
        let value = line.split(separator: " ").last.flatMap({ Double($0) })
    else { throw ProcessFailed(log: "no fleetset_long_polls_held in GET /metrics (\(response.status)):\n\(text)") }
    return Int(value)
}
