import FleetJSON
import FleetTestSupport
import Foundation
import Testing

/// `fleetset admin webhooks` against the real `fleetset-server`, and a message that outlives a
/// kill -9 of the server between its event and its delivery.
@Suite("Webhooks from the CLI, through a crash", .enabled(if: WebhookReceiver.present || TestTools.required))
struct WebhookCLITests {
    static let metadata = """
        {"app": "kiosk", "version": 1, "schema": {"type": "object", "properties": {
          "volume": {"type": "integer", "default": 5}}}}
        """

    @Test("a message queued before a kill -9 is delivered once after the restart; the secret is in a 0600 file and in no output or log")
    func deliveredOnceAfterKill() async throws {
        let directory = try CLIRunner.temporaryDirectory().path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var server = try await ServerProcess.start(in: directory, extraArguments: ["--webhooks-look-interval", "1"])
        defer { server.kill() }
        // Free until the receiver binds it after the kill: no other test's server is given it.
        let receiverPort = try TestTools.freePort()
        let admin = ["--server", server.url, "--token-file", directory + "/admin.token"]
        let secretFile = directory + "/hook.secret"
        let added = try await CLIRunner.run(
            [
                "admin", "webhooks", "add", "http://127.0.0.1:\(receiverPort)/hook", "--events", "metadata.stored", "--app", "kiosk",
                "--secret-file", secretFile,
            ] + admin)
        try #require(added.status == 0, "\(added.standardError) \(added.standardOutput)")
        let secret = try String(contentsOfFile: secretFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(secret.hasPrefix("whsec_"))
        let mode = try FileManager.default.attributesOfItem(atPath: secretFile)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let listed = try await CLIRunner.run(["admin", "webhooks", "list", "--json"] + admin)
        try #require(listed.status == 0, "\(listed.standardError) \(listed.standardOutput)")
        let webhooks = try #require(try JSONParser.parse(Array(listed.standardOutput.utf8)).objectValue?["webhooks"]?.arrayValue)
        let id = try #require(webhooks.first?.objectValue?["id"]?.stringValue)

        // The event: nothing listens yet, so its first attempt fails and it waits in the outbox.
        try Data(Self.metadata.utf8).write(to: URL(fileURLWithPath: directory + "/kiosk.json"))
        let stored = try await CLIRunner.run(["admin", "put-metadata", directory + "/kiosk.json"] + admin)
        #expect(stored.status == 0, "\(stored.standardError)")
        try await server.running.waitForLog("event=webhook-attempt", timeout: .seconds(30))
        server.signal(SIGKILL)
        _ = await server.waitForExit()
        let firstLog = server.log

        let receiver = try await WebhookReceiver.start(port: receiverPort)
        defer { receiver.stop() }
        try receiver.trust(secret)
        server = try await ServerProcess.start(in: directory, extraArguments: ["--webhooks-look-interval", "1"])
        let again = ["--server", server.url, "--token-file", directory + "/admin.token"]
        try await receiver.waitForRecords(1, timeout: .seconds(60))
        try await server.running.waitForLog("webhook delivered", timeout: .seconds(30))
        // Delivered, the message is never sent again: WebhookDeliveryTests.fourthTryDelivers
        // looks a day later on its own clock; here the store says delivered, after two attempts.
        #expect(receiver.records.count == 1, "\(receiver.records)")
        let shown = try await CLIRunner.run(["admin", "webhooks", "show", id, "--json"] + again)
        try #require(shown.status == 0, "\(shown.standardError) \(shown.standardOutput)")
        let messages = try #require(try JSONParser.parse(Array(shown.standardOutput.utf8)).objectValue?["messages"]?.arrayValue)
        #expect(messages.count == 1 && messages[0].objectValue?["state"] == "delivered", "\(shown.standardOutput)")
        #expect(messages[0].objectValue?["attempts"] == .number(.integer(2)))
        let records = receiver.records
        #expect(records.count == 1 && records[0].verified && records[0].id == "msg_1", "\(records)")
        #expect(records[0].body.contains("\"metadata.stored\"") && records[0].body.contains("\"kiosk\""))

        let text = try await CLIRunner.run(["admin", "webhooks", "show", id] + again)
        #expect(text.standardOutput.contains("msg_1") && text.standardOutput.contains("delivered"), "\(text.standardOutput)")
        let rotated = try await CLIRunner.run(
            ["admin", "webhooks", "rotate-secret", id, "--secret-file", directory + "/new.secret"] + again)
        #expect(rotated.status == 0, "\(rotated.standardError)")
        let newSecret = try String(contentsOfFile: directory + "/new.secret", encoding: .utf8).trimmingCharacters(
            in: .whitespacesAndNewlines)
        #expect(newSecret.hasPrefix("whsec_") && newSecret != secret)
        for output in [added, listed, stored, shown, text, rotated] {
            #expect(!mentions(output.standardOutput + output.standardError, secret: String(secret.dropFirst(6))))
            #expect(!mentions(output.standardOutput + output.standardError, secret: String(newSecret.dropFirst(6))))
        }
        for log in [firstLog, server.log] {
            #expect(!mentions(log, secret: String(secret.dropFirst(6))) && !mentions(log, secret: String(newSecret.dropFirst(6))))
            #expect(!log.contains("/hook"), "a receiver's URL is never logged, only its host")
        }
        let removed = try await CLIRunner.run(["admin", "webhooks", "remove", id] + again)
        #expect(removed.status == 0)
        let gone = try await CLIRunner.run(["admin", "webhooks", "show", id] + again)
        #expect(gone.status == 1 && gone.standardError.contains("unknown-webhook"), "\(gone.standardError)")
    }
}
