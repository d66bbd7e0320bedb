import FleetAgentCore
import FleetDeviceState
import FleetJSON
import FleetProtocol
import Testing

/// Issue 34: the server refuses control characters in a report's message (but `\n` and `\t`), so
/// the agent escapes whatever a hook printed or an app acknowledged with before sending it.
@Suite("Report messages the server takes")
struct ReportMessageTests {
    static let hookOutput = "hook exited with status 1: \u{1B}[31mfailed\u{1B}[0m\r | \u{9B}2J \u{202E}"

    @Test("a message keeps its lines and tabs; escape sequences, CR, C1 and bidirectional controls are sent as escapes")
    func escaped() throws {
        let message = Machine.reportMessage(Self.hookOutput + "\n/volume:\ttoo big", detail: .full)
        #expect(message == #"hook exited with status 1: \e[31mfailed\e[0m\r | \u{9B}2J \u{202E}"# + "\n/volume:\ttoo big")
        try StatusReport.checkMessage(message, at: .root)
        #expect(Machine.reportMessage("é 日本 👍🏽\n/pin: not four digits", detail: .brief) == "é 日本 👍🏽 …")
        #expect(Machine.reportMessage("\u{1B}[2K\u{07}", detail: .brief) == #"\e[2K\x07"#)
    }

    @Test("reports an older agent queued with control characters are read, escaped at start, and sent as the server takes them")
    func queuedByAnOlderAgent() throws {
        let queued: JSONValue = [
            "reports": [
                ["revision": 2, "schemaVersion": 3, "state": "error", "message": .string(Self.hookOutput), "source": "agent"],
                ["revision": 2, "schemaVersion": 3, "state": "error", "message": "two\nlines", "source": "app"],
            ]
        ]
        let loaded = try PendingReports(json: queued)
        #expect(loaded.reports.first?.message == Self.hookOutput, "the file reads as it is")
        var run = MachineRun()
        run.start(LoadedState(reports: loaded), online: nil)
        let messages = run.machine.reports.reports.map(\.message)
        #expect(messages == [Machine.reportMessage(Self.hookOutput, detail: .full), "two\nlines"])
        for message in messages { try StatusReport.checkMessage(message, at: .root) }
    }
}
