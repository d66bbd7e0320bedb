import Testing

@testable import Curl

@Suite("Redirect rules (RFC 9110 §15.4)")
struct RedirectRuleTests {
    @Test(
        "3xx codes that carry a Location are redirects; 304 is not",
        arguments: [
            (301, true), (302, true), (303, true), (307, true), (308, true), (300, false), (304, false), (200, false),
        ])
    func recognisesRedirects(status: Int, isRedirect: Bool) {
        #expect(RedirectRule.isRedirect(status) == isRedirect)
    }

    @Test("303 turns any method but HEAD into a GET without body")
    func seeOtherBecomesGet() {
        let patch = HTTPClient.Request(method: .patch, url: "https://a/x", headers: ["Content-Type": "application/json"], body: [1])
        let next = RedirectRule.follow(patch, status: 303, to: "https://a/y")
        #expect(next.method == .get)
        #expect(next.body == nil)
        #expect(next.headers["Content-Type"] == nil)
        #expect(next.url == "https://a/y")
        let head = RedirectRule.follow(HTTPClient.Request(method: .head, url: "https://a/x"), status: 303, to: "https://a/y")
        #expect(head.method == .head)
    }

    @Test("307 and 308 keep method and body", arguments: [307, 308])
    func temporaryAndPermanentKeepTheMethod(status: Int) {
        let put = HTTPClient.Request(method: .put, url: "https://a/x", body: [1, 2, 3])
        let next = RedirectRule.follow(put, status: status, to: "https://a/y")
        #expect(next.method == .put)
        #expect(next.body == [1, 2, 3])
    }

    @Test("301 and 302 turn a POST into a GET but keep other methods", arguments: [301, 302])
    func movedAndFound(status: Int) {
        #expect(
            RedirectRule.follow(HTTPClient.Request(method: .post, url: "https://a/x", body: [1]), status: status, to: "https://a/y").method
                == .get
        )
        #expect(
            RedirectRule.follow(HTTPClient.Request(method: .delete, url: "https://a/x"), status: status, to: "https://a/y").method
                == .delete)
    }

    @Test("the redirected request goes at once and once: no start delay again, no plan of repeats started over")
    func noDelayOrRepeatsAfterRedirect() {
        let request = HTTPClient.Request(
            url: "https://a/x", startDelay: .seconds(30), notModifiedRepeats: HTTPClient.NotModifiedRepeats(delays: [.seconds(10)]))
        let next = RedirectRule.follow(request, status: 307, to: "https://a/y")
        #expect(next.startDelay == .zero)
        #expect(next.notModifiedRepeats == nil)
        #expect(next.url == "https://a/y")
    }
}
