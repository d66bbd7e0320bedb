import FleetClient
import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// Waits, polling, until `condition` holds (for conditions that need the server).
private func eventually(
    timeout: Duration = .seconds(60), _ message: @autoclosure () -> String, _ condition: () async throws -> Bool
) async throws {
    let deadline = ContinuousClock.now + timeout
    while !(try await condition()) {
        guard ContinuousClock.now < deadline else { throw ProcessFailed(log: message()) }
        try await Task.sleep(for: .milliseconds(20))
    }
}

@Suite("fleetsetd reports its device's facts and follows the server's agent policy")
struct DeviceInfoAndPolicyTests {
    @Test(
        "the facts go at enrollment, an app's own through device-info set, then only what changed; nothing again after a restart")
    func facts() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        var agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let id = try fleet.identity().deviceId
        var info = JSONObject()
        try await eventually("no facts reached the server; agent log:\n\(agent.log)") {
            info = try await fleet.admin.device(id: id).info
            return info["agent"] != nil
        }
        // What the device is, as the system says.
        let release = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/etc/os-release")), as: UTF8.self)
        let versionID = release.split(separator: "\n").first { $0.hasPrefix("VERSION_ID=") }.map {
            $0.dropFirst("VERSION_ID=".count).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        #expect(DeviceInfo.fact("os.version", in: info) == versionID)
        let version = try String(contentsOfFile: "VERSION", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(DeviceInfo.fact("agent.version", in: info) == version)
        var name = [UInt8](repeating: 0, count: 256)
        gethostname(&name, name.count)
        #expect(DeviceInfo.fact("machine.hostname", in: info) == String(decoding: name.prefix { $0 != 0 }, as: UTF8.self))
        #expect(DeviceInfo.fact("kernel.release", in: info)?.isEmpty == false)
        let machineID = try String(contentsOfFile: "/etc/machine-id", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let idHash = try #require(DeviceInfo.fact("machine.idHash", in: info))
        #expect(idHash.count == 32 && idHash.allSatisfy(\.isHexDigit) && !machineID.contains(idHash) && idHash != machineID)
        #expect(Int64(DeviceInfo.fact("storage.stateFree", in: info) ?? "") ?? 0 > 0)
        #expect(DeviceInfo.fact("machine.bootTime", in: info).flatMap(Timestamp.parse) ?? 0 > 1_600_000_000)
        #expect(fleet.server.log.components(separatedBy: "event=device-info").count - 1 == 1)

        // An app's own facts: only they go.
        let set = try await fleet.cli(["device-info", "set", "version=2.3.1", "player=mpv"])
        #expect(set.status == 0, "\(set)")
        try await eventually("the app's facts never arrived; agent log:\n\(agent.log)") {
            DeviceInfo.fact("apps.kiosk.version", in: try await fleet.admin.device(id: id).info) == "2.3.1"
        }
        let reportLines = fleet.server.log.split(separator: "\n").filter { $0.contains("event=device-info") }
        #expect(reportLines.count == 2)
        #expect(reportLines.last?.contains("facts=apps.kiosk.player,apps.kiosk.version") == true, "\(reportLines)")
        #expect(try await fleet.admin.allDevices(where: [DeviceInfoFilter("apps.kiosk.player=mpv")!]).devices.map(\.id) == [id])
        let unset = try await fleet.cli(["device-info", "unset", "player"])
        #expect(unset.status == 0)
        try await eventually("the fact was never removed") {
            DeviceInfo.fact("apps.kiosk.player", in: try await fleet.admin.device(id: id).info) == nil
        }
        let shown = try await fleet.cli(["device-info"])
        #expect(shown.status == 0 && shown.standardOutput.contains("apps.kiosk.version") && shown.standardOutput.contains("os.version"))
        // Refused before it reaches the inbox, with the reason.
        let bad = try await fleet.cli(["device-info", "set", "bad.name=1"])
        #expect(bad.status == 1 && bad.standardError.contains("bad.name"), "\(bad)")

        // A restart reports nothing: the facts are the ones the server took.
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        agent = try fleet.startAgent()
        try await agent.waitForLog("event=device-info-unchanged")
        #expect(fleet.server.log.split(separator: "\n").filter { $0.contains("event=device-info") }.count == 3)
    }

    @Test(
        "a log level set for the group takes effect without a restart; the device's scope wins over it; a pinned key stays; status says where each came from; brief reports"
    )
    func policy() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk", "expectAck": true]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let id = try fleet.identity().deviceId
        #expect(agent.count("level=debug") == 0)

        _ = try await fleet.admin.patchPolicy(scope: .app("kiosk"), ["logLevel": "debug", "jitter": 7, "statusReports": "brief"])
        try await agent.waitForLog("log_level=debug")
        try await fleet.set("kiosk", ["greeting": "policy"])
        try await agent.waitForLog("level=debug")
        let status = try await fleet.cli(["status"])
        #expect(status.standardOutput.contains("logLevel             debug  server (app:kiosk)"), "\(status)")
        #expect(status.standardOutput.contains("kiosk jitter         0      pinned in the configuration file"), "\(status)")
        #expect(status.standardOutput.contains("kiosk statusReports  brief  server (app:kiosk)"), "\(status)")

        // Brief reports: the app's two problems become the first.
        let revision = try #require(fleet.settings("kiosk")).revision
        let ack = try await fleet.cli(["ack", "--revision", "\(revision)", "--state", "error", "--message", "no codec; no screen"])
        #expect(ack.status == 0, "\(ack)")
        try await fleet.waitForStatusLine("kiosk", containing: ["state=error", "no codec …"], agent: agent)

        // The device's own scope wins over the app's.
        _ = try await fleet.admin.patchPolicy(scope: .device(id), ["logLevel": "warning"])
        try await agent.waitForLog("log_level=warning")
        let explained = try await fleet.admin.explain(app: "kiosk", deviceID: id)
        #expect(explained.policy.sources[.logLevel] == .device(id))
        #expect(explained.deviceInfo["os"] != nil)
    }

    @Test(
        "a busy server: the agent waits the next-poll delay it is told, as no failure, and long-polls again once the server has room; a change then reaches it"
    )
    func busyServer() async throws {
        // At most 10 long-polls: from 9 held, a new one is answered at once with when to come
        // back, 2 to 4 s here (the second half of --busy-poll-interval), so that the test sees
        // the agent come back and be told again.
        let fleet = try await Fleet.start(serverArguments: ["--max-long-polls", "10", "--busy-poll-interval", "4"])
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "kiosk")
        let made = try await fleet.admin.makeEnrollmentToken(EnrollmentTokenRequest(apps: ["kiosk"], uses: 9))
        var holders: [Task<Void, Never>] = []
        defer { for holder in holders { holder.cancel() } }
        for index in 0..<9 {
            let anonymous = FleetClient(http: fleet.http, baseURL: fleet.server.url, token: nil)
            let identity = try await anonymous.enroll(enrollmentToken: made.enrollmentToken, requestId: "busy-holder-\(index)-0000000000")
            let holder = FleetClient(http: fleet.http, baseURL: fleet.server.url, token: identity.deviceToken)
            let revision = try #require(try await holder.settings(app: "kiosk")).revision
            holders.append(Task { _ = try? await holder.settingsAnswer(app: "kiosk", knownRevision: revision, wait: 240) })
        }
        try await eventually("the other devices' long-polls are not held") { try await fleet.heldLongPolls() == 9 }

        let agent = try await fleet.launchAgent([["id": "kiosk"]], storeMetadata: false)
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        // Told twice: it came back after the delay, not after a failure's backoff.
        try await agent.waitForLog("event=server-busy", count: 2)
        let delays = agent.log.split(separator: "\n").filter { $0.contains("event=server-busy") }.compactMap { line in
            line.components(separatedBy: "next_poll=\"").dropFirst().first?.split(separator: " ").first.flatMap { Double($0) }
        }
        #expect(delays.count >= 2 && delays.allSatisfy { (2...4).contains($0) }, "\(delays)")
        #expect(!agent.log.contains("event=sync-failed"), "\(agent.log)")
        #expect(fleet.status("kiosk")?.state == .applied)
        #expect(fleet.server.log.contains("event=busy"))

        // Room again: the agent's next long-poll is held (the only one), and a change reaches it.
        for holder in holders { holder.cancel() }
        try await eventually("the agent's long-poll is not held; agent log:\n\(agent.log)") { try await fleet.heldLongPolls() == 1 }
        try await fleet.set("kiosk", ["volume": 7])
        try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 7 }
    }

    @Test(
        "a group defined by a query: a device whose reported fact starts matching joins it and gets its value in one long-poll round trip; one whose fact stops matching leaves it"
    )
    func dynamicGroup() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "kiosk"]])
        defer { agent.kill() }
        try await fleet.waitForSettings("kiosk", agent: agent) { _ in true }
        let id = try fleet.identity().deviceId
        _ = try await fleet.admin.patchValues(app: "kiosk", scope: "group:player-2", patch: ["volume": 8])
        let defined = try await fleet.admin.defineGroup(
            name: "player-2", where: [try DeviceInfoFilter(parsing: #"apps.kiosk.player~^2\."#)])
        #expect(defined.devices.isEmpty && defined.summary.conditions?.map(\.description) == [#"apps.kiosk.player~^2\."#])
        // Given by hand, a group a query defines is refused, saying why.
        let byHand = try await CLIRunner.run(["admin", "devices", "set", id, "--group", "player-2"] + fleet.adminArguments)
        #expect(byHand.status != 0 && byHand.standardError.contains("defined by a query"), "\(byHand.standardError)")
        try await fleet.waitForStatus("kiosk", agent: agent) { $0.state == .applied }
        try await eventually("the agent never held a long-poll") { try await fleet.heldLongPolls() == 1 }

        // The app reports player 2.4: the agent's waiting long-poll answers with the group's value.
        let set = try await fleet.cli(["device-info", "set", "player=2.4"])
        #expect(set.status == 0, "\(set)")
        let joined = try await fleet.waitForSettings("kiosk", agent: agent) { $0.values["volume"] == 8 }
        #expect(try await fleet.admin.device(id: id).groups == ["player-2"])
        #expect(fleet.server.log.contains(#"event=groups device=\#(id) joined=player-2 left="""#), "\(fleet.server.log)")
        let shown = try await fleet.admin.group(name: "player-2")
        #expect(shown.devices == [id] && shown.summary.members == 1)
        let explained = try await CLIRunner.run(["admin", "explain", "--app", "kiosk", id] + fleet.adminArguments)
        #expect(explained.standardOutput.contains(#"player-2: where apps.kiosk.player~^2\."#), "\(explained.standardError)")

        // Player 1.9 no longer matches: out of the group, back on the default.
        #expect(try await fleet.cli(["device-info", "set", "player=1.9"]).status == 0)
        let left = try await fleet.waitForSettings("kiosk", agent: agent) { $0.revision > joined.revision && $0.values["volume"] == 5 }
        #expect(left.values["volume"] == 5)
        #expect(try await fleet.admin.device(id: id).groups.isEmpty)
        #expect(fleet.server.log.contains(#"event=groups device=\#(id) joined="" left=player-2"#))
    }
}
