import Curl
import FleetTestWaiting
import Foundation
import Testing

@Suite("A conditional request repeated by the client while the answer is 304")
struct NotModifiedRepeatTests {
    private static func plan(_ count: Int, unless headers: [String] = []) -> HTTPClient.NotModifiedRepeats {
        HTTPClient.NotModifiedRepeats(delays: Array(repeating: .milliseconds(20), count: count), unlessHeaders: headers)
    }

    @Test("unchanged answers are taken by the client; the caller gets the change, told how many 304s came before")
    func repeatsUntilChanged() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let request = HTTPClient.Request(url: "\(servers.httpsBase)/counted?id=\(id)&changeAt=4", notModifiedRepeats: Self.plan(10))
            let response = try await client.execute(request)
            #expect(response.status == 200)
            #expect(response.bodyText == "changed")
            #expect(response.headers["x-count"] == "4")
            #expect(response.notModifiedAnswersBefore == 3)
            #expect(await servers.signals.counts[id] == 4)
        }
    }

    @Test("the plan's end returns its last 304, after exactly one request more than it has delays")
    func planEnds() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let request = HTTPClient.Request(url: "\(servers.httpsBase)/counted?id=\(id)", notModifiedRepeats: Self.plan(5))
            let response = try await client.execute(request)
            #expect(response.status == 304)
            #expect(response.headers["x-count"] == "6")
            #expect(response.notModifiedAnswersBefore == 5)
            #expect(await servers.signals.counts[id] == 6)
            // Without a plan, one request is one answer.
            let once = try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/counted?id=\(id)"))
            #expect(once.headers["x-count"] == "7")
            #expect(once.notModifiedAnswersBefore == 0)
        }
    }

    @Test("no repeat starts later than the plan's bound after the first request: that 304 is the answer")
    func boundedInTime() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let plan = HTTPClient.NotModifiedRepeats(delays: [.zero, .seconds(3600), .zero], within: .seconds(600))
            let response = try await client.execute(
                HTTPClient.Request(url: "\(servers.httpsBase)/counted?id=\(id)", notModifiedRepeats: plan))
            #expect(response.status == 304)
            #expect(response.notModifiedAnswersBefore == 1, "the repeat at once went; the one an hour later would end past the bound")
            #expect(await servers.signals.counts[id] == 2)
        }
    }

    @Test("a 304 carrying a stop header reaches the caller at once")
    func stopHeader() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let request = HTTPClient.Request(
                url: "\(servers.httpsBase)/counted?id=\(id)&noteAt=2", notModifiedRepeats: Self.plan(10, unless: ["X-Note"]))
            let response = try await client.execute(request)
            #expect(response.status == 304)
            #expect(response.headers["x-note"] == "yes")
            #expect(response.notModifiedAnswersBefore == 1)
            #expect(await servers.signals.counts[id] == 2)
        }
    }

    @Test("a failure ends the plan and reaches the caller: any status but 304 is an answer")
    func otherStatusEnds() async throws {
        try await withTestClient { client, servers in
            let request = HTTPClient.Request(url: "\(servers.httpsBase)/retry-after", notModifiedRepeats: Self.plan(10))
            let response = try await client.execute(request)
            #expect(response.status == 503)
            #expect(response.notModifiedAnswersBefore == 0)
        }
    }

    @Test("cancelled between repeats: CancellationError at once, and no request goes after it")
    func cancelledBetweenRepeats() async throws {
        try await withTestClient { client, servers in
            let id = UUID().uuidString
            let request = Task {
                try await client.execute(
                    HTTPClient.Request(
                        url: "\(servers.httpsBase)/counted?id=\(id)",
                        notModifiedRepeats: HTTPClient.NotModifiedRepeats(delays: [.milliseconds(1), .seconds(3600)])))
            }
            try await Waiting.until(timeout: .seconds(30), "the server never saw the request and its first repeat") {
                await (servers.signals.counts[id] ?? 0) >= 2
            }
            request.cancel()
            await #expect(throws: CancellationError.self) { try await request.value }
            #expect(await servers.signals.counts[id] == 2)
            #expect(try await client.execute(HTTPClient.Request(url: "\(servers.httpsBase)/echo")).status == 200)
        }
    }
}
