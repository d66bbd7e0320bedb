import Curl
import FleetClient
import FleetJSON
import FleetProtocol
import FleetServerCore
import FleetTestSupport
import Testing

/// Issue 34, item 2: a device's facts and its status messages reach admins' terminals, so the
/// server refuses control characters in them, naming the member.
@Suite("Control characters in what devices report, over HTTP")
struct ControlCharacterRouteTests {
    /// The answer's status and its error message (the body as it is when it is no error body).
    static func refusal(_ response: HTTPClient.Response) -> (status: Int, message: String) {
        let body = (try? JSONParser.parse(response.body)).flatMap { try? ErrorBody(json: $0) }
        return (response.status, body?.message ?? String(decoding: response.body, as: UTF8.self))
    }

    @Test("facts holding an escape sequence, a line break, a C1 or a bidirectional control: 400 naming the fact; nothing stored")
    func facts() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            // JSON text cannot carry a raw C0 control: a device sends it as \u001b; C1 and bidi go as UTF-8.
            for (body, expected) in [
                (
                    #"{"machine": {"hostname": "kio\u001b]52;c;SGVsbG8=\u0007\u001b[2K\rFAKE LINE"}}"#,
                    "/machine/hostname: contains a control character (U+001B) at offset 3"
                ),
                (#"{"os": {"prettyName": "Debian\n12"}}"#, "/os/prettyName: contains a control character (U+000A) at offset 6"),
                ("{\"kernel\": {\"release\": \"6.1\u{9B}2J\"}}", "/kernel/release: contains a control character (U+009B) at offset 3"),
                (
                    "{\"apps\": {\"kiosk\": {\"version\": \"1.0\u{202E}\"}}}",
                    "/apps/kiosk/version: contains a bidirectional control character (U+202E) at offset 3"
                ),
            ] {
                let answer = try await server.raw(
                    .patch, "/v1/device/info", token: device.token, headers: ["Content-Type": "application/merge-patch+json"], body: body)
                let (status, message) = Self.refusal(answer)
                #expect(status == 400 && message == expected, "\(body): \(status) \(message)")
            }
            #expect(try await server.store.deviceInfo(id: device.id) == nil)
            // Ordinary text of any script is taken as it is.
            let ordinary: JSONObject = ["machine": ["hostname": "kiosk-17"], "os": ["prettyName": "Débian 12 · 日本 👍🏽"]]
            #expect(try await device.client.reportDeviceInfo(ordinary) == ordinary)
        }
    }

    @Test("a status message holding ESC, CR, DEL, a C1 or a bidirectional control: 400 naming /message; line breaks and tabs are taken")
    func statusMessages() async throws {
        try await TestFleetServer.with { server in
            try await server.putKioskMetadata()
            let device = try await server.enrollDevice()
            for (message, expected) in [
                (#"hook failed: \u001b]52;c;SGVsbG8=\u0007"#, "/message: contains a control character (U+001B) at offset 13"),
                (#"done\r\u001b[2Kall good"#, "/message: contains a control character (U+000D) at offset 4"),
                (#"x\u007f"#, "/message: contains a control character (U+007F) at offset 1"),
                ("\u{9B}2J", "/message: contains a control character (U+009B) at offset 0"),
                ("txt\u{202E}exe", "/message: contains a bidirectional control character (U+202E) at offset 3"),
            ] {
                let answer = try await server.raw(
                    .post, "/v1/apps/kiosk/status", token: device.token, headers: ["Content-Type": "application/json"],
                    body: #"{"revision": 1, "schemaVersion": 1, "state": "error", "source": "agent", "message": "\#(message)"}"#)
                let (status, text) = Self.refusal(answer)
                #expect(status == 400 && text == expected, "\(message): \(status) \(text)")
            }
            #expect(try await server.store.latestStatus(app: "kiosk", deviceID: device.id) == nil)
            #expect(server.log.events("status").isEmpty)

            // What agents send, old and new: problems one per line, and any text.
            let problems = "/volume: must be at most 10\n/pin:\tmust match ^[0-9]{4}$ · é 日本 👍🏽"
            try await device.client.reportStatus(
                app: "kiosk", StatusReport(revision: 1, schemaVersion: 1, state: .error, message: problems, source: .agent))
            #expect(try await server.admin.devices(app: "kiosk").devices.first?.status?.report.message == problems)
        }
    }
}
