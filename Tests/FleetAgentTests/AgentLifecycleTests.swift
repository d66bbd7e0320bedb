import FleetDeviceFiles
import FleetDeviceState
import FleetJSON
import FleetProtocol
import FleetTestSupport
import Foundation
import Testing

/// `fleetsetd`'s life as systemd sees it, and the paths where something is wrong: the notify
/// protocol, reloads, configuration errors, an offline start with a corrupt file, hooks.
@Suite("fleetsetd lifecycle and failure paths")
struct AgentLifecycleTests {
    @Test("a new device's first start, enrollment and first apply log nothing above notice, from an empty state directory")
    func quietFirstStart() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        #expect(!FileManager.default.fileExists(atPath: fleet.layout.stateDirectory), "the state directory exists before the agent")
        let agent = try await fleet.launchAgent([["id": "door"], ["id": "kiosk"]])
        defer { agent.kill() }
        for app in ["door", "kiosk"] {
            try await fleet.waitForStatusLine(app, containing: ["state=applied"], agent: agent)
        }
        try await agent.waitForLog("event=device-info")
        // A change after the first one, and a restart: still nothing to worry anyone.
        try await fleet.set("door", ["counter": 3])
        let changed = try await fleet.waitForSettings("door", agent: agent) { $0.values["counter"] == 3 }
        try await fleet.waitForStatusLine("door", containing: ["state=applied", "revision=\(changed.revision)"], agent: agent)
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        let polls = fleet.server.running.count("event=long-poll app=door")
        let again = try fleet.startAgent()
        defer { again.kill() }
        try await again.waitForLog("event=ready")
        // Back at work: its next long-poll is held by the server.
        try await fleet.server.running.waitForLog("event=long-poll app=door", count: polls + 1)
        for (name, log) in [("first start", agent.log), ("restart", again.log)] {
            let loud = log.split(separator: "\n").filter { line in
                ["level=warning", "level=error", "level=critical"].contains { line.contains($0) }
            }
            #expect(loud.isEmpty, "\(name) logged above notice:\n\(loud.joined(separator: "\n"))")
            #expect(log.contains("level=notice"), "\(name): the agent logged nothing at notice:\n\(log)")
        }
    }

    @Test("a few seconds after READY the agent hands back the pages of its start-up, once, and goes on syncing")
    func startupPagesReleased() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let agent = try await fleet.launchAgent([["id": "door"]])
        defer { agent.kill() }
        let line = try await agent.waitForLog("event=memory")
        let advised = line.split(separator: " ").first { $0.hasPrefix("advised_bytes=") }.flatMap { Int($0.dropFirst(14)) }
        #expect((advised ?? 0) > 1 << 20, "\(line)")
        try await fleet.set("door", ["counter": 7])
        try await fleet.waitForSettings("door", agent: agent) { $0.values["counter"] == 7 }
        agent.signal(SIGHUP)
        try await agent.waitForLog("event=reloaded")
        try await fleet.set("door", ["counter": 8])
        try await fleet.waitForSettings("door", agent: agent) { $0.values["counter"] == 8 }
        // Handed back once so far. That the reloaded generation hands nothing back later either
        // (once per process, not per reload; 5 s after READY=1) is the rule of
        // StartupPagesReleaseTests, which the agent follows: shown there without waiting.
        #expect(agent.count("event=memory") == 1, "once per process, not per reload")
    }

    @Test("SIGHUP applies the configuration's logLevel: at warning the info lines of an applied change stop, back at info they return")
    func reloadAppliesLogLevel() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let socket = try NotifySocket(directory: fleet.directory)
        defer { socket.close() }
        // With a hook, each applied change logs "hook ran" at info; the hook also counts its
        // runs in a file, so the test knows when the line would have been written.
        let runs = fleet.directory + "/hook-runs"
        let door: JSONValue = ["id": "door", "onChange": ["/bin/sh", "-c", .string("echo ran >> \(runs)")]]
        func hookRuns() -> Int { ((try? String(contentsOfFile: runs, encoding: .utf8)) ?? "").split(separator: "\n").count }
        let agent = try await fleet.launchAgent([door], environment: ["NOTIFY_SOCKET": socket.path])
        defer { agent.kill() }
        try await socket.waitFor("READY=1")
        try await Waiting.until(timeout: .seconds(30), "the first hook run") { hookRuns() >= 1 }
        try await agent.waitForLog("event=hook")
        let atStart = agent.count("level=info")
        try await fleet.set("door", ["counter": 1])
        try await Waiting.until(timeout: .seconds(30), "the second hook run") { hookRuns() >= 2 }
        try await agent.waitForLog("event=hook", count: 2)
        let afterChange = agent.count("level=info")
        #expect(afterChange > atStart, "applying a change logs at info:\n\(agent.log)")

        try fleet.writeConfiguration(apps: [door], extra: ["logLevel": "warning"])
        agent.signal(SIGHUP)
        try await socket.waitFor("READY=1", count: 2)
        try await fleet.set("door", ["counter": 2])
        try await Waiting.until(timeout: .seconds(30), "the third hook run") { hookRuns() >= 3 }
        #expect(agent.count("event=reloaded") == 0, "the reload's own notice line is below warning too")

        // Back at info. The third run's "hook ran" line, had it been logged, would come before
        // this reload's line (the agent logs it as the hook exits, before the SIGHUP is sent).
        try fleet.writeConfiguration(apps: [door], extra: ["logLevel": "info"])
        agent.signal(SIGHUP)
        try await agent.waitForLog("event=reloaded")
        let beforeReload = agent.log.split(separator: "\n").prefix { !$0.contains("event=reloaded") }
        #expect(beforeReload.filter { $0.contains("level=info") }.count == afterChange, "no info line at logLevel warning:\n\(agent.log)")
        try await fleet.set("door", ["counter": 3])
        try await agent.waitForLog("event=hook", count: 3)
    }

    @Test("the notify protocol: READY with STATUS, WATCHDOG at half the interval, RELOADING/READY on SIGHUP, STOPPING on SIGTERM")
    func notifyProtocol() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let socket = try NotifySocket(directory: fleet.directory)
        defer { socket.close() }
        let agent = try await fleet.launchAgent([["id": "door"]], environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "400000"])
        defer { agent.kill() }

        var lines = try await socket.waitFor("READY=1")
        let status = try #require(
            lines.first { $0.hasPrefix("STATUS=") && lines.firstIndex(of: "READY=1")! < lines.firstIndex(of: $0)! + 2 })
        #expect(status.contains("door: revision"), "\(lines)")
        try await socket.waitFor("WATCHDOG=1", count: 4)
        // Fed every 200 ms (half of WATCHDOG_USEC): four feeds span at least three intervals.
        // (Only a lower bound: a sleep never ends early, but a busy machine may make it late.)
        let feeds = socket.arrivals(of: "WATCHDOG=1")
        #expect(feeds[3] - feeds[0] >= .milliseconds(550), "\(feeds)")

        // SIGHUP with a valid file: RELOADING=1, then READY=1 again; the app syncs at once.
        agent.signal(SIGHUP)
        lines = try await socket.waitFor("READY=1", count: 2)
        let reloading = try #require(lines.firstIndex(of: "RELOADING=1"))
        #expect(reloading < lines.lastIndex(of: "READY=1")!)
        try await agent.waitForLog("event=reloaded")

        // SIGHUP with a broken file: refused, the running configuration kept, still working.
        try FileSystemWrite.text("{\"server\": 1}", to: fleet.configurationFile, mode: 0o644)
        agent.signal(SIGHUP)
        let refused = try await agent.waitForLog("event=reload-failed")
        #expect(refused.contains("/server: must be a string"), "\(refused)")
        try await socket.waitFor("READY=1", count: 3)
        try await fleet.set("door", ["counter": 3])
        try await fleet.waitForSettings("door", agent: agent) { $0.values["counter"] == 3 }

        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)
        #expect(socket.lines.contains("STOPPING=1"))
    }

    @Test(
        "no enrollment token yet: READY after readyTimeout naming the app, the watchdog still fed; the token appears and the agent enrolls")
    func waitsForEnrollmentToken() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        try await fleet.putMetadata(app: "gate")
        try fleet.writeConfiguration(apps: [["id": "gate"]], extra: ["readyTimeout": 0.3])
        let socket = try NotifySocket(directory: fleet.directory)
        defer { socket.close() }
        let agent = try fleet.startAgent(environment: ["NOTIFY_SOCKET": socket.path, "WATCHDOG_USEC": "200000"])
        defer { agent.kill() }

        let lines = try await socket.waitFor("READY=1")
        #expect(lines.contains { $0.hasPrefix("STATUS=no settings yet for gate") }, "\(lines)")
        let refused = try await agent.waitForLog("event=enroll-failed")
        #expect(refused.contains("no enrollment token") && refused.contains(fleet.enrollmentTokenFile))
        let fedBefore = socket.arrivals(of: "WATCHDOG=1").count
        try await socket.waitFor("WATCHDOG=1", count: fedBefore + 3)

        try await fleet.makeEnrollmentToken()
        let settings = try await fleet.waitForSettings("gate", agent: agent) { _ in true }
        #expect(settings.values["greeting"] == "hello")
        try await agent.waitForLog("event=enrolled")
        #expect(!agent.log.contains(try fleet.identity().deviceToken))
    }

    @Test(
        "a configuration error names the key and exits 2",
        arguments: [
            (#"{"server": "https://x", "apps": [{"id": "a"}], "polInterval": 5}"#, "/polInterval: unknown key"),
            (
                #"{"server": "https://x", "apps": [{"id": "a", "hookTimeout": -1}]}"#,
                "/apps/0/hookTimeout: must be a number of seconds from 0.1 to 3600 (got -1)"
            ),
            (
                #"{"server": "http://fleet.example.com", "allowInsecureHTTP": true, "apps": [{"id": "a"}]}"#,
                "/allowInsecureHTTP: plain http:// is allowed only to a loopback server"
            ),
            (#"{"server": "https://x", "apps": [{"id": "a", "onChange": ["reload.sh"]}]}"#, "/apps/0/onChange/0: must be an absolute path"),
            (#"{"server": "https://x", "apps": []}"#, "/apps: must be an array of 1 to 64 apps"),
            (#"{"server": "https://x", "apps": [{"id": "a"}], "server": "https://y"}"#, "duplicate key \"server\""),
        ])
    func configurationErrors(text: String, expected: String) async throws {
        let directory = try CLIRunner.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("fleetsetd.json").path
        try FileSystemWrite.text(text, to: path, mode: 0o644)
        let result = try await CLIRunner.run(["--config", path], executable: CLIRunner.product("fleetsetd"))
        #expect(result.status == 2)
        #expect(result.standardError.contains("fleetsetd: \(path): ") && result.standardError.contains(expected), "\(result.standardError)")
    }

    @Test(
        "server down at start: served from disk (a corrupt settings.json falls back to the previous generation), then catches up and delivers the queued report"
    )
    func offlineStartWithCorruptFile() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        var agent = try await fleet.launchAgent([["id": "menu"]])
        let first = try await fleet.waitForSettings("menu", agent: agent) { _ in true }
        try await fleet.set("menu", ["greeting": "second"])
        let second = try await fleet.waitForSettings("menu", agent: agent) { $0.revision > first.revision }
        try await fleet.waitForStatus("menu", agent: agent) { $0.revision == second.revision }
        agent.signal(SIGTERM)
        #expect(await agent.waitForExit(timeout: .seconds(60)) == 0)

        // The server goes away and settings.json is torn (as by a faulty disk).
        let port = fleet.server.port
        fleet.server.signal(SIGTERM)
        await #expect(fleet.server.waitForExit() == 0)
        let settingsPath = fleet.layout.settingsFile("menu").path
        let torn = try Data(contentsOf: URL(fileURLWithPath: settingsPath)).prefix(40)
        try torn.write(to: URL(fileURLWithPath: settingsPath))

        let socket = try NotifySocket(directory: fleet.directory)
        defer { socket.close() }
        agent = try fleet.startAgent(environment: ["NOTIFY_SOCKET": socket.path])
        defer { agent.kill() }
        try await socket.waitFor("READY=1")
        let restored = try await fleet.waitForSettings("menu", agent: agent) { _ in true }
        #expect(restored == first, "the previous generation is served and written back")
        try await agent.waitForLog("event=restored")
        try await agent.waitForLog("event=sync-failed")
        // Queued: the report of the second revision, which rode on the long-poll SIGTERM cut (the
        // server recorded it, but no answer said so: it goes again, at least once), the error about
        // the torn file, and the outcome of the restored revision.
        // (status.json is written once the event that logged the failure is handled: wait for it.)
        let queued = try await fleet.waitForStatus("menu", agent: agent) { $0.pendingReports == 3 && $0.lastError != nil }
        #expect(queued.lastError?.contains("could not connect to 127.0.0.1") == true, "\(queued.lastError ?? "")")
        #expect(FileManager.default.fileExists(atPath: fleet.layout.reportsFile("menu")))

        // The server comes back on the same port; the agent catches up and sends the report.
        let revived = try await ServerProcess.start(in: fleet.directory, port: port)
        defer { revived.kill() }
        #expect(try await fleet.cli(["sync"]).status == 0)
        let caughtUp = try await fleet.waitForSettings("menu", agent: agent) { $0.revision == second.revision }
        #expect(caughtUp.values["greeting"] == "second")
        try await Waiting.until("the queued report never arrived:\n\(revived.log)") {
            revived.log.contains("state=error") && revived.log.contains("settings.json was unusable")
        }
        // Every queued report went; the report of the revision caught up rides on the long-poll the
        // server holds now (recorded already), and stays in reports.json until that is answered.
        let caughtUpReport = StatusReport(revision: second.revision, schemaVersion: second.schemaVersion, state: .applied, source: .agent)
        try await Waiting.until("reports.json holds more than the report on the long-poll") {
            PendingReports.load(fleet.layout.reportsFile("menu")).reports.allSatisfy { $0 == caughtUpReport }
        }
        try await Waiting.until("the caught-up revision's report never arrived:\n\(revived.log)") {
            revived.log.split(separator: "\n").contains { $0.contains("event=status") && $0.contains("revision=\(second.revision) ") }
        }
        try await fleet.waitForStatus("menu", agent: agent) {
            $0.state == .applied && $0.pendingReports <= 1 && $0.revision == second.revision
        }
    }

    @Test(
        "hooks: one that fails, one that hangs and one that is missing are each reported as error; the settings are written and the agent lives"
    )
    func hooks() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        let marker = fleet.directory + "/hook-ran"
        let agent = try await fleet.launchAgent([
            [
                "id": "ok",
                "onChange": [
                    "/bin/sh", "-c",
                    .string("echo $FLEETSET_APP $FLEETSET_REVISION $FLEETSET_SCHEMA_VERSION $FLEETSET_SETTINGS_FILE > \(marker)"),
                ],
            ],
            ["id": "fails", "onChange": ["/bin/sh", "-c", "echo the pin is 0000 >&2; exit 3"]],
            ["id": "hangs", "onChange": ["/bin/sleep", "60"], "hookTimeout": 0.5],
            ["id": "missing", "onChange": ["/nonexistent/reload-app"]],
        ])
        defer { agent.kill() }

        let ok = try await fleet.waitForSettings("ok", agent: agent) { _ in true }
        try await Waiting.until("the ok hook never ran") { FileManager.default.fileExists(atPath: marker) }
        try await Waiting.until("the ok hook wrote nothing") { (try? String(contentsOfFile: marker, encoding: .utf8))?.isEmpty == false }
        let written = try String(contentsOfFile: marker, encoding: .utf8)
        #expect(written == "ok \(ok.revision) 1 \(fleet.layout.settingsFile("ok").path)\n")
        try await fleet.waitForStatusLine("ok", containing: ["state=applied"], agent: agent)

        let failed = try await fleet.waitForStatusLine("fails", containing: ["state=error"], agent: agent)
        #expect(failed.contains("hook /bin/sh exited with status 3: the pin is ********"), "\(failed)")
        let hung = try await fleet.waitForStatusLine("hangs", containing: ["state=error"], agent: agent)
        #expect(hung.contains("hook /bin/sleep did not finish within 0.5 s and was stopped"), "\(hung)")
        let missing = try await fleet.waitForStatusLine("missing", containing: ["state=error"], agent: agent)
        #expect(missing.contains("cannot run /nonexistent/reload-app: No such file or directory"), "\(missing)")
        for app in ["fails", "hangs", "missing"] {
            #expect(fleet.settings(app) != nil, "the settings of \(app) are written even though its hook failed")
            // status.json records the outcome once its report is safe, a moment after the log line.
            try await fleet.waitForStatus(app, agent: agent) { $0.state == .error }
        }
        // The secret appears nowhere (as itself: the server's open-file limit 20000 and the
        // audit trail's hashes hold its digits).
        #expect(!mentions(fleet.server.log, secret: "0000"), "\(fleet.server.log)")
        #expect(agent.isRunning)
        // The hung hook's process was stopped, not left behind.
        let leftovers = try await CLIRunner.run(["-c", "pgrep -f '^/bin/sleep 60$' || true"], executable: "/bin/sh")
        #expect(leftovers.standardOutput.isEmpty)
    }

    @Test(
        "with a libcurl too old to use, fleetsetd says why and exits with status 1 (systemd's start limit applies) instead of retrying at once forever"
    )
    func unusableLibcurl() async throws {
        let fleet = try await Fleet.start()
        defer { Task { await fleet.stop() } }
        // An LD_PRELOAD library that makes the real libcurl report version 7.29.0.
        let source = fleet.directory + "/old-libcurl.c"
        let library = fleet.directory + "/old-libcurl.so"
        try """
        #define _GNU_SOURCE
        #include <dlfcn.h>
        #include <curl/curl.h>
        curl_version_info_data *curl_version_info(CURLversion age) {
            static curl_version_info_data copy;
            curl_version_info_data *(*real)(CURLversion) = (curl_version_info_data *(*)(CURLversion))dlsym(RTLD_NEXT, "curl_version_info");
            copy = *real(age);
            copy.version_num = 0x071d00;
            copy.version = "7.29.0";
            return &copy;
        }
        """.write(toFile: source, atomically: true, encoding: .utf8)
        let compiled = try await CLIRunner.run(["-shared", "-fPIC", "-o", library, source, "-ldl"], executable: "/opt/swift/usr/bin/clang")
        try #require(compiled.status == 0, "\(compiled)")

        let agent = try await fleet.launchAgent([["id": "kiosk"]], environment: ["LD_PRELOAD": library])
        defer { agent.kill() }
        let status = await agent.waitForExit(timeout: .seconds(30))
        #expect(status == 1, "\(agent.log)")
        // The process may end before the reader thread has taken its last lines from the pipe.
        try await agent.waitForLog("cannot start the HTTP client; stopping", timeout: .seconds(10))
        #expect(agent.log.contains("libcurl 7.29.0 is too old: fleetset needs libcurl 7.85.0 or newer"), "\(agent.log)")
        #expect(
            agent.log.components(separatedBy: "cannot start the HTTP client; stopping").count == 2, "said once, then stopped:\n\(agent.log)"
        )
    }
}
