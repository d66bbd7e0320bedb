import FleetJSON
import FleetProtocol
import Testing

@Suite("A status report on the settings request (Fleetset-Status)")
struct StatusOnPollTests {
    static let report = StatusReport(
        revision: 41, schemaVersion: 3, state: .error, message: "/volume: must be <= 10\nsecond line", source: .agent,
        detail: .restoredAfterLocalEdit)

    @Test("a report round-trips through the header value, which is base64url of its compact JSON")
    func roundTrip() throws {
        let value = try StatusOnPoll.headerValue(for: Self.report)
        #expect(try StatusOnPoll.report(fromHeaderValue: value) == Self.report)
        #expect(try Base64URL.decoded(value) == Array(Self.report.json.serialized().utf8))
        #expect(value.utf8.allSatisfy { Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8).contains($0) })
    }

    @Test("a message in any Unicode travels as ASCII and comes back the same")
    func nonASCIIMessage() throws {
        let report = StatusReport(revision: 2, schemaVersion: 1, state: .error, message: "Lautstärke › 10 — 音量 🔊", source: .app)
        let value = try StatusOnPoll.headerValue(for: report)
        #expect(value.utf8.allSatisfy { $0 < 0x80 })
        #expect(try StatusOnPoll.report(fromHeaderValue: value).message == "Lautstärke › 10 — 音量 🔊")
    }

    @Test("base64url: every length of bytes round-trips, the known vectors of RFC 4648 §10 without padding")
    func base64URL() throws {
        let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
        for (plain, encoded) in vectors {
            #expect(Base64URL.encoded(Array(plain.utf8)) == encoded)
            #expect(try Base64URL.decoded(encoded) == Array(plain.utf8))
        }
        let bytes: [UInt8] = [0xFB, 0xFF, 0xBF, 0x00, 0x3E]
        #expect(Base64URL.encoded(bytes) == "-_-_AD4")
        for count in 0...bytes.count {
            #expect(try Base64URL.decoded(Base64URL.encoded(Array(bytes.prefix(count)))) == Array(bytes.prefix(count)))
        }
    }

    @Test(
        "a value that is not base64url is refused, saying what is wrong",
        arguments: [
            ("Zm9v+A", "'+' at offset 4 is not a base64url character"),
            ("Zm9vYg==", "'=' at offset 6 is not a base64url character"),
            ("Zm9vY", "5 characters cannot be base64url without padding"),
            ("Zh", "the last character holds bits beyond the data"),
            ("", "is empty"),
            ("Zm 9", "byte 0x20 at offset 2 is not a base64url character"),
        ])
    func badBase64(value: String, expected: String) {
        #expect(throws: StatusOnPollError.self) { try StatusOnPoll.report(fromHeaderValue: value) }
        do {
            _ = try StatusOnPoll.report(fromHeaderValue: value)
        } catch {
            #expect(error.problem == .notBase64URL)
            #expect(error.description.hasPrefix("Fleetset-Status "))
            #expect(error.description.contains(expected), "\(error)")
        }
    }

    @Test("bytes that are not JSON, and JSON that is not a report, are refused, naming the member")
    func badJSON() {
        func problem(_ text: String) -> StatusOnPollError? {
            do {
                _ = try StatusOnPoll.report(fromHeaderValue: Base64URL.encoded(Array(text.utf8)))
                return nil
            } catch {
                return error
            }
        }
        #expect(problem("{\"revision\": 1,")?.problem == .notJSON)
        #expect(problem("{\"revision\": 1,")?.description.contains("Fleetset-Status does not encode JSON") == true)
        #expect(problem(#"{"revision": 1, "schemaVersion": 1, "state": "fine", "source": "agent"}"#)?.problem == .notAReport)
        #expect(
            problem(#"{"revision": 1, "schemaVersion": 1, "state": "fine", "source": "agent"}"#)?.description.contains("/state") == true)
        #expect(problem(#"{"revision": 1, "schemaVersion": 1, "state": "applied", "source": "agent", "extra": 1}"#)?.problem == .notAReport)
        // The same rule as the POST: no control characters in the message.
        let escape = problem(#"{"revision": 1, "schemaVersion": 1, "state": "error", "source": "agent", "message": "a\u001b[31m"}"#)
        #expect(escape?.problem == .notAReport)
        #expect(escape?.description.contains("/message: contains a control character (U+001B)") == true)
        #expect(problem(#"{"revision": 1, "schemaVersion": 1, "state": "applied", "source": "agent"}"#) == nil)
    }

    @Test("a report whose value would pass the cap is not made (it goes by POST), and a value past it is refused")
    func tooLong() throws {
        let long = StatusReport(
            revision: 1, schemaVersion: 1, state: .error, message: String(repeating: "é", count: StatusReport.maximumMessageLength),
            source: .agent)
        #expect(StatusOnPoll.Carried(long) == nil)
        #expect(StatusOnPoll.Carried(Self.report) != nil)
        // Encoded once, when the agent decides to carry it: the value it sends is the report's.
        let carried = StatusOnPoll.Carried(Self.report)
        #expect(carried?.report == Self.report)
        #expect(try carried?.headerValue == StatusOnPoll.headerValue(for: Self.report))
        #expect(try carried.map { try StatusOnPoll.report(fromHeaderValue: $0.headerValue) } == Self.report)
        #expect(throws: StatusOnPollError.self) { try StatusOnPoll.headerValue(for: long) }
        do {
            _ = try StatusOnPoll.report(fromHeaderValue: String(repeating: "A", count: StatusOnPoll.maximumLength + 4))
            Issue.record("a value past the cap was read")
        } catch {
            #expect(error.problem == .tooLong)
            #expect(error.description.contains("is 4100 characters, more than 4096"))
        }
    }

    @Test("the answer's Fleetset-Accepts says status among its tokens, in any case; absent or other tokens do not")
    func accepts() {
        #expect(StatusOnPoll.isAccepted(byAnswerHeader: "status"))
        #expect(StatusOnPoll.isAccepted(byAnswerHeader: "facts, Status"))
        #expect(!StatusOnPoll.isAccepted(byAnswerHeader: nil))
        #expect(!StatusOnPoll.isAccepted(byAnswerHeader: ""))
        #expect(!StatusOnPoll.isAccepted(byAnswerHeader: "statuses"))
    }
}
