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

/// Reads each server's `fleetset_long_polls_held` until their sum is `expected`, or `timeout`
/// passes; the last readings, one per server. What a client knows (its long-poll was sent)
/// runs ahead of what a server counts (the request read and registered), so a test compares
/// the servers' own count only once it has had time to settle, never right after the client.
public func settledLongPollsHeld(
    http: HTTPClient, baseURLs: [String], adminToken: String, reaching expected: Int, timeout: Duration = .seconds(30)
) async throws -> [Int] {
    let deadline = ContinuousClock.now + timeout
    var held: [Int] = []
    while true {
        held = []
        for baseURL in baseURLs { held.append(try await longPollsHeld(http: http, baseURL: baseURL, adminToken: adminToken)) }
        if held.reduce(0, +) == expected || ContinuousClock.now >= deadline { return held }
        try await Task.sleep(for: .milliseconds(50))
    }
}
